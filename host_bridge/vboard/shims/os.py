# os module shim for the virtual board: the Unix port's own `os`, with uname() as an ESP32's answers it (the port
# has none). Kept out of firmware/: C in the image on a real board.
import sys

_path = sys.path
sys.path = []  # the built-in module, not this file
try:
    from os import *  # noqa: F403
finally:
    sys.path = _path

from collections import namedtuple  # noqa: E402

_Uname = namedtuple("uname_result", ("sysname", "nodename", "release", "version", "machine"))


def uname():
    """As an ESP32's MicroPython answers: sysname and nodename "esp32", the release, and a machine that ends
    "with ESP32" as a chip's does; the machine says it is the virtual board."""
    release = "%d.%d.%d" % sys.implementation.version[:3]
    return _Uname("esp32", "esp32", release, "v%s (virtual board)" % release, "Virtual ESP32 board with ESP32")
