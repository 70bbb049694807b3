# A package's __init__ (lib/greet/__init__.py), compiled to lib/greet/__init__.mpy and imported as greet.
from greet.words import WORD


def hello():
    return "hello " + WORD
