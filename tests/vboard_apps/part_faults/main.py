# Virtual-board test app: parts that fail on schedule (tests/integration/test_vboard_parts.py wires them with a
# "fault" and its "fault_at"). Each round reads every part once, as firmware would, and says what it got; a wake
# from deep sleep reads the DHT once more. Errors are told by their errno numbers, as the port raises them.
import _onewire
import esp
import machine

buf = bytearray(5)


def dht(pin):
    try:
        esp.dht_readinto(machine.Pin(pin), buf)
        return "ok" if (buf[0] + buf[1] + buf[2] + buf[3]) & 0xFF == buf[4] else "checksum"
    except OSError as exc:
        return "OSError %d" % exc.errno


def scratchpad(pin):
    """One transaction: reset, SKIP ROM, READ SCRATCHPAD; what the 9 bytes came as."""
    if not _onewire.reset(pin):
        return "absent"
    _onewire.writebyte(pin, 0xCC)
    _onewire.writebyte(pin, 0xBE)
    data = bytes(_onewire.readbyte(pin) for _ in range(9))
    if data == bytes(9):
        return "zeros"
    return "ok" if _onewire.crc8(data) == 0 else "crc"


def aht(i2c):
    try:
        i2c.writeto(0x38, b"\xac\x33\x00")
        i2c.readfrom(0x38, 7)
        return "ok"
    except OSError as exc:
        return "OSError %d" % exc.errno


if machine.reset_cause() == machine.DEEPSLEEP_RESET:
    print("wake dht", dht(4), dht(5))
else:
    i2c = machine.I2C(0, scl=machine.Pin(22), sda=machine.Pin(21))
    for pin in (13, 14, 15):
        machine.Pin(pin).init(machine.Pin.OPEN_DRAIN, machine.Pin.PULL_UP)
    for n in range(1, 5):
        print("round", n, "dht", dht(4), dht(5), "1-wire", scratchpad(machine.Pin(13)), scratchpad(machine.Pin(14)),
              scratchpad(machine.Pin(15)), "i2c", aht(i2c))  # fmt: skip
    print("scan", i2c.scan())
    machine.deepsleep(10)
