# The bench apps' clock (tools/bench_energy.py): a phase's microseconds on the virtual board with the time its
# hardware's emulation takes (flash, RTC memory) left out, as a chip spends none of the interpreter's time there.
import time

try:
    import vboard_state  # the virtual board's own module
except ImportError:
    vboard_state = None


def now():
    return time.ticks_us(), vboard_state.emulated_us if vboard_state else 0


def since(mark):
    """Microseconds since `mark` (now()), the emulated hardware's own left out."""
    t, emulated = now()
    return time.ticks_diff(t, mark[0]) - (emulated - mark[1])
