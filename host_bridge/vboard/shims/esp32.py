# esp32 module shim for the virtual board: Partition backed by the emulated NOR flash (find/info and the extended
# block interface: readblocks/writeblocks with an offset, ioctl erase; the running app's partition by its info),
# NVS, the die temperature and deep sleep's wake on pins (docs/virtual-board.md has the table).

import time

import vboard_state

_SECTOR = 4096
_TYPES = {"app": 0, "data": 1}
_SUBTYPES = {"factory": 0, "nvs": 2, "phy": 1, "fat": 0x81, "undefined": 0x06, "romfs": 0x8F}


class Partition:
    BOOT = 0
    RUNNING = 1
    TYPE_APP = 0
    TYPE_DATA = 1

    def __init__(self, index):
        if index in (self.BOOT, self.RUNNING):
            # The app: a factory partition as ESP32_GENERIC's table has it. The flash file holds no app, so its
            # blocks cannot be read or written (OSError), and there is nothing to update over the air.
            self._index = None
            self._label, self._type, self._subtype, self._offset, self._size = "factory", 0, 0, 0x10000, 0x1F0000
            return
        if not isinstance(index, int) or index < 2:
            raise ValueError("invalid partition")
        self._index = index - 2
        label, ptype, subtype, offset, size = vboard_state.flash().partitions[self._index]
        self._label = label
        self._type = _TYPES[ptype]
        self._subtype = _SUBTYPES.get(subtype, 0xFF)
        self._offset = offset
        self._size = size

    @staticmethod
    def find(type=TYPE_APP, subtype=0xFF, label=None):
        found = []
        for i, (plabel, ptype, psub, _offset, _size) in enumerate(vboard_state.flash().partitions):
            if _TYPES[ptype] != type:
                continue
            if subtype != 0xFF and _SUBTYPES.get(psub, 0xFF) != subtype:
                continue
            if label is not None and plabel != label:
                continue
            found.append(Partition(i + 2))
        return found

    def info(self):
        return (self._type, self._subtype, self._offset, self._size, self._label, False)

    def get_next_update(self):
        raise OSError(2)  # ENOENT: the factory layout has no OTA partition

    @staticmethod
    def mark_app_valid_cancel_rollback():
        raise OSError(-261)  # ESP_ERR_NOT_FOUND: no OTA data, nothing to mark

    # Each operation's own time is counted (vboard_state.emulated_us): Python here, the flash driver's C and the chip's
    # SPI on a board, so that the firmware's time can be told apart from the emulation's (tools/bench_energy.py).
    def readblocks(self, block, buf, offset=0):
        begun = time.ticks_us()
        vboard_state.flash().read(self._index, self._addr(block, offset, len(buf)), buf)
        vboard_state.emulated_us += time.ticks_diff(time.ticks_us(), begun)

    def writeblocks(self, block, buf, offset=None):
        begun = time.ticks_us()
        flash = vboard_state.flash()
        if offset is None:
            # The simple block interface erases before writing whole blocks, as esp32.Partition does.
            for i in range((len(buf) + _SECTOR - 1) // _SECTOR):
                flash.erase(self._index, self._addr(block + i, 0, _SECTOR))
            offset = 0
        flash.program(self._index, self._addr(block, offset, len(buf)), buf)
        vboard_state.emulated_us += time.ticks_diff(time.ticks_us(), begun)

    def ioctl(self, op, arg):
        if op == 4:  # block count
            return self._size // _SECTOR
        if op == 5:  # block size
            return _SECTOR
        if op == 6:  # erase one block
            begun = time.ticks_us()
            vboard_state.flash().erase(self._index, self._addr(arg, 0, _SECTOR))
            vboard_state.emulated_us += time.ticks_diff(time.ticks_us(), begun)
            return 0
        return 0  # init, deinit, sync: nothing to do on NOR flash

    def _addr(self, block, offset, length):
        if self._index is None:
            raise OSError(22)  # the app partition: not in the flash file
        start = block * _SECTOR + offset
        if start < 0 or start + length > self._size:
            raise OSError(22)
        return self._offset + start


# NVS: ESP-IDF's key-value store, as the port's esp32.NVS gives it, kept in the flash file's "nvs" partition (after
# the data partitions). Its layout there is the emulation's, not ESP-IDF's pages of entries (docs/virtual-board.md,
# "NVS in the flash file"): two slots of half the partition, each a header and a body, the body every namespace as
# JSON. commit() writes the whole store into the slot that does not hold the newest copy, its body first and its
# header last, so that a power cut inside a commit leaves the copy before it: what was set and not committed is lost
# at a reset or a power cut, as the port's documentation has it.
_NVS_MAGIC = b"vNVS"
_NVS_HEADER = "<4sIII"  # magic, the copy's sequence number, the body's length, the body's CRC-32 (little-endian)
_NVS_HEADER_SIZE = 16
_NVS_NOT_FOUND = -0x1102  # ESP_ERR_NVS_NOT_FOUND
_NVS_KEY_TOO_LONG = -0x1109  # ESP_ERR_NVS_KEY_TOO_LONG: 15 characters at most
_NVS_TYPE_MISMATCH = -0x1104  # ESP_ERR_NVS_TYPE_MISMATCH
_NVS_NOT_ENOUGH_SPACE = -0x1105  # ESP_ERR_NVS_NOT_ENOUGH_SPACE


def _nvs_partition():
    """(the nvs partition's index, its offset in the file, the size of a slot)."""
    for i, (_label, _type, subtype, offset, size) in enumerate(vboard_state.flash().partitions):
        if subtype == "nvs":
            return i, offset, size // 2 // _SECTOR * _SECTOR
    raise OSError(_NVS_NOT_FOUND)  # (the runner always gives one)


def _nvs_copy(part, start, slot):
    """(sequence number, body) of the copy in slot `slot`, or None when it holds none whole."""
    import binascii
    import struct

    flash = vboard_state.flash()
    head = bytearray(_NVS_HEADER_SIZE)
    flash.read(part, start, head)
    magic, seq, length, crc = struct.unpack(_NVS_HEADER, head)
    if magic != _NVS_MAGIC or length > slot - _NVS_HEADER_SIZE:
        return None
    body = bytearray(length)
    flash.read(part, start + _NVS_HEADER_SIZE, body)
    if binascii.crc32(body) != crc:
        return None
    return seq, body


def _nvs_newest():
    """(the slot holding the newest copy or -1, its sequence number, the store it holds)."""
    import json

    part, offset, slot = _nvs_partition()
    newest, seq, body = -1, 0, None
    for i in (0, 1):
        copy = _nvs_copy(part, offset + i * slot, slot)
        if copy is not None and (newest < 0 or copy[0] > seq):
            newest, (seq, body) = i, copy
    if body is not None:
        return newest, seq, json.loads(body)
    try:  # NVS as kept beside the flash file before the file held it: its store until the first commit
        with open(vboard_state.env("VBOARD_NVS_BEFORE")) as f:
            return newest, seq, json.load(f)
    except (OSError, TypeError, ValueError):
        return newest, seq, {}


def _nvs_read():
    begun = time.ticks_us()
    store = _nvs_newest()[2]
    vboard_state.emulated_us += time.ticks_diff(time.ticks_us(), begun)
    return store


def _nvs_write(namespace, values):
    import binascii
    import json
    import struct

    begun = time.ticks_us()
    newest, seq, store = _nvs_newest()
    store[namespace] = values
    body = json.dumps(store).encode()
    part, offset, slot = _nvs_partition()
    if len(body) > slot - _NVS_HEADER_SIZE:
        raise OSError(_NVS_NOT_ENOUGH_SPACE)
    start = offset + (1 - newest if newest >= 0 else 0) * slot
    flash = vboard_state.flash()
    for sector in range(start, start + slot, _SECTOR):
        flash.erase(part, sector)
    flash.program(part, start + _NVS_HEADER_SIZE, body)
    flash.program(part, start, struct.pack(_NVS_HEADER, _NVS_MAGIC, seq + 1, len(body), binascii.crc32(body)))
    vboard_state.emulated_us += time.ticks_diff(time.ticks_us(), begun)
    import os

    try:
        os.remove(vboard_state.env("VBOARD_NVS_BEFORE"))  # (its store is in the flash file now)
    except (OSError, TypeError):
        pass


class NVS:
    def __init__(self, namespace):
        if not 0 < len(namespace) <= 15:
            raise OSError(_NVS_KEY_TOO_LONG)
        self._namespace = namespace
        self._values = _nvs_read().get(namespace, {})

    def _set(self, key, kind, value):
        if not 0 < len(key) <= 15:
            raise OSError(_NVS_KEY_TOO_LONG)
        self._values[key] = [kind, value]

    def _get(self, key, kind):
        found = self._values.get(key)
        if found is None:
            raise OSError(_NVS_NOT_FOUND)
        if found[0] != kind:
            raise OSError(_NVS_TYPE_MISMATCH)
        return found[1]

    def set_i32(self, key, value):
        if not -0x80000000 <= value <= 0x7FFFFFFF:
            raise OverflowError("overflow converting long int to machine word")
        self._set(key, "i32", value)

    def get_i32(self, key):
        return self._get(key, "i32")

    def set_blob(self, key, value):
        self._set(key, "blob", bytes(value).hex())

    def get_blob(self, key, buffer):
        """Copies the blob into `buffer` (as much as fits) and returns its length."""
        data = bytes.fromhex(self._get(key, "blob"))
        n = min(len(data), len(buffer))
        buffer[:n] = data[:n]
        return len(data)

    def erase_key(self, key):
        if self._values.pop(key, None) is None:
            raise OSError(_NVS_NOT_FOUND)

    def commit(self):
        _nvs_write(self._namespace, self._values)


def _die_c():
    """The die's temperature: what the bench drives it to (VirtualBoard.drive(temperature_c=...)), 53.3 C by default
    (128 F, a chip's reading at room temperature)."""
    c = vboard_state.driven("temperature_c")
    return 53.3 if c is None else c


def raw_temperature():
    """The internal sensor's raw reading, in degrees Fahrenheit as the ESP32's is read."""
    return round(_die_c() * 9 / 5 + 32)


def mcu_temperature():
    """The sensor in degrees Celsius (the newer chips' call; an ESP32 has only raw_temperature())."""
    return round(_die_c())


# Deep sleep's wake on pins (ext0: one pin at a level; ext1: several, all low or any high), as the port's calls set
# them; machine.deepsleep() hands them to the runner, which wakes the board when the bench drives them so
# (EXT0_WAKE, EXT1_WAKE). This boot's settings only: a chip's are redone by each boot's code before it sleeps.
WAKEUP_ALL_LOW = 0
WAKEUP_ANY_HIGH = 1
wake_pins = {}


def _pin_id(pin):
    return pin.id if hasattr(pin, "id") else int(pin)


class RMT:
    """esp32.RMT, the remote control peripheral's transmit channels, as the port has them: pulses counted in ticks of
    source_freq() / clock_div. What a channel sends reaches the part on its pin at once: a WS2812 strip (vparts.py)
    reads each high and the low after it as one bit, a 1 where the high is the longer (the datasheet's 0.8 us
    against 0.45 us; a 0 is 0.4 us against 0.85 us). The pulses are not in the pin's trace."""

    _CHANNELS = 8

    def __init__(self, channel, *, pin=None, clock_div=8, idle_level=False, tx_carrier=None):
        if not 0 <= channel < self._CHANNELS:
            raise ValueError("channel out of range")
        if not 1 <= clock_div <= 255:
            raise ValueError("clock_div must be between 1 and 255")
        if pin is None:
            raise TypeError("'pin' argument required")
        self._pin = _pin_id(pin)
        self._clock_div = clock_div
        self._idle = 1 if idle_level else 0
        self._looping = False

    @staticmethod
    def source_freq():
        return 80_000_000  # the APB clock

    def clock_div(self):
        return self._clock_div

    def wait_done(self, *, timeout=0):
        return True  # (the pulses went out at once)

    def loop(self, enable_loop):
        self._looping = bool(enable_loop)

    def write_pulses(self, duration, data=True):
        """duration a list of ticks and data the first level (they alternate), or duration one length for each level
        of the list data, or a list of each: the port's three forms."""
        if isinstance(duration, int):
            pulses = [(1 if level else 0, duration) for level in data]
        elif isinstance(data, (list, tuple)):
            if len(data) != len(duration):
                raise ValueError("duration and data must have same length")
            pulses = [(1 if data[i] else 0, duration[i]) for i in range(len(duration))]  # (MicroPython: no strict zip)
        else:
            first = 1 if data else 0
            pulses = [(first ^ (i & 1), ticks) for i, ticks in enumerate(duration)]
        if any(not 0 < ticks <= 32767 for _, ticks in pulses):
            raise ValueError("duration out of range")
        import vparts

        vparts.pulses(self._pin, pulses)

    def deinit(self):
        self._looping = False


def wake_on_ext0(pin, level):
    if pin is None:
        wake_pins.pop("ext0", None)
    else:
        wake_pins["ext0"] = [[_pin_id(pin)], 1 if level else 0]


def wake_on_ext1(pins, level):
    if not pins:
        wake_pins.pop("ext1", None)
    else:
        wake_pins["ext1"] = [[_pin_id(p) for p in pins], 1 if level else 0]
