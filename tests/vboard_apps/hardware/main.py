# Virtual-board test app: the hardware a sensor board touches, driven by the bench (VirtualBoard.drive()). It says
# what the chip tells it (clock, flash, NVS across boots), then "ready"; the bench presses the button (pin 0 low)
# and sets the ADC pin and the die's temperature; the irq handler runs in the next wait; then a watchdog nobody
# feeds resets the board, and the next boot, a WDT_RESET, ends the run.
import time

import esp
import esp32
import machine

print("freq", machine.freq())
machine.freq(80000000)
print("freq set", machine.freq())
head = bytearray(8)
esp.flash_read(esp.flash_user_start(), head)  # the filesystem partition's first bytes
print("flash", esp.flash_size(), esp.flash_user_start(), len(head))
nvs = esp32.NVS("bench")
try:
    boots = nvs.get_i32("boots")
except OSError as exc:
    print("nvs empty", exc.args[0])
    boots = 0
nvs.set_i32("boots", boots + 1)
nvs.set_blob("tag", b"sensor-7")
nvs.commit()
tag = bytearray(16)
print("nvs boots", boots + 1, bytes(tag[: nvs.get_blob("tag", tag)]))
if machine.reset_cause() == machine.WDT_RESET:
    print("after the watchdog")
    raise SystemExit(0)
adc = machine.ADC(machine.Pin(34), atten=machine.ADC.ATTN_11DB)
print("before", adc.read_uv(), esp32.raw_temperature())
button = machine.Pin(0, machine.Pin.IN, machine.Pin.PULL_UP)
pressed = []
button.irq(handler=lambda pin: pressed.append(pin.value()), trigger=machine.Pin.IRQ_FALLING)
print("ready", button.value())
while not pressed:
    time.sleep_ms(5)
print("pressed", pressed, adc.read_uv(), adc.read_u16(), adc.read(), esp32.raw_temperature())
wdt = machine.WDT(timeout=300)
wdt.feed()
time.sleep_ms(2000)
print("never: the watchdog did not bite")
