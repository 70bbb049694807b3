"""The ESP32 APIs that sensor firmware uses, on the virtual board, answered as a chip answers them with nothing
wired to the pins: a button on a pull-up reads released (1), an output reads what it drives, an interrupt handler
can be set; time.time() is whole seconds (docs/virtual-board.md, "What firmware of your own finds")."""

from __future__ import annotations

import subprocess
from pathlib import Path

from host_bridge.vboard.runner import VirtualBoard
from tests.conftest import APPS


def test_pins_read_their_pulls_and_drive_what_they_are_told(tmp_path: Path) -> None:
    board = VirtualBoard(
        tmp_path / "b.flash", app=APPS / "sensor_apis", stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        board.start()
        out = board.output(60)
        assert board.wait() == 0, out
    finally:
        board.close()
    assert "pull-up input 1 1" in out and "time() is an int True" in out, out
    assert "pull-down input 0" in out and "output 0 1" in out and "irq set 0" in out, out
