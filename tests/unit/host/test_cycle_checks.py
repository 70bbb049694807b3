"""The bench's run of a board (host_bridge.hil.cycle.run_to_completion) holds the board's own boot counter
against the boots it made: a board that counted more boots than the bench made (and saw it make by itself)
reset on its own, which a verdict must not pass for a run through the bench's power cuts."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from dboard import console
from host_bridge.hil.cycle import CutPlan, run_to_completion
from host_bridge.hil.dut import BootEnd, DutError


class ScriptedConsole:
    def __init__(self, path: Path) -> None:
        self.path = path

    def since_start(self) -> str:
        return ""


class ScriptedDut:
    """A board whose every boot prints the boot lines `numbers` gives it, then completes its run."""

    name = "scripted"
    summary_keys = console.SUMMARY_KEYS
    flash_cuts = sleep_cuts = event_cuts = False
    counts_own_boots = True

    def __init__(self, numbers: list[int], path: Path) -> None:
        self.numbers = numbers
        self.console = ScriptedConsole(path)
        self.boots = 0

    def start(self, cut_at_op: int = 0, cut_in_sleep: int = 0, cut_on: object = None) -> None:
        self.boots += 1

    def wait_boot(self, timeout: float) -> BootEnd:
        text = "".join(console.BOOT % (n, 0, "test") + "\n" for n in self.numbers)
        summary = {key: 0 for key in console.SUMMARY_KEYS} | {"boot": self.numbers[-1]}
        return BootEnd("done", 0, summary, text)

    def power_cut(self) -> None:
        raise AssertionError("no cut planned")


def test_a_board_that_counts_the_boots_the_bench_made_passes(tmp_path: Path) -> None:
    result = run_to_completion(ScriptedDut([7], tmp_path / "c.log"), CutPlan.none(), random.Random(1))  # type: ignore[arg-type]
    assert result.board_boots == [(7, 0)]


def test_a_board_that_reset_by_itself_fails_the_run(tmp_path: Path) -> None:
    # One boot made by the bench, three counted by the board (it reset twice, unseen).
    dut = ScriptedDut([7, 8, 9], tmp_path / "c.log")
    with pytest.raises(DutError, match="counted boots 7 to 9 while the bench made 1"):
        run_to_completion(dut, CutPlan.none(), random.Random(1))  # type: ignore[arg-type]
