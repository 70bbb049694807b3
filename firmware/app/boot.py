# Runs first at every boot, before main.py, as source (like main.py). A board that stores and forwards
# (config.json "sleep" with readings_per_send above 1, docs/low-power.md) takes its sampling wakes here: sampler.py
# journals the reading and deep-sleeps, so that neither main.py nor the application loads. The plan in RTC memory
# says which wakes sample (its first byte, sampler.SAMPLE). Here rather than in main.py: boot.py's code is freed
# when it ends, main.py's stays for as long as the application runs in it.
import machine

if machine.reset_cause() == machine.DEEPSLEEP_RESET and machine.RTC().memory()[:1] == b"S":
    import sys

    import sampler

    sampler.run()  # returns when the application must run instead (the journal full, say)
    del sampler, sys.modules["sampler"]
