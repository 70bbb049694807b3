"""The promises through many power cuts on each journal backend of the virtual board: the ring on its own raw
partition, the LittleFS file journal of boards with a stock partition table, and group commit. Every boot gets
a cut (three in four inside a flash program or erase, on the ring some aimed at its erases, the rest at a
random moment); a run of 25 messages is booted again until one boot outruns its cut, then a new run starts,
until the dose is given. `make test` cuts each QoS at least 50 times on the ring (25 on the others); `make soak`
multiplies that by HIL_CYCLES. Each dose must land a quarter of its cuts with flows in flight and hit each kind
of the journal's writes (WANTED_KINDS)."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from host_bridge.boards.definition import BoardDefinition
from host_bridge.hil.cycle import CutPlan, run_to_completion
from host_bridge.hil.scenario import app_config
from host_bridge.hil.subscriber import Subscriber
from host_bridge.hil.verdict import BoardRun, Verdict, judge_runs
from host_bridge.hil.virtual_dut import VirtualDut

COUNT = 25  # messages per run
# The operations a dose of cuts must hit, per board and QoS: the ring's message and acknowledgement records and
# its erases; the file journal's writes (LittleFS).
WANTED_KINDS: dict[str, dict[int, set[str]]] = {
    "sim": {1: {"PUB record", "DONE record", "erase"}, 2: {"PUB record", "REL record", "DONE record", "erase"}},
    "sim-nojournal": {1: {"filesystem"}, 2: {"filesystem"}},
}


@pytest.mark.hil_virtual("cuts power inside chosen flash operations")
@pytest.mark.parametrize(
    ("board_name", "group", "qos", "wanted"),
    [
        ("sim", 0, 1, 50),
        ("sim", 0, 2, 50),
        # The LittleFS file journal costs some 35 flash operations per message, the ring about 2.
        ("sim-nojournal", 0, 1, 25),
        ("sim-nojournal", 0, 2, 25),
        # Group commit: staged messages die with the power, the mark with them; the run republishes them.
        ("sim", 4, 2, 40),
    ],
)
def test_power_cuts_lose_nothing_and_qos2_delivers_once(
    hil_log: Path,
    hil_broker: Any,
    hil_subscriber: Subscriber,
    board_name: str,
    group: int,
    qos: int,
    wanted: int,
    hil_cycle: int,
) -> None:
    rng = random.Random(qos * 7919 + len(board_name) + group + hil_cycle * 104729)
    board = BoardDefinition.load(board_name)
    plan = CutPlan(
        cuts=None,
        inside_flash=0.75,
        flash_ops=(1, 120 if board_name == "sim" else 900),
        in_erase=0.15 if board_name == "sim" else 0.0,
        window=(0.05, 0.5),
    )
    runs: list[BoardRun] = []
    while sum(r.power_cuts for r in runs) < wanted:
        dev = f"cut-{board_name}-g{group}-q{qos}-c{hil_cycle}-{len(runs)}"
        dut = VirtualDut(
            dev,
            board,
            flash=hil_log / dev / "board.flash",
            console_log=hil_log / f"{dev}.console.log",
            seed=rng.randrange(1 << 30),
        )
        try:
            dut.configure(
                app_config(
                    dut, dev, hil_broker.address, qos, COUNT, ["3.1", "3.1.1", "5"][len(runs) % 3], group_commit=group
                )
            )
            result = run_to_completion(dut, plan, rng, timeout=60)
        finally:
            dut.close()
        assert result.summary is not None and result.summary["total"] == COUNT, result.last
        runs.append(BoardRun.from_cycle(dut, result, qos))
    hil_verdict: Verdict = judge_runs(f"journal-{board_name}-g{group}-q{qos}", hil_subscriber, runs)
    hil_verdict.save(hil_log)
    hil_verdict.assert_kept()
    # The cuts landed where the promises are at stake: with flows open (the next boot resumed messages in
    # flight), and inside each kind of the journal's own writes.
    kinds = sum((r.cut_kinds for r in runs), Counter())
    cuts = sum(r.power_cuts for r in runs)
    in_flight = sum(r.resumed_in_flight for r in runs)
    print(f"\n{board_name} group {group} QoS {qos}: {cuts} cuts, {in_flight} with flows in flight: {dict(kinds)}")
    assert in_flight >= cuts // 4, f"only {in_flight} of {cuts} cuts landed with flows in flight: {dict(kinds)}"
    wanted_kinds = WANTED_KINDS[board_name][qos]
    assert wanted_kinds <= set(kinds), f"no cut hit {wanted_kinds - set(kinds)}: {dict(kinds)}"
