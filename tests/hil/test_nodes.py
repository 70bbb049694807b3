"""Durable nodes through a gateway (docs/nodes.md), on the bench: nodes that deep-sleep between readings and send
each at its wake over ESP-NOW, a gateway on a serial line to `host-bridge run`, a real Mosquitto. Every scenario is
judged by the witness (each node's `accepted` lines against what the broker delivered): nothing lost, QoS 2 once.
The disturbances: node power cuts inside flash operations, the gateway's power cut in the middle of a node's send,
the bridge killed, a lossy air, the gateway away for a node's wakes.

`make test` runs a small dose of each; `make soak` the large one (more nodes, readings and cuts: NODES_SOAK)."""

from __future__ import annotations

import os
import random
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dmqtt_pipeline import audit
from dmqtt_pipeline.spark import read_telemetry
from dmqtt_telemetry.promises import Expectation
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.cycle import CutPlan, run_to_completion
from host_bridge.hil.nodes import NodeRig, NodeSpec, node_heap_goal, node_mac, run_nodes
from host_bridge.hil.verdict import BoardRun, Verdict
from host_bridge.hil.virtual_dut import VirtualDut
from host_bridge.vboard.air import LinkModel
from host_bridge.vboard.events import EventSpec, Hold
from tests.integration.recorder_proc import RecorderProcess, read_rows

Judge = Callable[[list[BoardRun]], Verdict]
SOAK = os.environ.get("NODES_SOAK") == "1"
READINGS = 40 if SOAK else 8


def specs(prefix: str, n: int, qos: tuple[int, ...] = (1, 2)) -> list[NodeSpec]:
    return [NodeSpec(f"{prefix}-{i}", qos=qos[i % len(qos)], count=READINGS) for i in range(n)]


def complete(rig: NodeRig, plan: CutPlan, seed: int = 0) -> list[BoardRun]:
    """Every node run to completion (its readings all taken and acknowledged), each with its cuts; their runs."""

    def one(dut: VirtualDut) -> BoardRun:
        spec = next(s for s in rig.nodes if s.client_id == dut.name)
        result = run_to_completion(dut, plan, random.Random(f"{seed}-{dut.name}"), timeout=120)
        run = BoardRun.from_cycle(dut, result, spec.qos)
        run.heap_goal = node_heap_goal(spec)
        return run

    return list(run_nodes(rig, one))


def complete_disturbed(rig: NodeRig, hold: Hold, disturb: Callable[[], None]) -> list[BoardRun]:
    """complete() with no cuts while `disturb` runs beside it, from when a node reaches `hold` (disturb releases
    it); released again at the end whatever happened, so that no node waits for ever."""

    def at_hold() -> None:
        if hold.reached.wait(120):
            disturb()

    thread = threading.Thread(target=at_hold, daemon=True)
    thread.start()
    try:
        return complete(rig, CutPlan.none())
    finally:
        hold.release()
        thread.join(60)


@pytest.fixture
def rig_for(hil_broker: Mosquitto, hil_log: Path) -> Callable[..., NodeRig]:
    made: list[NodeRig] = []

    def make(nodes: list[NodeSpec], **options: object) -> NodeRig:
        rig = NodeRig(hil_log / f"rig{len(made)}", hil_broker.address, nodes, **options)  # type: ignore[arg-type]
        made.append(rig)
        rig.start()
        return rig

    yield make
    for rig in made:
        rig.close()


def test_nodes_deliver_every_reading_at_its_wake(rig_for: Callable[..., NodeRig], hil_verdict: Judge) -> None:
    """Five nodes (QoS 1 and 2, one with an encrypted link), each reading sent at its own wake: every one
    arrives, QoS 2 once, and a node's wakes after its first send without loading the client."""
    nodes = specs("node-all", 5)
    nodes[4].lmk = "node-key-16bytes"
    rig = rig_for(nodes)
    runs = complete(rig, CutPlan.none())
    hil_verdict(runs).assert_kept()
    # The client loads at the power-on and at the run's end; between them only where a wake's answer came late (a
    # gateway busy with five nodes waking at once in host time) and the next wake sent the two: few.
    console = rig.duts[0].console.all()
    assert console.count("connected session_present=1") <= 2 + READINGS // 10, console


def test_node_power_cuts_inside_flash_operations(rig_for: Callable[..., NodeRig], hil_verdict: Judge) -> None:
    """Nodes cut inside a program or an erase of their flash, or in a deep sleep: what each said it accepted
    arrives, QoS 2 once (the gateway takes a message it has again as a duplicate)."""
    rig = rig_for(specs("node-cut", 3))
    plan = CutPlan(cuts=6 if SOAK else 3, inside_flash=0.7, flash_ops=(3, 60), in_sleep=0.3, sleeps=(1, READINGS))
    runs = complete(rig, plan, seed=1)
    verdict = hil_verdict(runs)
    verdict.assert_kept()
    assert sum(r.power_cuts for r in runs) >= 3


