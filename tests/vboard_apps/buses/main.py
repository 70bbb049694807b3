# The buses and timers sensor firmware uses, on the virtual board (tests/integration/test_vboard_esp32_apis.py):
# an AHT20 spoken to byte by byte over I2C once the bench has wired it, SPI with nothing on it, PWM, a periodic
# Timer, a pulse that never comes, the running app's partition, and deep sleeps that pins end (esp32.wake_on_ext0
# with no timer; wake_on_ext1 whose timer ends it first). Each boot says what it found.
import time

import esp32
import machine
from machine import I2C, PWM, SPI, Pin, SoftI2C, Timer

cause, reason = machine.reset_cause(), machine.wake_reason()
if cause == machine.DEEPSLEEP_RESET:
    print("woke", reason)
    if reason == machine.EXT0_WAKE:
        esp32.wake_on_ext1([Pin(5)], esp32.WAKEUP_ANY_HIGH)
        print("sleeping on pin 5 or 300 ms")
        machine.deepsleep(300)
    raise SystemExit(0)

i2c = I2C(0, scl=Pin(22), sda=Pin(21), freq=400000)
print("scan", i2c.scan())
try:
    i2c.writeto(0x38, b"\xba")
except OSError as exc:
    print("nobody at 0x38", exc.args[0])
print("ready 1")
while not i2c.scan():
    time.sleep_ms(20)
print("scan", i2c.scan(), SoftI2C(scl=Pin(4), sda=Pin(5)).scan())
status = i2c.readfrom(0x38, 1)[0]
print("calibrated", bool(status & 0x08))
i2c.writeto(0x38, b"\xac\x33\x00")
print("busy", bool(i2c.readfrom(0x38, 1)[0] & 0x80))
time.sleep_ms(100)
data = i2c.readfrom(0x38, 7)
crc = 0xFF
for byte in data[:6]:
    crc ^= byte
    for _ in range(8):
        crc = ((crc << 1) ^ 0x31) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
humidity = ((data[1] << 12) | (data[2] << 4) | (data[3] >> 4)) * 100 / 0x100000
celsius = (((data[3] & 0xF) << 16) | (data[4] << 8) | data[5]) * 200 / 0x100000 - 50
print("busy", bool(data[0] & 0x80), "crc", crc == data[6], "reading %.1f %.1f" % (celsius, humidity))
import vboard_state  # noqa: E402 (the emulation's own count, read by this test of it: no sensor code does)

began, counted = time.ticks_us(), vboard_state.emulated_us
i2c.readfrom(0x38, 7)  # the model's time is the emulation's, not the firmware's (a chip's is C and silicon)
counted, spent = vboard_state.emulated_us - counted, time.ticks_diff(time.ticks_us(), began)
print("bus time emulated", 0 < counted <= spent)

spi = SPI(1, baudrate=1000000, sck=Pin(18), mosi=Pin(23), miso=Pin(19))
spi.write(b"\x9f")
print("spi", spi.read(2))
pwm = PWM(Pin(2), freq=1000, duty_u16=49152)
print("pwm", pwm.freq(), pwm.duty(), pwm.duty_u16())
ticks = []
timer = Timer(0)
timer.init(period=20, mode=Timer.PERIODIC, callback=lambda t: ticks.append(1))
time.sleep_ms(130)
timer.deinit()
state = machine.disable_irq()
machine.enable_irq(state)
print("timer", 4 <= len(ticks) <= 7, "pulse", machine.time_pulse_us(Pin(15, Pin.IN), 1, 20000))
print("running", esp32.Partition(esp32.Partition.RUNNING).info()[4])
esp32.wake_on_ext0(Pin(4), 1)
print("sleeping on pin 4")
machine.deepsleep()
