# A thermostat: a DHT22 on GPIO 4, a button on GPIO 0 (to ground, the pin's pull-up holding it high) that raises the
# setpoint, a relay on GPIO 26 that switches the heater, an SSD1306 display at 0x3C on I2C (SCL 22, SDA 21). It runs
# on an ESP32's stock image, and unchanged on the virtual board, whose parts wiring.json wires; its tests are
# tests/integration/test_example_thermostat.py (docs/testing-your-firmware.md). No network: a sensor board's logic.
import time

import screen
from esp import dht_readinto  # type: ignore[attr-defined]  # the ESP32 port has it, its stubs not
from machine import I2C, Pin

SETPOINT_C = 20.0
STEP_C = 0.5
HIGHEST_C = 25.0  # a press above it starts again from the lowest
LOWEST_C = 16.0
HYSTERESIS_C = 0.3  # the heater switches on below the setpoint less this, off above it plus this
READ_MS = 2000  # a DHT22 gives a new reading every 2 s at most (its datasheet)
LOOK_MS = 50  # how often the button is looked at


def temperature(pin, buf):
    """The DHT22's temperature in C (its 40 bits: humidity, temperature with a sign bit, a checksum)."""
    dht_readinto(pin, buf)
    if (buf[0] + buf[1] + buf[2] + buf[3]) & 0xFF != buf[4]:
        raise OSError("checksum")
    celsius = ((buf[2] & 0x7F) << 8 | buf[3]) / 10
    return -celsius if buf[2] & 0x80 else celsius


def main():
    sensor = Pin(4)
    button = Pin(0, Pin.IN, Pin.PULL_UP)
    relay = Pin(26, Pin.OUT, value=0)
    display = screen.Screen(I2C(0, scl=Pin(22), sda=Pin(21)))
    buf = bytearray(5)
    setpoint = SETPOINT_C
    heating = False
    was_pressed = False
    now = None
    read_at = time.ticks_ms()
    said = ""
    first = True
    while True:
        pressed = button.value() == 0
        if pressed and not was_pressed:
            setpoint = LOWEST_C if setpoint + STEP_C > HIGHEST_C else setpoint + STEP_C
            print("setpoint %.1f" % setpoint)
        was_pressed = pressed
        if first or time.ticks_diff(time.ticks_ms(), read_at) >= READ_MS:
            first = False
            read_at = time.ticks_ms()
            try:
                now = temperature(sensor, buf)
            except OSError as exc:
                if now is not None:
                    print("sensor failed (%s): heater off until it answers" % exc)
                now = None
        if now is None:
            heating = False
        elif heating and now > setpoint + HYSTERESIS_C:
            heating = False
        elif not heating and now < setpoint - HYSTERESIS_C:
            heating = True
        relay.value(1 if heating else 0)
        state = "temperature %s setpoint %.1f heating %s" % (
            "?" if now is None else "%.1f" % now, setpoint, "on" if heating else "off")  # fmt: skip
        if state != said:
            display.show(now, setpoint, heating)
            print(state)  # (after the display: a line seen means the display shows it)
            said = state
        time.sleep_ms(LOOK_MS)


main()
