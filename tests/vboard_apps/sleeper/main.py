# Virtual-board test app: deep and light sleep. Counts its wakes in RTC memory and deep-sleeps `sleep_ms`
# between them until `wakes` wakes; each boot prints what it sees (reset cause, wake reason, the clock, RTC
# memory, the ticks); with "light", a light sleep first, checking that RAM stays and the clock and ticks move on;
# with "drop", a module imported and dropped from sys.modules before the sleep; with "heap", the heap free after it.
import json
import time

import machine

with open("/flash/config.json") as f:
    cfg = json.load(f)
rtc = machine.RTC()
memory = rtc.memory()
wakes = int(memory) if memory else 0
cause, reason = machine.reset_cause(), machine.wake_reason()
ticks = time.ticks_ms()  # (a chip's start again at each boot and wake)
print(
    "boot wakes=%d cause=%d reason=%d clock=%d memory=%r ticks=%d" % (wakes, cause, reason, time.time(), memory, ticks)
)
if cfg.get("light"):
    kept = [1, 2, 3]
    clock, ticks = time.time(), time.ticks_ms()
    machine.lightsleep(cfg["light"])
    print("light kept=%r clock+%d ticks+%d" % (kept, time.time() - clock, time.ticks_diff(time.ticks_ms(), ticks)))
if cfg.get("reset_once") and not memory:
    rtc.memory(b"0")
    machine.reset()
if cfg.get("drop"):
    import sys

    import dropped  # noqa: F401

    del sys.modules["dropped"]
if cfg.get("heap"):
    import gc

    gc.collect()
    print("heap free=%d" % gc.mem_free())
if wakes < cfg["wakes"]:
    rtc.memory(str(wakes + 1).encode())
    machine.deepsleep(cfg["sleep_ms"])
    print("never: deepsleep returned")
print("done wakes=%d clock=%d" % (wakes, time.time()))
