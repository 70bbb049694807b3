"""The bench's console log of a board (host_bridge.hil.dut.ConsoleLog): a power cut's line always starts a line of
its own, so that the board's last line reads whole."""

from __future__ import annotations

from pathlib import Path

from host_bridge.hil.dut import POWER_CUT_LINE, ConsoleLog


def test_a_power_cut_is_logged_on_a_line_of_its_own(tmp_path: Path) -> None:
    """A cut can fall between a line the board printed and its newline (MicroPython's print() writes them apart):
    the summary before it still reads as a line of its own."""
    console = ConsoleLog(tmp_path / "console.log")
    with open(tmp_path / "console.log", "ab") as f:
        f.write(b'{"total": 25}')  # the summary, its newline never written
    console.power_cut()
    console.power_cut()
    assert (tmp_path / "console.log").read_text().splitlines() == ['{"total": 25}', POWER_CUT_LINE, POWER_CUT_LINE]
