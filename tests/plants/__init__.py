"""Planted bugs, each the real board application with one part of the firmware changed at boot (the plant's
main.py patches it once the application has loaded its modules): what every verdict must catch.
tests/hil/test_plants.py runs the campaigns on them; tests/hil/test_witness.py the HIL scenario."""

from __future__ import annotations

import shutil
from pathlib import Path

from host_bridge import assets

PLANTS = Path(__file__).resolve().parent
NAMES = ("publish_before_flash", "lost_done", "forgotten_session")


def planted_app(into: Path, plant: str) -> Path:
    """The firmware's application folder with the plant's main.py over the real one, in `into` (made)."""
    into.mkdir(parents=True)
    for source in assets.APP.glob("*.py"):
        shutil.copyfile(source, into / source.name)
    shutil.copyfile(PLANTS / plant / "main.py", into / "main.py")
    return into
