# Virtual-board test app: micropython-ssd1306's driver, unmodified, in /lib as `mpremote mip install` lays it
# (fetched from PyPI by host_bridge.vboard.stock), drawing on the SSD1306 the bench wires at 0x3C
# (tests/integration/test_vboard_peers.py reads the display back).
from machine import I2C, Pin
from ssd1306 import SSD1306_I2C

display = SSD1306_I2C(128, 64, I2C(0, scl=Pin(22), sda=Pin(21)))
display.fill(0)
display.fill_rect(0, 0, 16, 8, 1)  # a block in the top left corner
display.text("21.5C", 40, 28, 1)
display.pixel(127, 63, 1)  # the bottom right corner
display.show()
print("drawn")
