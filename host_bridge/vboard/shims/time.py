# time module shim for the virtual board: the Unix port's own `time`, with the board's clock. A chip's clock (its
# RTC timer) runs on through deep and light sleep; the virtual board sleeps in no host time at all, so its clock
# is the host's plus what it has slept (and what RTC.datetime() set), kept in vboard_state.rtc()["clock_ms"].
#
# time(), time_ns(), localtime(), gmtime() and mktime() read that clock, from the ESP32 port's epoch (the runner
# sets TZ=UTC: a chip has no time zone). The ticks are the port's: they start again at each boot and wake, as a
# chip's do, because the runner starts each boot's process in a time namespace of its own (runner.fresh_clocks).
# The port's C code reads the same count (asyncio's task queue), so they are never shifted here but at a light
# sleep, after which they go on from where they were, as a chip's do (ticks_ms and its kin are swapped for shifted
# ones at the first light sleep, so that a board that never sleeps keeps the port's own).
import sys

_path = sys.path
sys.path = []  # the built-in module, not this file
try:
    import time as _port
    from time import *  # noqa: F403
finally:
    sys.path = _path

import vboard_state

# The ESP32 port counts from 2000-01-01, MicroPython's embedded epoch (gmtime(0)[0] is 2000); the Unix port
# counts from 1970-01-01. The seconds between the two:
_FROM_1970 = 946684800


def _clock_ms():
    return vboard_state.rtc()["clock_ms"]


def time():
    """Whole seconds since 2000-01-01, as the ESP32 port's time() gives them (an int; time_ns() has the rest)."""
    return int(_port.time() + _clock_ms() / 1000) - _FROM_1970


def time_ns():
    return _port.time_ns() + _clock_ms() * 1000000 - _FROM_1970 * 1000000000


def localtime(secs=None):
    return _port.localtime(int(time() if secs is None else secs) + _FROM_1970)


def gmtime(secs=None):
    return _port.gmtime(int(time() if secs is None else secs) + _FROM_1970)


def mktime(when):
    return int(_port.mktime(when)) - _FROM_1970


_shift_ms = 0


def _ticks_ms():
    return _port.ticks_add(_port.ticks_ms(), _shift_ms)


def _ticks_us():
    return _port.ticks_add(_port.ticks_us(), _shift_ms * 1000)


def slept(ms):
    """A light sleep of `ms` milliseconds took no host time: the clock and the ticks move on by it."""
    global _shift_ms, ticks_ms, ticks_us
    vboard_state.rtc()["clock_ms"] += ms
    _shift_ms += ms
    ticks_ms = _ticks_ms
    ticks_us = _ticks_us
