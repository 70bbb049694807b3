import micropython


@micropython.native
def doubled(x):
    return 2 * x


@micropython.viper
def summed(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def checked(x):
    assert x > 0, "x must be positive"
    return x
