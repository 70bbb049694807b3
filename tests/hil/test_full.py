"""The limits of the offline queue, reached: what the board says and does when every journal slot holds a
message in flight, and when its journal partition has no room for another message. Either way it is
backpressure, never a failure: the board says so on its console (`offline queue full`), publish() accepts
nothing more until acknowledgements free room, and when the broker is back the run completes with nothing lost
(the witness judges it)."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dboard import console_host
from host_bridge.boards.definition import BoardDefinition
from host_bridge.hil.scenario import app_config
from host_bridge.hil.subscriber import Subscriber
from host_bridge.hil.verdict import BoardRun, judge_runs
from host_bridge.hil.virtual_dut import VirtualDut


def small_journal(sectors: int) -> BoardDefinition:
    """The virtual ESP32 with its mqttlog partition cut down to `sectors` 4 KB sectors."""
    sim = BoardDefinition.load("sim")
    parts = tuple(replace(p, size=sectors * 4096) if p.label == "mqttlog" else p for p in sim.partitions)
    assert any(p.label == "mqttlog" for p in parts)
    return replace(sim, name="sim-small-journal", partitions=parts)


def run_with_outage(
    hil_log: Path, name: str, board: BoardDefinition, hil_broker: Any, count: int, payload: int, queued: int
) -> tuple[BoardRun, str]:
    """The broker goes away after the board's first messages; once the board says its queue is full (after
    `queued` accepted while away), the broker comes back and the run completes."""
    dev = f"{name}-{time.monotonic_ns() % 10**8}"
    dut = VirtualDut(dev, board, flash=hil_log / dev / "b.flash", console_log=hil_log / f"{dev}.log")
    try:
        publish = {"payload_bytes": payload, "interval_ms": 50}  # slow enough that the outage comes mid-run
        dut.configure(app_config(dut, dev, hil_broker.address, 1, count, "5", publish=publish))
        dut.start()
        dut.expect(r"^accepted 1 4$", timeout=30)
        hil_broker.stop()
        dut.expect(r"^offline queue full \(\d+ messages\): waiting for the broker$", timeout=60)
        away = console_host.lines(dut.console.text(), "queue_full")[0].values[0]
        assert away >= queued, f"{away} messages queued"
        hil_broker.start()
        end = dut.wait_boot(120)  # the same boot carries on: backpressure, not a failure
        assert end.kind == "done" and end.summary is not None, end.console[-2000:]
        return BoardRun.witnessed(dut, end.summary, 1, dut.boots, dut.cuts), dut.console.all()
    finally:
        dut.close()


@pytest.mark.hil_virtual("stops the bench's broker")
def test_every_slot_in_flight_is_backpressure_until_the_broker_is_back(
    hil_log: Path, hil_broker: Any, hil_subscriber: Subscriber
) -> None:
    run, console = run_with_outage(hil_log, "slots", BoardDefinition.load("sim"), hil_broker, 60, 100, queued=32)
    judge_runs(run.dev, hil_subscriber, [run]).assert_kept()
    assert run.sent == 60 and console.count("offline queue full (32 messages)") >= 1, console[-2000:]
    assert "journal error" not in console


@pytest.mark.hil_virtual("a board definition with a journal partition of 4 sectors")
def test_a_full_journal_partition_is_backpressure_not_a_journal_error(
    hil_log: Path, hil_broker: Any, hil_subscriber: Subscriber
) -> None:
    """600-byte messages in a 16 KB journal: room for a dozen in flight, far fewer than the 32 slots. The
    journal refuses the next one before writing anything, publish() says the queue is full, and the flows
    resume when the broker is back."""
    run, console = run_with_outage(hil_log, "tiny", small_journal(4), hil_broker, 30, 600, queued=4)
    judge_runs(run.dev, hil_subscriber, [run]).assert_kept()
    assert run.sent == 30 and "journal error" not in console, console[-2000:]
    full = [ln.values[0] for ln in console_host.lines(console, "queue_full")]
    assert full and max(full) < 32, f"the journal, not the slots, should have been full: {full}"
