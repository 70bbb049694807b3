# machine module shim for the virtual board: what the firmware uses of UART, Pin, WDT, RTC, reset_cause,
# wake_reason, unique_id, reset and the sleeps. The UART is the board end of a pseudo-terminal that the runner
# relays (paced, noisy) to the host end it announces as `serial-port: PATH`.

import binascii  # noqa: F401  (built in on a chip: in sys.modules before the firmware's heap is pinned, as it was)
import os
import sys
import termios
import time

import nor_flash
import vboard_state

PWRON_RESET = 1
HARD_RESET = 2
WDT_RESET = 3
DEEPSLEEP_RESET = 4
SOFT_RESET = 5

# machine.wake_reason() values (the ESP32 port's, ESP-IDF's esp_sleep_wakeup_cause_t): 0 after a reset that was
# not a wake from sleep.
PIN_WAKE = EXT0_WAKE = 2
EXT1_WAKE = 3
TIMER_WAKE = 4
TOUCHPAD_WAKE = 5
ULP_WAKE = 6
# Pin.irq(wake=...) values.
SLEEP = 2
DEEPSLEEP = 4

# Exit statuses by which the board process tells the runner "reset me" (host_bridge.vboard.runner): a hard reset
# reboots a real board from the ROM; a soft reset restarts MicroPython (boot.py, main.py) on the same chip.
RESET_EXIT_STATUS = 99
SOFT_RESET_EXIT_STATUS = 98
# RTC slow memory the ESP32 port gives the application (MICROPY_HW_RTC_USER_MEM_MAX).
_RTC_MEMORY = 2048

_VMIN = 6
_VTIME = 5


def reset_cause():
    return int(vboard_state.env("VBOARD_RESET_CAUSE", str(PWRON_RESET)))


def unique_id():
    uid = vboard_state.env("VBOARD_UID", "24d7eb000001")
    return bytes(int(uid[i : i + 2], 16) for i in range(0, len(uid), 2))


def wake_reason():
    return int(vboard_state.env("VBOARD_WAKE_REASON", "0"))


def reset():
    sys.exit(RESET_EXIT_STATUS)


def deepsleep(time_ms=0):
    """The chip powers down all but its RTC: this boot ends here, RAM and open sockets with it (closed by the
    kernel, no DISCONNECT), and the runner boots it again at once with reset_cause() DEEPSLEEP_RESET and
    wake_reason() TIMER_WAKE, its clock `time_ms` later. Without a time there is no wake: the board sleeps until
    it is reset, and the runner ends the run. Like a power cut, nothing after this call runs, no finally block
    either: the process ends by a signal the runner tells apart (SIGUSR1), sent by a shell to its parent, as the
    Unix port has no kill()."""
    state = vboard_state.rtc()
    now = time.ticks_ms()
    state["awake_ms"] = time.ticks_diff(now, vboard_state.started_ms)  # (light sleeps included)
    begun = vboard_state.firmware_us
    state["firmware_us"] = time.ticks_diff(time.ticks_us(), begun) if begun is not None else 1000 * state["awake_ms"]
    state["emulated_us"] = vboard_state.emulated_us - vboard_state.firmware_emulated_us
    state["script"] = vboard_state.script
    state["loaded"] = sorted(sys.modules)
    time_ms = max(0, int(time_ms))
    state["sleep_ms"] = time_ms if time_ms else -1
    state["clock_ms"] += time_ms
    state["deep"] += 1
    state["deep_ms"] += time_ms
    vboard_state.save_rtc()
    os.system("kill -USR1 $PPID")
    while True:  # never return: the signal ends the process
        pass


def lightsleep(time_ms=0):
    """RAM is kept and the call returns, its time slept in no host time: the clock and the ticks move on by
    `time_ms`. The radio is off meanwhile: a sleep longer than the access point's beacon timeout loses the WiFi
    association (network.WLAN), as a chip's station does."""
    time_ms = max(0, int(time_ms))
    time.slept(time_ms)
    state = vboard_state.rtc()
    state["light"] += 1
    state["light_ms"] += time_ms
    vboard_state.save_rtc()
    network = sys.modules.get("network")
    if network is not None:
        network.radio_off(time_ms)


class RTC:
    """The RTC: its clock (datetime) and its slow memory, which keeps its bytes through deep sleep and resets and
    loses them at a power cut."""

    def __init__(self, id=0):
        pass

    def datetime(self, when=None):
        if when is None:
            t = time.localtime()
            return (t[0], t[1], t[2], t[6], t[3], t[4], t[5], 0)
        year, month, day, _weekday, hour, minute, second = when[:7]
        target = time.mktime((year, month, day, hour, minute, second, 0, 0))
        vboard_state.rtc()["clock_ms"] += int((target - time.time()) * 1000)
        vboard_state.save_rtc()
        return None

    def init(self, when):
        self.datetime(when)

    def memory(self, data=None):
        begun = time.ticks_us()  # (a memory copy on a chip: the emulation's time, counted apart)
        try:
            if data is None:
                return vboard_state.rtc_memory()
            if len(data) > _RTC_MEMORY:
                raise ValueError("buffer too long")
            vboard_state.rtc_memory(data)
            return None
        finally:
            vboard_state.emulated_us += time.ticks_diff(time.ticks_us(), begun)


def soft_reset():
    sys.exit(SOFT_RESET_EXIT_STATUS)


def freq(hz=None):
    return 240000000


def idle():
    time.sleep_ms(1)


