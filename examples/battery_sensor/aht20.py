# An AHT20 temperature and humidity sensor on I2C, read as a battery board reads it (Aosong's AHT20 datasheet): one
# measurement, the CPU in light sleep while the sensor converts (80 ms), the status checked and the CRC-8 over the
# six bytes before it. temperature() is also a sensor hook for the board application (config.json's
# "publish": {"sensor": "aht20.temperature"}, docs/low-power.md).
from machine import I2C, Pin, lightsleep

ADDRESS = 0x38
SCL, SDA = 22, 21  # an ESP32 DevKitC's usual wiring; change them to yours


def temperature():
    """Degrees Celsius, measured now. OSError when the sensor does not answer (ENODEV) or answers wrongly."""
    i2c = I2C(0, scl=Pin(SCL), sda=Pin(SDA))
    if not i2c.readfrom(ADDRESS, 1)[0] & 0x08:  # not calibrated (a sensor just powered): calibrate it first
        i2c.writeto(ADDRESS, b"\xbe\x08\x00")
        lightsleep(10)
    i2c.writeto(ADDRESS, b"\xac\x33\x00")  # trigger a measurement
    lightsleep(80)
    data = i2c.readfrom(ADDRESS, 7)
    if data[0] & 0x80 or crc8(data, 6) != data[6]:
        raise OSError("AHT20: busy or a bad CRC")
    raw = ((data[3] & 0x0F) << 16) | (data[4] << 8) | data[5]
    return raw * 200 / 1048576 - 50


def crc8(data, n):
    """CRC-8, polynomial 0x31, initial 0xFF, of data[:n] (the datasheet's check)."""
    crc = 0xFF
    for i in range(n):
        crc ^= data[i]
        for _ in range(8):
            crc = ((crc << 1) ^ 0x31) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc
