# Virtual-board test app: what sensor firmware written for an ESP32 uses of machine.Pin, as a chip answers it
# with nothing wired to the pins (tests/integration/test_vboard_esp32_apis.py).
import time

import machine

print("time() is an int", isinstance(time.time(), int))
now = time.time()
print("epoch", time.gmtime(0)[0], now, time.mktime(time.localtime(now)) == now, time.localtime(now) == time.gmtime(now))

button = machine.Pin(0, machine.Pin.IN, machine.Pin.PULL_UP)
print("pull-up input", button.value(), button())
print("pull-down input", machine.Pin(4, machine.Pin.IN, machine.Pin.PULL_DOWN).value())
led = machine.Pin(2, machine.Pin.OUT, value=0)
led.on()
led.toggle()
was = led.value()
led(1)
print("output", was, led.value())
pressed = []
button.irq(handler=pressed.append, trigger=machine.Pin.IRQ_FALLING)
print("irq set", len(pressed))
print("the pin's state, whatever object", machine.Pin(0).value(), machine.Pin(2).value(), machine.Pin(2).mode())

import os  # noqa: E402
import sys  # noqa: E402

import uos  # noqa: E402
import usys  # noqa: E402

print("platform", sys.platform, usys.platform, os.uname().sysname, uos.uname().machine.endswith("with ESP32"))

import gc  # noqa: E402

gc.collect()
held = bytearray(10000)
total = gc.mem_free() + gc.mem_alloc()
del held
gc.collect()
print("heap adds up", total == gc.mem_free() + gc.mem_alloc(), total, gc.mem_alloc() < total // 2)
print("this project's packages", [name for name in ("dmqtt", "dlink", "dboard") if name in os.listdir("/flash")])
