# Virtual-board test app: published drivers, unmodified, in /lib as `mpremote mip install` lays them (fetched from
# PyPI by host_bridge.vboard.stock): micropython-bme280 reads the BME280 the bench wires at 0x76, and
# micropython-ssd1306 draws on the SSD1306 at 0x3C (tests/integration/test_vboard_peers.py reads both back).
from bme280 import BME280
from machine import I2C, Pin
from ssd1306 import SSD1306_I2C

i2c = I2C(0, scl=Pin(22), sda=Pin(21))
print("scan", [hex(a) for a in i2c.scan()])
sensor = BME280(i2c=i2c)
print("bme280", " ".join(sensor.values))
raw = [0, 0, 0]
sensor.read_raw_data(raw)
print("raw", *raw)
print(
    "trim",
    *(getattr(sensor, "dig_" + name) for name in "T1 T2 T3 P1 P2 P3 P4 P5 P6 P7 P8 P9 H1 H2 H3 H4 H5 H6".split()),
)
display = SSD1306_I2C(128, 64, i2c)
display.fill(0)
display.fill_rect(0, 0, 16, 8, 1)  # a block in the top left corner
display.text(sensor.values[0], 40, 28, 1)
display.pixel(127, 63, 1)  # the bottom right corner
display.show()
print("drawn")