class Pin:
    """A GPIO with nothing wired to it: an output reads what it drives; an input reads its pull (1 with PULL_UP, 0
    with PULL_DOWN or none: a floating pin reads either on a chip), so that a button on a pull-up reads released.
    irq() keeps its handler; nothing here drives a pin, so it never runs."""

    IN = 1
    OUT = 3
    OPEN_DRAIN = 7
    PULL_UP = 1
    PULL_DOWN = 2
    IRQ_RISING = 1
    IRQ_FALLING = 2
    WAKE_LOW = 4
    WAKE_HIGH = 5

    def __init__(self, pin_id, mode=-1, pull=-1, value=None):
        self.id = pin_id
        self._mode = self.IN
        self._pull = None
        self._value = 0
        self._handler = None
        self.init(mode, pull, value)

    def init(self, mode=-1, pull=-1, value=None):
        if mode != -1:
            self._mode = mode
        if pull != -1:
            self._pull = pull
        if value is not None:
            self._value = int(bool(value))

    def value(self, value=None):
        if value is not None:
            self._value = int(bool(value))
            return None
        if self._mode == self.IN:
            return 1 if self._pull == self.PULL_UP else 0
        if self._mode == self.OPEN_DRAIN and self._value and self._pull != self.PULL_UP:
            return 0  # released, and nothing pulls it up
        return self._value

    def __call__(self, value=None):
        return self.value(value)

    def on(self):
        self._value = 1

    def off(self):
        self._value = 0

    def toggle(self):
        self._value ^= 1

    def mode(self, mode=None):
        if mode is None:
            return self._mode
        self._mode = mode

    def pull(self, pull=-1):
        if pull == -1:
            return self._pull
        self._pull = pull

    def irq(self, handler=None, trigger=3, wake=None, hard=False):
        self._handler = handler
        return self


class WDT:
    # The Unix port has no timer interrupt to bite with; feed() is accepted so firmware runs unchanged.
    def __init__(self, id=0, timeout=5000):
        self.timeout = timeout

    def feed(self):
        pass


# With flash timing on (VBOARD_FLASH_TIMING=1), the UART during a flash program or erase is modelled as an
# ESP32's: its flash cache is off, so the UART's interrupt (not in IRAM) waits; bytes that had arrived before
# are safe in the driver's ring buffer, and of those that arrive during it the 128-byte hardware receive FIFO
# keeps the first 128, the rest are lost (said on stderr). What arrived during the operation is told from what
# arrived before by the baud rate: at most its bytes in that time, the newest.
_RX_FIFO = 128
_HELD = 8192  # what the model may hold after a stall: more than a pty buffers


class UART:
    def __init__(self, uart_id, baudrate=115200, **kwargs):
        path = vboard_state.env("VBOARD_UART")
        if path is None:
            raise OSError(19)  # ENODEV: the runner gave this board no serial line
        self.id = uart_id
        self._held = None  # the stall model's bytes (made at the first stall)
        self._held_at = 0
        self._held_n = 0
        self.baudrate = baudrate
        if vboard_state.env("VBOARD_FLASH_TIMING") == "1":
            nor_flash.uart = self
        self._file = open(path, "r+b")
        fd = self._file.fileno()
        termios.setraw(fd)
        # Non-blocking reads, as machine.UART with timeout=0: return what is there, at once.
        attrs = termios.tcgetattr(fd)
        attrs[6][_VMIN] = 0
        attrs[6][_VTIME] = 0
        termios.tcsetattr(fd, termios.TCSANOW, attrs)

    def init(self, baudrate=115200, **kwargs):
        self.baudrate = baudrate

    def deinit(self):
        self._file.close()

    def fileno(self):
        return self._file.fileno()

    def any(self):
        import select

        if self._held_n:
            return self._held_n
        poller = select.poll()
        poller.register(self._file.fileno(), select.POLLIN)
        return 1 if poller.poll(0) else 0

    def read(self, nbytes=4096):
        if self._held_n:  # the stall model's bytes first (older than the pty's), alone
            buf = bytearray(min(nbytes, self._held_n))
            return bytes(buf[: self.readinto(buf)])
        data = self._file.read(nbytes)
        return data if data else None

    def readinto(self, buf, nbytes=None):
        mv = memoryview(buf)
        if nbytes is not None:
            mv = mv[:nbytes]
        n = 0
        if self._held_n:  # older than anything still in the pty
            n = min(len(mv), self._held_n)
            at = self._held_at
            mv[:n] = memoryview(self._held)[at : at + n]
            self._held_at += n
            self._held_n -= n
            if n == len(mv):
                return n
            mv = mv[n:]
        got = self._file.readinto(mv)
        n += got or 0
        return n if n else None

    def stall(self, us, begun):
        """A flash operation of `us` microseconds, with the UART as an ESP32's then (see _RX_FIFO)."""
        nor_flash.busy_us(us, begun)
        if self._held is None:
            self._held = bytearray(_HELD)
        held = self._held
        n = self._held_n
        if self._held_at:  # what is left to the front
            held[:n] = held[self._held_at : self._held_at + n]
            self._held_at = 0
        got = self._file.readinto(memoryview(held)[n:]) or 0
        lost = min(got, us * self.baudrate // 10000000 + 1) - _RX_FIFO
        if lost > 0:  # the newest bytes, those beyond the FIFO's first 128 of the operation
            got -= lost
            sys.stderr.write(
                "vboard: uart receive FIFO overflowed during a %d us flash operation: %d bytes lost\n" % (us, lost)
            )
        self._held_n = n + got

    def write(self, buf):
        return self._file.write(buf)

    def flush(self):
        pass