def test_the_gateway_cut_during_a_send_and_the_bridge_killed(
    rig_for: Callable[..., NodeRig], hil_verdict: Judge
) -> None:
    """The gateway's power is cut while a node is inside its third send, and comes back; later the bridge is
    killed and started again. The readings wait in the nodes' journals (and the gateway's) and all arrive."""
    rig = rig_for(specs("node-gw", 3))
    hold = rig.air.hold_at(EventSpec("send", 3), board=node_mac(0))
    served = rig.gateway.console.all().count("serves its nodes")

    def disturb() -> None:
        rig.cut_gateway()  # (the node waits at its send meanwhile: the gateway is off when the frame goes)
        hold.release()
        rig.wait_served(60, after=served - 1)
        rig.kill_bridge()
        rig.start_bridge()

    hil_verdict(complete_disturbed(rig, hold, disturb)).assert_kept()
    assert hold.reached.is_set()
    assert rig.gateway.console.all().count("gateway: the host bridge serves its nodes") >= 2


def test_a_lossy_air_and_a_gateway_away_for_wakes(rig_for: Callable[..., NodeRig], hil_verdict: Judge) -> None:
    """20% of frames and acknowledgements lost each way, and one node's gateway out of range for some of its wakes
    (5; 100 in the soak): the readings of those wakes journaled, and sent, in order, once the gateway hears the node
    again, within that wake."""
    away = 100 if SOAK else 5
    nodes = specs("node-lossy", 3)
    nodes[0].count = away + 10
    nodes[0].queue_limit = away + 8
    rig = rig_for(nodes, default=LinkModel(loss=0.2), seed=5)
    rig.away_for_wakes(0, 3, 3 + away)
    runs = complete(rig, CutPlan.none())
    hil_verdict(runs).assert_kept()
    console = rig.duts[0].console.all()
    assert "sleep: 59" in console and rig.air.stats.lost > 0, rig.air.stats
    # The wakes while it was away each journaled a reading and slept; the one the gateway heard sent them all.
    assert max(int(n) for n in re.findall(r"sleep: \d+ ms, (\d+) in flight", console)) >= away


def test_the_broker_restarted_while_nodes_send(
    rig_for: Callable[..., NodeRig], hil_broker: Mosquitto, hil_verdict: Judge
) -> None:
    """Mosquitto stopped at a node's fifth send (the readings of the wakes meanwhile wait on the gateway's flash, the
    nodes' journals done with them) and started again: they reach the broker once it is back. (A SIGKILLed broker
    loses what it had acknowledged and not yet saved, for a node's gateway as for any board: docs/promise.md.)"""
    rig = rig_for(specs("node-broker", 2))
    hold = rig.air.hold_at(EventSpec("send", 5), board=node_mac(1))

    def disturb() -> None:
        hil_broker.stop()
        hold.release()
        hil_broker.start()

    hil_verdict(complete_disturbed(rig, hold, disturb)).assert_kept()
    assert hold.reached.is_set()


def test_nodes_are_boards_of_their_own_to_the_recorder_and_the_spark_audit(
    rig_for: Callable[..., NodeRig], hil_broker: Mosquitto, hil_log: Path, spark: SparkSession
) -> None:
    """`host-bridge record` stores each node's readings under its own client id, as any board's, and the Spark
    audit judges each node against its witness and its summary: nothing lost, QoS 2 once, through power cuts of the
    nodes (docs/nodes.md: each node is a board of its own to the recorder and the audit)."""
    store = hil_log / "store"
    recorder = RecorderProcess(store, hil_broker.address, "--mqtt-version", "5", log_dir=hil_log)
    nodes = specs("node-rec", 3)
    try:
        recorder.wait_connected()
        rig = rig_for(nodes)
        plan = CutPlan(cuts=2, inside_flash=0.7, flash_ops=(3, 40), in_sleep=0.3, sleeps=(1, READINGS))
        runs = complete(rig, plan, seed=3)
        accepted = {
            (r.dev, boot, seq) for r in runs if r.witness for boot, seqs in r.witness.seqs.items() for seq in seqs
        }
        deadline = time.monotonic() + 30
        while not accepted <= {(row["dev"], row["boot"], row["seq"]) for row in read_rows(store)}:
            assert time.monotonic() < deadline, "the recorder did not store every accepted reading within 30 s"
            time.sleep(0.1)
    finally:
        recorder.stop()
    expect = {r.dev: Expectation(r.sent, r.qos, r.witness, r.final) for r in runs}
    result, _ = audit.audit(read_telemetry(spark, str(store)), expect)
    assert result.ok, audit.format_table(result)
    assert {b["dev"] for b in result.boots} == {spec.client_id for spec in nodes}
    assert sum(r.power_cuts for r in runs) >= 2
