"""The bench's verdict holds every board to the heap budget (docs/install-paths.md): a run whose summary reports
less free heap than HEAP_GOAL at its lowest fails, even when every message arrived once; TLS's share is counted
back, as it lives in ESP-IDF's heap on a chip."""

from __future__ import annotations

from typing import Any

import pytest

from dmqtt_telemetry.promises import Delivery
from host_bridge.hil.verdict import HEAP_GOAL, BoardRun, judge_runs


class Arrived:
    """A subscriber that saw `count` messages of one boot, each once."""

    def __init__(self, dev: str, qos: int, count: int) -> None:
        self.arrivals = [Delivery(dev, 1, seq, qos) for seq in range(count)]

    def wait_for(self, dev: str, count: int, timeout: float) -> None:
        pass

    def deliveries(self) -> list[Delivery]:
        return self.arrivals


def summary(heap_min: int, heap_tls: int = 0) -> dict[str, Any]:
    return {"dev": "b1", "total": 10, "heap_min": heap_min, "heap_tls": heap_tls, "heap_at_boot": 112640}


def judged(run: BoardRun) -> Any:
    return judge_runs("heap", Arrived("b1", 1, 10), [run])  # type: ignore[arg-type]


def test_a_board_at_the_budget_passes() -> None:
    verdict = judged(BoardRun.from_summary(summary(HEAP_GOAL), qos=1))
    verdict.assert_kept()
    assert verdict.tallies[0].verdict == "PASS" and f"{HEAP_GOAL / 1024:.1f}" in verdict.table()


def test_a_board_under_the_budget_fails_with_every_message_delivered() -> None:
    verdict = judged(BoardRun.from_summary(summary(HEAP_GOAL - 1), qos=1))
    assert verdict.tallies[0].lost == 0 and verdict.tallies[0].verdict == "FAIL"
    with pytest.raises(AssertionError, match="heap went under the budget"):
        verdict.assert_kept()


def test_what_tls_holds_is_counted_back() -> None:
    run = BoardRun.from_summary(summary(HEAP_GOAL - 5000, heap_tls=5000), qos=2)
    assert run.heap_low == HEAP_GOAL
    judged(run).assert_kept()


def test_a_summary_without_heap_figures_is_judged_on_the_promises_alone() -> None:
    run = BoardRun.from_summary({"dev": "b1", "total": 10}, qos=1)
    assert run.heap_low is None
    judged(run).assert_kept()


def test_a_message_delivered_again_with_no_cut_between_is_a_resend_after_its_acknowledgement() -> None:
    """resent_without_cut: a second delivery of a message is explained only by a power cut between the two (or
    just before the first); with none it is reported, naming the message."""
    from dmqtt_telemetry.promises import Delivery
    from host_bridge.hil.subscriber import Record
    from host_bridge.hil.verdict import resent_without_cut

    def record(seq: int, at: float, dev: str = "b1") -> Record:
        return Record("sensors/b1/telemetry", b"{}", 1, False, False, at, Delivery(dev, 3, seq, 1))

    once = [record(0, 10.0), record(1, 11.0)]
    assert resent_without_cut(once, "b1", []) == []
    again = [*once, record(0, 20.0)]
    assert resent_without_cut(again, "b1", [15.0]) == []  # a cut came between
    assert resent_without_cut(again, "b1", [9.5]) == []  # just before the first delivery: the send was before it
    found = resent_without_cut(again, "b1", [5.0, 25.0])
    assert found == ["boot 3 seq 0: again 10.00 s after the first, no cut between"]
    assert resent_without_cut([*again, record(0, 30.0, "b2")], "b2", []) == []  # another board's own
