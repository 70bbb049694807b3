WORD = "world"
