"""`host-bridge nodes`: durable nodes through a gateway on virtual boards (docs/nodes.md), end to end in one command:
Mosquitto (or --broker), a gateway board on a serial line to `host-bridge run`, N nodes over the ESP-NOW air, each
deep-sleeping between readings and sending each at its wake; optionally a lossy air, the gateway away for a node's
wakes, and power cuts of the nodes. Every node's witness (its `accepted` lines) is judged against what the broker
delivered, as the bench judges any board; the exit status says whether every promise held."""

from __future__ import annotations

import argparse
import random
import shutil
import signal
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("build/nodes"), help="work and log folder (emptied first)")
    parser.add_argument("--nodes", type=int, default=3, help="nodes behind the gateway (1 to 16)")
    parser.add_argument("--readings", type=int, default=10, help="readings per node, one a wake")
    parser.add_argument("--qos", type=int, choices=(1, 2), default=1, help="the nodes' QoS")
    parser.add_argument("--loss", type=float, default=0.0, help="share of frames (and acknowledgements) the air loses")
    parser.add_argument("--away", type=int, default=0, help="the gateway out of range for this many of node 0's wakes")
    parser.add_argument("--cuts", type=int, default=0, help="power cuts per node, inside flash operations or sleeps")
    parser.add_argument("--broker", help="HOST:PORT of a broker to use instead of a Mosquitto of the command's own")
    parser.add_argument("--seed", type=int, default=62)


def run(args: argparse.Namespace) -> int:
    from host_bridge.errors import HostBridgeError

    if not 1 <= args.nodes <= 16:
        raise HostBridgeError(f"--nodes {args.nodes}: a gateway of the virtual board holds 1 to 16 nodes' journals")
    if not 0 <= args.loss < 1:
        raise HostBridgeError(f"--loss {args.loss}: a share of frames, from 0 up to (not including) 1")

    def interrupted(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM cleans up as Ctrl-C does: every process started here is stopped

    signal.signal(signal.SIGTERM, interrupted)
    out = args.out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    if args.broker:
        return _run(args, out, args.broker)
    from host_bridge.broker.mosquitto import Mosquitto

    with Mosquitto(out / "broker") as broker:
        return _run(args, out, broker.address)


def _run(args: argparse.Namespace, out: Path, broker: str) -> int:
    from host_bridge.hil.cycle import CutPlan, run_to_completion
    from host_bridge.hil.nodes import NodeRig, NodeSpec, node_heap_goal, run_nodes
    from host_bridge.hil.subscriber import Subscriber
    from host_bridge.hil.verdict import BoardRun, judge_runs
    from host_bridge.hil.virtual_dut import VirtualDut
    from host_bridge.vboard.air import LinkModel

    specs = [NodeSpec(f"node-{i}", qos=args.qos, count=args.readings) for i in range(args.nodes)]
    if args.away:
        specs[0].count = max(args.readings, args.away + 5)
        specs[0].queue_limit = max(64, args.away + 8)
    plan = CutPlan(cuts=args.cuts, inside_flash=0.7, flash_ops=(3, 60), in_sleep=0.3) if args.cuts else CutPlan.none()
    subscriber = Subscriber(broker, f"nodes-observer-{args.seed}")
    rig = NodeRig(out, broker, specs, LinkModel(loss=args.loss), args.seed)
    try:
        print(f"nodes: a gateway and {args.nodes} nodes on the virtual board; logs in {out}")
        rig.start()
        if args.away:
            rig.away_for_wakes(0, 3, 3 + args.away)

        def one(dut: VirtualDut) -> BoardRun:
            spec = next(s for s in specs if s.client_id == dut.name)
            result = run_to_completion(dut, plan, random.Random(f"{args.seed}-{dut.name}"), timeout=300)
            run = BoardRun.from_cycle(dut, result, spec.qos)
            run.heap_goal = node_heap_goal(spec)
            print(f"nodes: {dut.name} done: {spec.count} readings, {result.cuts} power cuts")
            return run

        runs = list(run_nodes(rig, one, timeout=1800))
        verdict = judge_runs("host-bridge nodes", subscriber, runs)
    finally:
        rig.close()
        subscriber.close()
    print(verdict.table())
    stats = rig.air.stats
    print(f"air: {stats.frames} frames, {stats.acknowledged} acknowledged, {stats.lost} not (lost, out of range)")
    kept = verdict.ok and not verdict.short_of_heap()
    print("nodes: every promise kept" if kept else "nodes: a promise was broken, or a heap ran short (see the table)")
    return 0 if kept else 1
