# machine module shim for the virtual board: what the firmware uses of UART, Pin, WDT, reset_cause,
# unique_id and reset. The UART is the board end of a pseudo-terminal that the runner relays (paced, noisy)
# to the host end it announces as `serial-port: PATH`.

import sys
import termios
import time

import vboard_state

PWRON_RESET = 1
HARD_RESET = 2
WDT_RESET = 3
DEEPSLEEP_RESET = 4
SOFT_RESET = 5

# Exit statuses by which the board process tells the runner "reset me" (host_bridge.vboard.runner): a hard reset
# reboots a real board from the ROM; a soft reset restarts MicroPython (boot.py, main.py) on the same chip.
RESET_EXIT_STATUS = 99
SOFT_RESET_EXIT_STATUS = 98

_VMIN = 6
_VTIME = 5


def reset_cause():
    return int(vboard_state.env("VBOARD_RESET_CAUSE", str(PWRON_RESET)))


def unique_id():
    uid = vboard_state.env("VBOARD_UID", "24d7eb000001")
    return bytes(int(uid[i : i + 2], 16) for i in range(0, len(uid), 2))


def reset():
    sys.exit(RESET_EXIT_STATUS)


def soft_reset():
    sys.exit(SOFT_RESET_EXIT_STATUS)


def freq(hz=None):
    return 240000000


def idle():
    time.sleep_ms(1)


class Pin:
    IN = 1
    OUT = 3
    OPEN_DRAIN = 7
    PULL_UP = 1
    PULL_DOWN = 2

    def __init__(self, pin_id, mode=-1, pull=-1, value=None):
        self.id = pin_id
        self._value = 0 if value is None else int(bool(value))

    def init(self, mode=-1, pull=-1, value=None):
        if value is not None:
            self._value = int(bool(value))

    def value(self, value=None):
        if value is None:
            return self._value
        self._value = int(bool(value))
        return None

    def on(self):
        self._value = 1

    def off(self):
        self._value = 0


class WDT:
    # The Unix port has no timer interrupt to bite with; feed() is accepted so firmware runs unchanged.
    def __init__(self, id=0, timeout=5000):
        self.timeout = timeout

    def feed(self):
        pass


class UART:
    def __init__(self, uart_id, baudrate=115200, **kwargs):
        path = vboard_state.env("VBOARD_UART")
        if path is None:
            raise OSError(19)  # ENODEV: the runner gave this board no serial line
        self.id = uart_id
        self._file = open(path, "r+b")
        fd = self._file.fileno()
        termios.setraw(fd)
        # Non-blocking reads, as machine.UART with timeout=0: return what is there, at once.
        attrs = termios.tcgetattr(fd)
        attrs[6][_VMIN] = 0
        attrs[6][_VTIME] = 0
        termios.tcsetattr(fd, termios.TCSANOW, attrs)
        self.baudrate = baudrate

    def init(self, baudrate=115200, **kwargs):
        self.baudrate = baudrate

    def deinit(self):
        self._file.close()

    def fileno(self):
        return self._file.fileno()

    def any(self):
        import select

        poller = select.poll()
        poller.register(self._file.fileno(), select.POLLIN)
        return 1 if poller.poll(0) else 0

    def read(self, nbytes=4096):
        data = self._file.read(nbytes)
        return data if data else None

    def readinto(self, buf, nbytes=None):
        mv = memoryview(buf)
        if nbytes is not None:
            mv = mv[:nbytes]
        n = self._file.readinto(mv)
        return n if n else None

    def write(self, buf):
        return self._file.write(buf)

    def flush(self):
        pass
