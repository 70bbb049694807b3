# machine module shim for the virtual board: what the firmware uses of UART, Pin, WDT, RTC, reset_cause,
# wake_reason, unique_id, reset and the sleeps, and what sensor firmware uses (ADC, I2C, SPI, PWM, Timer; the
# devices on the buses are vbus.py's). The UART is the board end of a pseudo-terminal that the runner
# relays (paced, noisy) to the host end it announces as `serial-port: PATH`.

import binascii  # noqa: F401  (built in on a chip: in sys.modules before the firmware's heap is pinned, as it was)
import os
import sys
import termios
import time

import nor_flash
import vboard_state
import vbus  # (the buses' devices: loaded here, before the firmware's heap is pinned; a chip's are C, in none of it)

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
WDT_EXIT_STATUS = 95  # the watchdog bit: the runner boots the board again with reset_cause() WDT_RESET
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
    state["slept_us"] = vboard_state.slept_us  # this boot's light sleeps, in firmware_us too
    state["air_us"] = vboard_state.air_us  # this boot's waits on the ESP-NOW air, in emulated_us too
    vboard_state.ending()  # (after the time is taken: none of this is the firmware's)
    state["script"] = vboard_state.script
    imported = vboard_state.imports(sys.modules)
    state["imported"] = sorted(imported)  # (with VBOARD_IMPORTS: what this boot's own code imported)
    state["loaded"] = sorted(set(sys.modules) | imported)
    time_ms = max(0, int(time_ms))
    state["sleep_ms"] = time_ms if time_ms else -1
    esp32 = sys.modules.get("esp32")
    state["wake_pins"] = dict(esp32.wake_pins) if esp32 is not None else {}  # (the runner waits on them)
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
    begun = time.ticks_us()
    time_ms = max(0, int(time_ms))
    time.slept(time_ms)
    vboard_state.slept_us += time_ms * 1000  # (on the ticks: a wake's time to its deep sleep counts it apart)
    state = vboard_state.rtc()
    state["light"] += 1
    state["light_ms"] += time_ms
    vboard_state.save_rtc()
    network = sys.modules.get("network")
    if network is not None:
        network.radio_off(time_ms)
    # The emulation's own time here (the RTC's file) is the emulation's, as a chip spends none of it.
    vboard_state.emulated_us += time.ticks_diff(time.ticks_us(), begun) - time_ms * 1000


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


_FREQS = (80000000, 160000000, 240000000)
_freq = [240000000]


def freq(hz=None):
    """The CPU clock: 80, 160 or 240 MHz as an ESP32 takes them (the virtual board's speed does not change)."""
    if hz is None:
        return _freq[0]
    if hz not in _FREQS:
        raise ValueError("frequency must be 20MHz, 40MHz, 80Mhz, 160MHz or 240MHz")
    _freq[0] = hz


def idle():
    time.sleep_ms(1)


# What happens while the firmware waits: a watchdog that was not fed bites, and a pin the bench drove to a new
# level runs its irq() handler. The port has no timer interrupt to do either, so they happen in the board's
# waits: time.sleep(), sleep_ms(), sleep_us() and machine.idle() are swapped for ones that wait in slices of at
# most 10 ms and look between them, from the first WDT or Pin.irq() on (a board with neither keeps the port's).
_wdt = [None]  # [ticks_ms deadline] of the running watchdog, once one is made
_irqs = []  # pins with a handler
_gpio = {}  # pin id -> its state (Pin.__init__), shared by every Pin object of it
_timers = []  # running Timers
_watchers = []  # other shims' looks (espnow's irq()): called in the board's waits, as the handlers are
_irq_state = [1]  # [1] while interrupts are enabled (disable_irq(), enable_irq())
_SLICE_MS = 10


def _waits_watched():
    if time.sleep_ms is not _sleep_ms:
        time.sleep, time.sleep_ms, time.sleep_us = _sleep, _sleep_ms, _sleep_us


def watch(look):
    """Another shim's `look()` runs in the board's waits from now on (espnow.irq's callbacks)."""
    if look not in _watchers:
        _watchers.append(look)
    _waits_watched()


