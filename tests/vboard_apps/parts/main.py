# Virtual-board test app: the ESP32 port's primitives that sensor drivers stand on, used as the port documents them
# (tests/integration/test_vboard_parts.py drives the parts): esp.dht_readinto for DHT11/DHT22, _onewire for a bus
# of DS18B20s (the ROM search of Maxim's application note 187, CONVERT T, READ SCRATCHPAD), machine.bitstream for a
# WS2812 strip.
import time

import _onewire
import esp
import machine

buf = bytearray(5)
for pin in (4, 5):
    esp.dht_readinto(machine.Pin(pin), buf)
    print("dht", pin, buf.hex(), "checksum", (buf[0] + buf[1] + buf[2] + buf[3]) & 0xFF == buf[4])
for pin in (6, 7):
    try:
        esp.dht_readinto(machine.Pin(pin), buf)
        print("dht", pin, buf.hex(), "checksum", (buf[0] + buf[1] + buf[2] + buf[3]) & 0xFF == buf[4])
    except OSError as exc:
        print("dht", pin, "OSError", exc.errno)

bus = machine.Pin(13)
bus.init(bus.OPEN_DRAIN, bus.PULL_UP)
print("presence", _onewire.reset(bus), _onewire.reset(machine.Pin(14)))


def search(pin):
    """Every ROM on the bus: at each bit the devices left answer it and its complement, the master picks a
    direction; a discrepancy where 0 was taken is revisited with 1 on the next pass."""
    found = []
    last_zero = -1
    rom = [0] * 64
    while True:
        if not _onewire.reset(pin):
            return found
        _onewire.writebyte(pin, 0xF0)
        zero_at = -1
        for i in range(64):
            bit = _onewire.readbit(pin)
            complement = _onewire.readbit(pin)
            if bit and complement:
                return found  # nobody answered
            if bit != complement:
                choice = bit
            elif i < last_zero:
                choice = rom[i]
            else:
                choice = 1 if i == last_zero else 0
            if bit == complement and choice == 0:
                zero_at = i
            rom[i] = choice
            _onewire.writebit(pin, choice)
        found.append(bytes(sum(rom[8 * b + j] << j for j in range(8)) for b in range(8)))
        last_zero = zero_at
        if last_zero < 0:
            return found


roms = search(bus)
print("roms", " ".join(sorted(r.hex() for r in roms)), "crc", all(_onewire.crc8(r) == 0 for r in roms))
_onewire.reset(bus)
_onewire.writebyte(bus, 0xCC)  # SKIP ROM: every thermometer
_onewire.writebyte(bus, 0x44)  # CONVERT T
print("converting", _onewire.readbit(bus))
time.sleep_ms(800)
print("converted", _onewire.readbit(bus))
for rom in sorted(roms):
    _onewire.reset(bus)
    _onewire.writebyte(bus, 0x55)  # MATCH ROM
    for byte in rom:
        _onewire.writebyte(bus, byte)
    _onewire.writebyte(bus, 0xBE)  # READ SCRATCHPAD
    pad = bytes(_onewire.readbyte(bus) for _ in range(9))
    raw = pad[0] | pad[1] << 8
    celsius = (raw - 0x10000 if raw & 0x8000 else raw) / 16
    print("temperature", rom.hex(), celsius, "crc", _onewire.crc8(pad) == 0)

strip = machine.Pin(2, machine.Pin.OUT)
machine.bitstream(strip, 0, (400, 850, 800, 450), bytes((0, 255, 0, 128, 0, 0, 0, 0, 64)))  # GRB: red, green, blue
print("strip sent")
