# Virtual-board test app: esp32.RMT driving a WS2812 strip on GPIO 18 by hand, as firmware without neopixel does:
# at clock_div 8 a tick is 0.1 us, a 0 is 4 ticks high and 8 low, a 1 is 8 high and 4 low (the datasheet's
# 0.4/0.85 and 0.8/0.45 us, rounded). Two pixels, GRB: red, then dim blue; on GPIO 19 one green.
import esp32
import machine

rmt = esp32.RMT(0, pin=machine.Pin(18), clock_div=8)
durations = []
for byte in bytes((0, 255, 0, 0, 0, 16)):
    for i in range(8):
        durations += [8, 4] if byte & (0x80 >> i) else [4, 8]
rmt.write_pulses(durations, True)
print("rmt", esp32.RMT.source_freq(), rmt.clock_div(), rmt.wait_done())
# The same at one duration a level (4 ticks): a 1 is high, high, low; a 0 high, low, low. One pixel, green.
levels = []
for byte in bytes((255, 0, 0)):
    for i in range(8):
        levels += [1, 1, 0] if byte & (0x80 >> i) else [1, 0, 0]
esp32.RMT(1, pin=machine.Pin(19), clock_div=8).write_pulses(4, levels)
try:
    esp32.RMT(8, pin=machine.Pin(19))
except ValueError as exc:
    print("channel 8:", exc)
rmt.deinit()
