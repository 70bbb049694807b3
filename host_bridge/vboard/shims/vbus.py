# The devices on the virtual board's buses (machine.I2C and SoftI2C, machine.SPI and SoftSPI): what sensor firmware
# talks to. A device is on the I2C bus while the bench drives it (VirtualBoard.drive(i2c={0x38: {"model": "aht20",
# "temperature_c": 21.5, "humidity": 40}}), the HIL plugin's hil_drive): wired, from then on, at that address;
# given None, unplugged. An address with no device does not acknowledge, and the transfer fails with
# OSError(ENODEV), as the ESP32 port's does. Nothing is on the SPI bus: it reads what an undriven MISO line with the
# chip's pull-up reads, 0xFF. Loaded with the machine shim, before the firmware's heap is pinned: a chip's bus
# drivers take none of it.
#
# The models: an SSD1306 display and BME280 and BMP280 sensors (vparts.py's, loaded when one is wired), and here the
# AHT10 and AHT20 temperature and humidity sensors (Aosong's datasheets). Commands are written to
# address 0x38 and the state is read back: a status byte (bit 7 busy, bit 3 calibrated), then humidity and
# temperature as two 20-bit fields, then (AHT20 only) a CRC-8 (polynomial 0x31, initial 0xFF) over those six
# bytes. A measurement (0xAC 0x33 0x00) is busy for 80 ms and then holds what the bench drives at that moment; 0xBA
# is a soft reset (20 ms busy); 0xBE 0x08 0x00 (AHT20) or 0xE1 0x08 0x00 (AHT10) calibrates. An AHT20 is
# calibrated from power-on, an AHT10 only once told to.

import time

import vboard_state
from esp_errno import ETIMEDOUT

_MEASURE_MS = 80
_RESET_MS = 20
_MODELS = ("aht10", "aht20", "ssd1306", "bme280", "bmp280")  # (all but the AHTs' are vparts.py's, loaded when wired)


class Aht:
    """One AHT10 or AHT20: its state across transfers (calibration, a measurement in progress)."""

    def __init__(self, address, model):
        self.address = address
        self.model = model
        self.calibrated = model == "aht20"
        self.busy_until = None  # ticks_ms when the running command ends
        self.measuring = False
        self.data = bytearray(5)  # humidity and temperature, 20 bits each, as the last measurement left them

    def _busy(self):
        if self.busy_until is None:
            return False
        if time.ticks_diff(time.ticks_ms(), self.busy_until) < 0:
            return True
        self.busy_until = None
        if self.measuring:
            self.measuring = False
            self._measure()
        return False

    def _measure(self):
        wired = vboard_state.driven("i2c", self.address) or {}
        humidity = min(100.0, max(0.0, float(wired.get("humidity", 50.0))))
        celsius = min(150.0, max(-50.0, float(wired.get("temperature_c", 25.0))))
        h = min(0xFFFFF, int(humidity * 0x100000 / 100))
        t = min(0xFFFFF, int((celsius + 50) * 0x100000 / 200))
        self.data[0] = h >> 12
        self.data[1] = (h >> 4) & 0xFF
        self.data[2] = ((h & 0xF) << 4) | (t >> 16)
        self.data[3] = (t >> 8) & 0xFF
        self.data[4] = t & 0xFF

    def write(self, data):
        if self._busy():
            return  # a chip ignores a command while it measures
        command = data[0] if data else None
        if command == 0xAC and len(data) >= 3 and data[1] == 0x33:
            self.measuring = True
            self.busy_until = time.ticks_add(time.ticks_ms(), _MEASURE_MS)
        elif command == 0xBA:
            self.calibrated = self.model == "aht20"
            self.busy_until = time.ticks_add(time.ticks_ms(), _RESET_MS)
        elif command == (0xBE if self.model == "aht20" else 0xE1):
            self.calibrated = True

    def read(self, n):
        status = (0x80 if self._busy() else 0) | (0x08 if self.calibrated else 0)
        out = bytearray([status]) + self.data
        if self.model == "aht20":
            out.append(_crc8(out))
        return bytes(out[:n]) + b"\xff" * max(0, n - len(out))


def _crc8(data):
    crc = 0xFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x31) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


_devices = {}  # address: the device model, kept while the bench keeps it wired


def device(address):
    """The device at `address` the bench has wired, or None (no acknowledgement: none there, or it is "silent");
    OSError(ETIMEDOUT) while a wired part holds the bus low, as the port's driver times out on a stuck bus. A part's
    fault_at counts its own transfers; a "held_low"'s counts every transfer on the bus."""
    table = vboard_state.driven("i2c") or {}
    for at, part in table.items():
        if isinstance(part, dict) and part.get("fault") == "held_low":
            if vboard_state.part_fault("i2c:%s:bus" % at, part) == "held_low":
                raise OSError(ETIMEDOUT)
    wired = table.get(str(address))
    if not isinstance(wired, dict) or wired.get("model") not in _MODELS:
        _devices.pop(address, None)  # unplugged: plugged again, it starts from power-on
        return None
    if wired.get("fault") == "silent" and vboard_state.part_fault("i2c:%d" % address, wired) == "silent":
        return None
    found = _devices.get(address)
    if found is None or found.model != wired["model"]:
        if wired["model"] == "ssd1306":
            import vparts

            found = vparts.Ssd1306(address, "ssd1306", int(wired.get("height", 64)))
        elif wired["model"] in ("bme280", "bmp280"):
            import vparts

            found = vparts.Bme280(address, wired["model"])
        else:
            found = Aht(address, wired["model"])
        _devices[address] = found
    return found


def wired():
    """The addresses that acknowledge a scan, in order (each a transfer to its part): none while the bus is held
    low, as the port's scan finds nothing on a stuck bus."""
    table = vboard_state.driven("i2c") or {}
    known = sorted(int(a) for a, v in table.items() if isinstance(v, dict) and v.get("model") in _MODELS)
    try:
        return [address for address in known if device(address) is not None]
    except OSError:
        return []