def watched():
    """Whether the board's waits look around (a WDT, a handler): a shim's own wait then waits in slices too."""
    return time.sleep_ms is _sleep_ms


def look():
    _look()


def _sleep_ms(ms):
    end = time.ticks_add(time.ticks_ms(), int(ms))
    while True:
        _look()
        left = time.ticks_diff(end, time.ticks_ms())
        if left <= 0:
            return
        time._port.sleep_ms(min(left, _SLICE_MS))


def _sleep(s):
    _sleep_ms(s * 1000)


def _sleep_us(us):
    if us >= 1000:
        _sleep_ms(us // 1000)
        us %= 1000
    time._port.sleep_us(us)


def wdt_armed():
    """Whether a task watchdog runs (the shims' blocking calls then wait in slices, checking it)."""
    return _wdt[0] is not None


def wdt_check():
    """Reset the board when its task watchdog went unfed past its timeout: in every wait, and in the shims'
    blocking calls (a socket's recv() blocks the task on a chip, and its watchdog resets it)."""
    deadline = _wdt[0]
    if deadline is not None and time.ticks_diff(time.ticks_ms(), deadline) > 0:
        sys.stderr.write("vboard: the watchdog was not fed: reset\n")
        sys.exit(WDT_EXIT_STATUS)


def _look():
    wdt_check()
    if not _irq_state[0]:
        return
    for pin in _irqs:
        level = pin.value()
        if level != pin._seen:
            pin._seen = level
            if pin._trigger & (Pin.IRQ_RISING if level else Pin.IRQ_FALLING):
                pin._handler(pin)
    for timer in list(_timers):
        timer._due()
    for other in _watchers:
        other()


def disable_irq():
    """Handlers (Pin.irq, Timer) wait until enable_irq(); returns the state to give it."""
    state = _irq_state[0]
    _irq_state[0] = 0
    return state


def enable_irq(state=1):
    _irq_state[0] = 1 if state else 0


def time_pulse_us(pin, pulse_level, timeout_us=1000000):
    """The length of the next pulse at `pulse_level` on an input the bench drives: -2 when none begins within
    timeout_us, -1 when it lasts longer. Levels are looked at every 10 ms or less (the bench's edges are no finer)."""
    began = time.ticks_us()
    start = None
    while True:
        now = time.ticks_us()
        if pin.value() == pulse_level:
            if start is None:
                start = now
        elif start is not None:
            return time.ticks_diff(now, start)
        if time.ticks_diff(now, start if start is not None else began) >= timeout_us:
            return -1 if start is not None else -2
        time._port.sleep_ms(1)


def bitstream(pin, encoding, timing, buf):
    """buf's bits out on the pin, each a high then a low of `timing`'s nanoseconds (encoding 0, the ESP32 port's
    only one, on its RMT): what a WS2812 strip on the pin receives (the model: vparts.py)."""
    import vparts

    vparts.bitstream(pin, encoding, timing, buf)


class Pin:
    """A GPIO: an output reads what it drives; an input reads what the bench drives it to (VirtualBoard.drive(),
    the HIL plugin's hil_drive), else its pull (1 with PULL_UP, 0 with PULL_DOWN or none: a floating pin reads
    either on a chip), so that a button on a pull-up reads released. irq()'s handler runs when a driven level
    changes as its trigger asks, in the board's next wait (_look)."""

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
        gpio = _gpio.get(pin_id)
        if gpio is None:
            # The pin's, not this object's: its mode, pull, the level it drives, and the level last told the host.
            gpio = _gpio[pin_id] = [self.IN, None, 0, None]
        self._gpio = gpio
        self._handler = None
        self._trigger = 0
        self._seen = 0
        self.init(mode, pull, value)

    def init(self, mode=-1, pull=-1, value=None):
        if mode != -1:
            self._gpio[0] = mode
        if pull != -1:
            self._gpio[1] = pull
        if value is not None:
            self._gpio[2] = int(bool(value))
        self._tell()

    def _drive(self, level):
        self._gpio[2] = level
        self._tell()

    def _tell(self):
        """An output's level, told to the host when it changes (the board's outputs and trace: VirtualBoard.pin(),
        vcd())."""
        gpio = self._gpio
        if gpio[0] in (self.OUT, self.OPEN_DRAIN) and gpio[3] != gpio[2]:
            gpio[3] = gpio[2]
            vboard_state.pin_out(self.id, gpio[2])

    def value(self, value=None):
        if value is not None:
            self._drive(int(bool(value)))
            return None
        mode, pull, level = self._gpio[0], self._gpio[1], self._gpio[2]
        if mode == self.IN:
            driven = vboard_state.driven("pins", self.id)
            if driven is not None:
                return int(bool(driven))
            return 1 if pull == self.PULL_UP else 0
        if mode == self.OPEN_DRAIN and level and pull != self.PULL_UP:
            return 0  # released, and nothing pulls it up
        return level

    def __call__(self, value=None):
        return self.value(value)

    def on(self):
        self._drive(1)

    def off(self):
        self._drive(0)

    def toggle(self):
        self._drive(self._gpio[2] ^ 1)

    def mode(self, mode=None):
        if mode is None:
            return self._gpio[0]
        self.init(mode)

    def pull(self, pull=-1):
        if pull == -1:
            return self._gpio[1]
        self._gpio[1] = pull

    def irq(self, handler=None, trigger=3, wake=None, hard=False):
        self._handler = handler
        self._trigger = trigger
        for other in [p for p in _irqs if p.id == self.id]:
            _irqs.remove(other)  # (one handler a pin, whichever object set it)
        if handler is not None:
            self._seen = self.value()
            _irqs.append(self)
            _waits_watched()
        return self


class WDT:
    """The task watchdog: a board that does not feed() it within `timeout` ms is reset (reset_cause()
    WDT_RESET), noticed in its waits (_look). As on a chip it cannot be stopped, and a second WDT() only changes
    the timeout."""

    def __init__(self, id=0, timeout=5000):
        if timeout < 1:
            raise ValueError("WDT timeout too short")
        self.timeout = timeout
        self.feed()
        _waits_watched()

    def feed(self):
        _wdt[0] = time.ticks_add(time.ticks_ms(), self.timeout)
        vboard_state.wdt_fed(self.timeout)


class ADC:
    """An ADC pin reading the voltage the bench drives it to (VirtualBoard.drive(adc={pin: microvolts})), 0 V when
    not driven, scaled by its attenuation's full range as ESP-IDF gives it (0 dB to 950 mV, 2.5 dB 1,250, 6 dB
    1,750, 11 dB 2,450)."""

    ATTN_0DB = 0
    ATTN_2_5DB = 1
    ATTN_6DB = 2
    ATTN_11DB = 3
    WIDTH_9BIT = 9
    WIDTH_10BIT = 10
    WIDTH_11BIT = 11
    WIDTH_12BIT = 12
    _FULL_UV = (950000, 1250000, 1750000, 2450000)

    def __init__(self, pin, *, atten=ATTN_0DB):
        self._id = pin.id if isinstance(pin, Pin) else pin
        self._atten = atten
        self._bits = 12

    def init(self, *, atten=None):
        if atten is not None:
            self.atten(atten)

    def atten(self, atten):
        if atten not in (0, 1, 2, 3):
            raise ValueError("invalid atten")
        self._atten = atten

    def width(self, bits):
        if bits not in (9, 10, 11, 12):
            raise ValueError("invalid width")
        self._bits = bits

    def read_uv(self):
        return min(int(vboard_state.driven("adc", self._id) or 0), self._FULL_UV[self._atten])

    def read_u16(self):
        return self.read_uv() * 65535 // self._FULL_UV[self._atten]

    def read(self):
        return self.read_u16() >> (16 - self._bits)


class Timer:
    """A hardware timer (ids 0 to 3): its callback runs when its period has passed, in the board's next wait (as
    Pin.irq's handlers), once (ONE_SHOT) or every period (PERIODIC); a period missed in a long computation runs
    once, late, not once for each period missed."""

    ONE_SHOT = 0
    PERIODIC = 1

    def __init__(self, id=0, **kwargs):
        if not 0 <= id <= 3:
            raise ValueError("invalid Timer number")
        self.id = id
        self._callback = None
        self._period = 0
        self._mode = self.PERIODIC
        self._next = None
        if kwargs:
            self.init(**kwargs)

    def init(self, *, mode=PERIODIC, period=-1, freq=-1, callback=None):
        if freq > 0:
            period = max(1, 1000 // freq)
        if period < 0:
            raise ValueError("a period or a freq is required")
        self._mode, self._period, self._callback = mode, period, callback
        self._next = time.ticks_add(time.ticks_ms(), period)
        if self not in _timers:
            _timers.append(self)
        _waits_watched()

    def deinit(self):
        self._next = None
        if self in _timers:
            _timers.remove(self)

    def value(self):
        """Milliseconds into the current period."""
        if self._next is None:
            return 0
        return max(0, self._period - time.ticks_diff(self._next, time.ticks_ms()))

    def _due(self):
        now = time.ticks_ms()
        if self._next is None or time.ticks_diff(now, self._next) < 0:
            return
        if self._mode == self.PERIODIC:
            self._next = time.ticks_add(now, self._period)
        else:
            self.deinit()
        if self._callback is not None:
            self._callback(self)


class PWM:
    """A PWM output: its frequency and duty are kept and read back (duty in 10 bits, duty_u16, duty_ns), and the
    pin reads high while the duty is above half. No waveform reaches the bench."""

    def __init__(self, dest, freq=5000, duty=None, duty_u16=None, duty_ns=None):
        self._pin = dest if isinstance(dest, Pin) else Pin(dest, Pin.OUT)
        self._freq = 5000
        self._u16 = 32768
        self.init(freq=freq, duty=duty, duty_u16=duty_u16, duty_ns=duty_ns)

    def init(self, freq=None, duty=None, duty_u16=None, duty_ns=None):
        if freq is not None:
            self.freq(freq)
        if duty is not None:
            self.duty(duty)
        if duty_u16 is not None:
            self.duty_u16(duty_u16)
        if duty_ns is not None:
            self.duty_ns(duty_ns)

    def deinit(self):
        self._pin.value(0)

    def freq(self, value=None):
        if value is None:
            return self._freq
        if not 1 <= value <= 40000000:
            raise ValueError("frequency must be from 1Hz to 40MHz")
        self._freq = int(value)

    def _set(self, u16):
        self._u16 = max(0, min(65535, int(u16)))
        self._pin.value(self._u16 > 32768)

    def duty(self, value=None):
        if value is None:
            return self._u16 * 1023 // 65535
        self._set(value * 65535 // 1023)

    def duty_u16(self, value=None):
        if value is None:
            return self._u16
        self._set(value)

    def duty_ns(self, value=None):
        period_ns = 1000000000 // self._freq
        if value is None:
            return self._u16 * period_ns // 65535
        self._set(value * 65535 // period_ns)


def _bus_time(method):
    """A bus transfer's time is the emulation's (vboard_state.emulated_us): the devices' models are Python here,
    a controller's C driver and silicon on a chip, whose bus time (about 25 us a byte at 400 kHz) is not modelled."""

    def timed(*args, **kwargs):
        begun = time.ticks_us()
        before = vboard_state.emulated_us  # (what a device's model counts itself, vboard_state.driven, is in this)
        try:
            return method(*args, **kwargs)
        finally:
            vboard_state.emulated_us = before + time.ticks_diff(time.ticks_us(), begun)

    return timed


class SoftI2C:
    """An I2C controller on any two pins: the devices the bench wires (vbus.py) answer at their addresses; an
    address nobody answers raises OSError(ENODEV), as the ESP32 port's does. Bytes move at once: the bus's own
    time (about 25 us a byte at 400 kHz) is not modelled, and the models' is the emulation's (_bus_time)."""

    def __init__(self, scl=None, sda=None, *, freq=400000, timeout=50000):
        self._bus = vbus
        self.freq = freq

    def init(self, scl=None, sda=None, *, freq=400000, timeout=50000):
        self.freq = freq

    @_bus_time
    def scan(self):
        return self._bus.wired()

    def _device(self, addr):
        found = self._bus.device(addr)
        if found is None:
            raise OSError(19)  # ENODEV: no acknowledgement of the address
        return found

    @_bus_time
    def writeto(self, addr, buf, stop=True):
        self._device(addr).write(bytes(buf))
        return len(buf)

    @_bus_time
    def writevto(self, addr, vector, stop=True):
        data = b"".join(bytes(b) for b in vector)
        self._device(addr).write(data)
        return len(data)

    @_bus_time
    def readfrom(self, addr, nbytes, stop=True):
        return self._device(addr).read(nbytes)

    @_bus_time
    def readfrom_into(self, addr, buf, stop=True):
        buf[:] = self._device(addr).read(len(buf))

    def _memaddr(self, memaddr, addrsize):
        return memaddr.to_bytes(addrsize // 8, "big")

    @_bus_time
    def writeto_mem(self, addr, memaddr, buf, *, addrsize=8):
        self._device(addr).write(self._memaddr(memaddr, addrsize) + bytes(buf))

    def _read_mem(self, addr, memaddr, nbytes, addrsize):
        device = self._device(addr)
        device.write(self._memaddr(memaddr, addrsize))
        return device.read(nbytes)

    @_bus_time
    def readfrom_mem(self, addr, memaddr, nbytes, *, addrsize=8):
        return self._read_mem(addr, memaddr, nbytes, addrsize)

    @_bus_time
    def readfrom_mem_into(self, addr, memaddr, buf, *, addrsize=8):
        buf[:] = self._read_mem(addr, memaddr, len(buf), addrsize)


class I2C(SoftI2C):
    """The ESP32's two I2C controllers (id 0 and 1), on the same bus model as SoftI2C."""

    def __init__(self, id=0, *, scl=None, sda=None, freq=400000, timeout=50000):
        if id not in (0, 1):
            raise ValueError("I2C(%s) doesn't exist" % id)
        self.id = id
        super().__init__(scl, sda, freq=freq, timeout=timeout)


class SoftSPI:
    """An SPI controller with nothing on its bus: writes go nowhere, reads give 0xFF (an undriven MISO line with
    its pull-up)."""

    MSB = 0
    LSB = 1

    def __init__(self, baudrate=500000, **kwargs):
        self.init(baudrate, **kwargs)

    def init(self, baudrate=500000, *, polarity=0, phase=0, bits=8, firstbit=MSB, sck=None, mosi=None, miso=None):
        self.baudrate = baudrate

    def deinit(self):
        pass

    def read(self, nbytes, write=0x00):
        return b"\xff" * nbytes

    def readinto(self, buf, write=0x00):
        for i in range(len(buf)):
            buf[i] = 0xFF

    def write(self, buf):
        return None

    def write_readinto(self, write_buf, read_buf):
        self.readinto(read_buf)


class SPI(SoftSPI):
    """The ESP32's SPI controllers 1 and 2 (HSPI, VSPI), on the same empty bus as SoftSPI."""

    def __init__(self, id=1, baudrate=500000, **kwargs):
        if id not in (1, 2):
            raise ValueError("SPI(%s) doesn't exist" % id)
        self.id = id
        super().__init__(baudrate, **kwargs)


# With flash timing on (VBOARD_FLASH_TIMING=1), the UART during a flash program or erase is modelled as an
# ESP32's: its flash cache is off, so the UART's interrupt (not in IRAM) waits; bytes that had arrived before
# are safe in the driver's ring buffer, and of those that arrive during it the 128-byte hardware receive FIFO
# keeps the first 128, the rest are lost (said on stderr). What arrived during the operation is told from what
# arrived before by the baud rate: at most its bytes in that time, the newest.
_RX_FIFO = 128
# What the model may hold after a stall (more than a pty buffers): made now, in the emulation's share of the heap,
# not at the first stall in the firmware's (a chip's FIFO is not in its heap).
_HELD = bytearray(8192) if vboard_state.env("VBOARD_FLASH_TIMING") == "1" else None


class UART:
    def __init__(self, uart_id, baudrate=115200, **kwargs):
        path = vboard_state.env("VBOARD_UART")
        if path is None:
            raise OSError(19)  # ENODEV: the runner gave this board no serial line
        self.id = uart_id
        self._held = _HELD  # the stall model's bytes
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
