# State of the virtual board shared by the shims: the emulated flash, configured from the environment that the
# host-side runner (host_bridge.vboard.runner) sets. Not part of the firmware.

import json
import os
import random
import time

started_ms = time.ticks_ms()  # this boot's start (the process's): a deep sleep says how long the wake took
firmware_us = None  # (ticks_us) when vboot handed the board to its boot.py (the emulation's own start done)
# Microseconds this boot has spent in the emulation's stand-ins for the chip's hardware (the flash's operations,
# esp32.Partition; RTC memory, machine.RTC): Python here, C and silicon on a board.
emulated_us = 0
firmware_emulated_us = 0  # emulated_us when boot.py began
script = None  # the script running: "boot.py" or "main.py"

_flash = None
rom_image = None  # the "romfs" partition as mapped at boot (vboot), for vromfs


def env(name, default=None):
    value = os.getenv(name)
    return default if value is None or value == "" else value


def flash():
    global _flash
    if _flash is None:
        from nor_flash import NorFlash

        seed = int(env("VBOARD_SEED", "0"))
        random.seed(seed)
        layout = json.loads(env("VBOARD_LAYOUT"))
        _flash = NorFlash(
            env("VBOARD_FLASH"),
            env("VBOARD_STATS"),
            [tuple(p) for p in layout],
            cut_at_op=int(env("VBOARD_CUT_OP", "0")),
            rng=random,
            fail=_fault(env("VBOARD_FAIL")),
            timing=env("VBOARD_FLASH_TIMING") == "1",
        )
    return _flash


def _fault(spec):
    """VBOARD_FAIL="LABEL:N": flash operations on partition LABEL fail from the Nth on."""
    if not spec:
        return None
    label, _, n = spec.rpartition(":")
    return label, int(n)


# What survives a deep sleep: the RTC's clock and its slow memory (machine.RTC().memory()), and the emulation's
# sleep counters. Kept in a small JSON file beside the flash (VBOARD_RTC), written whole through a rename so
# that a power cut in the middle of a write leaves the last one. The runner drops "memory" at every power-on
# (a power cut, a new board), as RTC slow memory loses it; the clock and the counters stay.
#   clock_ms   how far the board's clock is ahead of the host's: the time it slept, and RTC.datetime() settings
#   memory     RTC slow memory, hex
#   deep, deep_ms, light, light_ms   deep and light sleeps since the board was made, and the time slept in each
#   sleep_ms   the deep sleep this boot ended with (0: none, -1: without a timer), read by the runner
#   awake_ms, firmware_us, emulated_us, script, loaded   that boot's time to the deep sleep (host milliseconds from
#              its process's start, microseconds from its boot.py's, and of those the emulated hardware's own), the
#              script it slept from, and the modules it had loaded then (sys.modules: the firmware's and the
#              emulation's), read by the runner
_rtc = None


def rtc():
    global _rtc
    if _rtc is None:
        _rtc = {"clock_ms": 0, "memory": "", "deep": 0, "deep_ms": 0, "light": 0, "light_ms": 0, "sleep_ms": 0}
        path = env("VBOARD_RTC")
        if path is not None:
            try:
                with open(path) as f:
                    _rtc.update(json.loads(f.read()))
            except (OSError, ValueError):
                pass  # none yet (a new board), or a file the host is about to replace
        _rtc["sleep_ms"] = 0
    return _rtc


def save_rtc():
    path = env("VBOARD_RTC")
    if path is None:
        return
    with open(path + ".tmp", "w") as f:
        f.write(json.dumps(rtc()))
    os.rename(path + ".tmp", path)
