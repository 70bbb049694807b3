"""A campaign's board run stops at once, even when its thread has passed its check of the stop and is about to
boot (host_bridge.campaigns.stack.BoardRun.stop): `host-bridge demo`'s Ctrl-C, and every campaign's end."""

from __future__ import annotations

import random
import threading
from pathlib import Path

from host_bridge.campaigns.stack import BoardRun, BoardSpec
from host_bridge.hil.dut import BootEnd


class SilentConsole:
    path = None

    def text(self) -> str:
        return ""

    def since_start(self) -> str:
        return ""


class RacingDut:
    """A board whose next boot starts only once the run has been told to stop (the race stop() must win): each
    boot lasts until its power is cut."""

    name = "racing"
    console = SilentConsole()  # (the plan's cut after an accepted message watches it: nothing is accepted)
    flash_cuts = event_cuts = False
    boots = cuts = 0
    pids: list[int] = []

    def __init__(self, stop_requested: threading.Event) -> None:
        self.stop_requested = stop_requested
        self.running = threading.Event()
        self.cut = threading.Event()

    def start(self, cut_at_op: int = 0, cut_in_sleep: int = 0, cut_on: object = None) -> None:
        self.stop_requested.wait(10)
        self.cut.clear()
        self.running.set()

    def wait_boot(self, timeout: float) -> BootEnd:
        assert self.cut.wait(timeout), "this boot's power was never cut"
        return BootEnd("power-cut", -9, None, "")

    def power_cut(self) -> None:
        if self.running.is_set():
            self.running.clear()
            self.cut.set()

    def close(self) -> None:
        pass


def test_a_boot_that_starts_as_the_run_is_stopped_is_cut_and_the_run_ends(tmp_path: Path) -> None:
    run = BoardRun(BoardSpec("racing", "tcp", "5", 1), tmp_path / "board", "127.0.0.1:1", 100, 3, random.Random(1))
    dut = RacingDut(run._stop)
    run.dut = dut  # type: ignore[assignment]
    run.start()
    assert run.thread is not None
    run.stop()  # its first power cut finds no boot running: the boot starts after it
    assert not run.thread.is_alive(), "stop() returned with the run's thread still booting the board"
    assert run.error is None and not dut.running.is_set()
