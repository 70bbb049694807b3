# The reference unit of figure 1's CPU figures (profile.py, cpu.py): a fixed MicroPython loop timed in the same
# process as what it measures, so that a message's cost is stated in units that move with the interpreter's speed,
# not with the machine's.
import time


def reference(rounds=20, iterations=1000):
    """The best of `rounds` timings of `iterations` iterations of a fixed loop of small-int arithmetic, a
    bytearray store and a call (what a message's path is made of, no I/O, no allocation; every value stays a
    small int on a 32-bit chip too). Returns us per `iterations`."""
    buf = bytearray(64)
    best = None
    for _ in range(rounds):
        x = 1
        start = time.ticks_us()
        for i in range(iterations):
            x = (x * 75 + 74) % 65537
            buf[i & 63] = x & 0xFF
            len(buf)
        spent = time.ticks_diff(time.ticks_us(), start)
        best = spent if best is None or spent < best else best
    return best
