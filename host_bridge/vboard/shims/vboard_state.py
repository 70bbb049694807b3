# State of the virtual board shared by the shims: the emulated flash, configured from the environment that the
# host-side runner (host_bridge.vboard.runner) sets. Not part of the firmware.

import json
import os
import random

_flash = None
rom_image = None  # the "romfs" partition as mapped at boot (vboot), for vromfs
uart = None  # the link's UART, when flash timing models what a flash operation does to it (machine.UART)


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
