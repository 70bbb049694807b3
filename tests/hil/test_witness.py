"""The witness proves itself: a planted bug that the journal cannot show, and the verdict that catches it.

The bug (tests/plants/publish_before_flash/main.py): publish() returns before the message's record is
programmed; the record waits in RAM until the next acknowledgement's record is written (or RAM is full), and
resends read it from there, so nothing crashes. While the broker is away no acknowledgement comes, so a power
cut then loses messages the board had accepted into its offline queue, and their progress mark with them: the
run republishes their readings under the next boot and its total comes out right. The cut lands while the
board waits on a full offline queue: idle, its last accepted message's record still in RAM (a cut at any other
moment can fall between a publish() that flushed the older records and its `accepted` line, and then the board
lost only a message it never claimed, which the witness rightly does not count). Judged by that
total (what the journal says), the power-cut scenario passes; judged by the board's `accepted` lines (what it
said the moment publish() returned), it fails with the lost messages named. The same scenario on the real
journal passes both ways."""

from __future__ import annotations

import random
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dboard import console_host
from host_bridge.boards.definition import BoardDefinition
from host_bridge.hil.cycle import CutPlan, run_to_completion
from host_bridge.hil.scenario import app_config
from host_bridge.hil.subscriber import Subscriber
from host_bridge.hil.verdict import BoardRun, judge_runs
from host_bridge.hil.virtual_dut import VirtualDut
from tests.plants import planted_app

COUNT = 300


def accepted_in_this_boot(dut: VirtualDut) -> int:
    return len(console_host.lines(dut.console.text(), "accepted"))


def wait_accepted(dut: VirtualDut, n: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while accepted_in_this_boot(dut) < n:
        assert time.monotonic() < deadline and dut.alive(), f"{n} accepted messages never came: {dut.console.path}"
        time.sleep(0.01)


def outage_and_cut(hil_log: Path, name: str, hil_broker: Any, qos: int, app: Path | None) -> BoardRun:
    """The broker goes down mid-run; the board accepts messages into its journal (the offline queue) until every
    slot is taken, then, waiting for the broker, loses power; the broker and the board come back and the run
    completes."""
    dev = f"{name}-{time.monotonic_ns() % 10**8}"
    options: dict[str, Any] = {"app": app} if app is not None else {}
    dut = VirtualDut(
        dev,
        BoardDefinition.load("sim"),
        flash=hil_log / dev / "board.flash",
        console_log=hil_log / f"{dev}.log",
        **options,
    )
    try:
        dut.configure(app_config(dut, dev, hil_broker.address, qos, COUNT, "5", publish={"interval_ms": 5}))
        dut.start()
        dut.expect(r"connected session_present", timeout=30)
        wait_accepted(dut, 20)
        hil_broker.stop()
        gone = dut.expect(r"connection lost|connect failed", timeout=30).end()
        dut.expect(r"offline queue full", timeout=30)
        offline = console_host.lines(dut.console.text()[gone:], "accepted")
        assert offline, f"the board accepted nothing while the broker was away: {dut.console.path}"
        dut.power_cut()
        assert dut.wait_boot(30).kind == "power-cut"
        hil_broker.start()
        result = run_to_completion(dut, CutPlan.none(), random.Random(qos), timeout=180)
        assert result.summary is not None
        run = BoardRun.witnessed(dut, result.summary, qos, dut.boots, dut.cuts)
        # The second boot resumed the queued messages: the cut landed with flows in flight.
        run.resumed_in_flight = sum(1 for _, in_flight in console_host.boots(dut.console.all())[1:] if in_flight)
        return run
    finally:
        dut.close()


@pytest.mark.hil_virtual("plants a bug in the virtual board's journal, and stops the bench's broker")
@pytest.mark.parametrize("qos", [1, 2])
def test_a_journal_that_returns_before_programming_is_caught_by_the_witness(
    hil_log: Path, hil_broker: Any, hil_subscriber: Subscriber, qos: int
) -> None:
    planted = planted_app(hil_log / "planted-app", "publish_before_flash")
    bad = outage_and_cut(hil_log, f"planted-q{qos}", hil_broker, qos, planted)
    assert bad.power_cuts == 1 and bad.sent == COUNT  # the cut given, the total right: the bug hides there
    blind = judge_runs(f"planted-q{qos}-by-total", hil_subscriber, [replace(bad, witness=None)], settle=5)
    assert not blind.tallies[0].lost, "judged by the journal's total the planted bug should hide: " + blind.table()
    caught = judge_runs(f"planted-q{qos}", hil_subscriber, [bad], settle=5)
    caught.save(hil_log)
    assert caught.tallies[0].lost > 0 and caught.tallies[0].verdict == "FAIL", caught.table()
    assert any("accepted and never arrived" in p for p in caught.per_qos[qos].problems), caught.table()

    good = outage_and_cut(hil_log, f"real-q{qos}", hil_broker, qos, None)
    hil_verdict = judge_runs(f"real-q{qos}", hil_subscriber, [good])
    hil_verdict.save(hil_log)
    hil_verdict.assert_kept()
    assert good.power_cuts == 1 and good.witness and good.resumed_in_flight == 1, good
