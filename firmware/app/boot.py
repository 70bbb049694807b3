# Runs first at every boot, before main.py, as source (like main.py). A board that stores and forwards
# (config.json "sleep" with readings_per_send above 1, docs/low-power.md) takes its sampling wakes here: sampler.py
# journals the reading and deep-sleeps, so that neither main.py nor the application loads. The plan in RTC memory
# says which wakes sample: its kind byte (sampler.SAMPLE), the first of the application's part, after the
# library's hint (dmqtt/wake.py lays RTC memory out: a byte, the hint's length in two, the hint). Here rather than
# in main.py: boot.py's code is freed when it ends, main.py's stays for as long as the application runs in it.
import machine

if machine.reset_cause() == machine.DEEPSLEEP_RESET:
    m = machine.RTC().memory()
    if len(m) > 3 and m[3 + ((m[1] << 8) | m[2]) :][:1] == b"S":
        import sys

        import sampler

        sampler.run()  # returns when the application must run instead (the journal full, say)
        del sampler, sys.modules["sampler"]
    del m
