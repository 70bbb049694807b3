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


def test_what_a_tls_connection_holds_of_the_heap_is_not_counted_back() -> None:
    # heap_tls is what the connection's objects hold of MicroPython's heap, on a chip as on the virtual board
    # (mbedTLS's buffers are elsewhere on both): the firmware's heap, under the budget here.
    run = BoardRun.from_summary(summary(HEAP_GOAL - 900, heap_tls=900), qos=2)
    assert run.heap_low == HEAP_GOAL - 900
    with pytest.raises(AssertionError, match="heap went under the budget"):
        judged(run).assert_kept()


def test_a_summary_without_heap_figures_is_judged_on_the_promises_alone() -> None:
    run = BoardRun.from_summary({"dev": "b1", "total": 10}, qos=1)
    assert run.heap_low is None
    judged(run).assert_kept()


def test_a_message_delivered_again_after_a_wake_that_ended_with_nothing_in_flight_is_a_resend() -> None:
    """resent_without_cut, from the order of the board's life: a message may arrive once per connection the board
    had from its acceptance until a wake of the application ended with nothing in flight (and once more per cut);
    the host's clocks play no part (the records' arrival times are all alike here)."""
    from dmqtt_telemetry.promises import Delivery
    from host_bridge.hil.dut import POWER_CUT_LINE
    from host_bridge.hil.subscriber import Record
    from host_bridge.hil.verdict import resent_without_cut

    def record(boot: int, dev: str = "b1") -> Record:
        return Record("sensors/b1/telemetry", b"{}", 1, False, False, 0.0, Delivery(dev, boot, 0, 1))

    def wake(boot: int, in_flight: int, connected: bool = True) -> list[str]:
        lines = [f"=== boot {boot} ===", f"boot {boot}: 0 in flight, dmqtt 0.11.0", f"accepted {boot} 0"]
        return (
            lines + ["connected session_present=1 inflight=1"] * connected + [f"sleep: 60000 ms, {in_flight} in flight"]
        )

    clean = "\n".join(wake(1, 0) + wake(2, 0))
    assert resent_without_cut([record(1), record(2)], "b1", clean) == []
    # Boot 1's reading again at boot 2, though boot 1 ended with nothing in flight: a resend of what was acknowledged.
    found = resent_without_cut([record(1), record(2), record(1)], "b1", clean)
    assert found == [
        "boot 1 seq 0: delivered 2 times, while the board had 1 connection(s) to send it on before it had nothing "
        "in flight"
    ]
    # A cut before boot 1's sleep line: the acknowledgement may not have been journaled, so boot 2 may send it again.
    cut = "\n".join(wake(1, 0)[:-1] + [POWER_CUT_LINE] + wake(2, 0))
    assert resent_without_cut([record(1), record(2), record(1)], "b1", cut) == []
    # Boot 1 slept with its reading in flight (its acknowledgement unread): boot 2's connection sends it again.
    unread = "\n".join(wake(1, 1) + wake(2, 0))
    assert resent_without_cut([record(1), record(1), record(2)], "b1", unread) == []
    # ... but not a third time.
    assert resent_without_cut([record(1), record(1), record(2), record(1)], "b1", unread) != []
    # A sampling wake's sleep line (no `boot` line: it never connects) neither ends nor extends the count.
    sampling = "\n".join(["=== boot 1 ===", "accepted 1 0", "sleep: 60000 ms, 1 in flight", *wake(2, 0)])
    assert resent_without_cut([record(1), record(2), record(1)], "b1", sampling) != []
    assert resent_without_cut([record(1), record(1)], "b2", clean) == []  # another board's own
