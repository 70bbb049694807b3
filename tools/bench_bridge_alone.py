"""Figure 6b of BENCHMARKS.md: the bridge measured alone. 64, 128 and 256 synthetic boards (tools/synthetic_boards.py:
one CPython process of pseudo-terminals that speak the link with the firmware's own code, no MicroPython) each
publish QoS 1 telemetry every INTERVAL_MS through one `host-bridge run` at 115200 baud to Mosquitto; an observer at
the broker times every arrival.

    python tools/bench_bridge_alone.py [--quick] [--boards 64,128]      (part of make bench)

Latency: each message carries the host's CLOCK_MONOTONIC in ms when the synthetic board made it, so arrival minus
that is the relay's whole latency (the link's pacing at the baud rate, the bridge, the broker, the observer). The
baseline is the line itself: the frame of one message at the baud rate. Bridge CPU: its process's user+system
seconds per 1,000 messages, and its share of one core over the run; the synthetic boards' process is reported
beside it (it shares the machine's two cores with the bridge, Mosquitto and the observer)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_bridge import bridge_counter, cpu_seconds, host_busy, observed
from bench_report import Goal, Section, goal_table, table
from figure_cli import print_board_figure
from synthetic_boards import Fleet

from host_bridge.bridge.run_command import command as bridge_command
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.subscriber import Subscriber
from host_bridge.processes import ManagedProcess

BAUD = 115200
INTERVAL_MS = 200  # 5 messages a second per board: 1,280 a second through the bridge at 256 boards
SIZES = (64, 128, 256)


def run(work: Path, broker: Mosquitto, boards: int, count: int) -> dict[str, Any]:
    tag = f"a{boards}-"
    fleet = Fleet(boards, BAUD, INTERVAL_MS, count, tag)
    observer = Subscriber(broker.address, f"observer-alone-{boards}", topic="sensors/+/telemetry", clean=True)
    bridge = ManagedProcess(bridge_command(broker.address, BAUD, fleet.ports), work / f"bridge-{boards}.log")
    try:
        bridge.wait_for("event=start", timeout=60)
        busy0, total0 = host_busy()
        cpu0 = cpu_seconds(bridge.process.pid)
        own0 = time.process_time()
        start = time.monotonic()
        complete = fleet.run(60 + count * INTERVAL_MS / 1000 * 3)
        seconds = time.monotonic() - start
        own = time.process_time() - own0
        fleet.linger(0.5)  # the last arrivals, the boards still serving their links
        bridge_cpu = cpu_seconds(bridge.process.pid) - cpu0
        busy1, total1 = host_busy()
    finally:
        bridge.stop()  # before the boards go: frames to a board that is gone would be sent again
        fleet.close()
        observer.close()
    delivered, _, latency = observed(observer.records, fleet.ports)
    row: dict[str, Any] = {
        "boards": boards,
        "messages_per_board": count,
        "delivered": delivered,
        "complete": complete and delivered == boards * count,
        "seconds": round(seconds, 1),
        "msgs_per_s": delivered / seconds,
        "bridge_cpu_s_per_1000": bridge_cpu / max(1, delivered) * 1000,
        "bridge_core_share": bridge_cpu / seconds,
        "boards_core_share": own / seconds,
        "host_cpu_busy": round((busy1 - busy0) / max(1.0, total1 - total0), 2),
        "bridge_retransmissions": bridge_counter(bridge.text(), "retransmissions"),
        "board_retransmissions": sum(b.link.retransmissions for b in fleet.boards),
        **latency,
    }
    return row


def figure(quick: bool, sizes: tuple[int, ...] | None = None) -> dict[str, Any]:
    sizes = sizes or ((64, 256) if quick else SIZES)
    count = 25 if quick else 100
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Mosquitto(Path(tmp) / "broker") as broker:
        for boards in sizes:
            row = run(Path(tmp), broker, boards, count)
            rows.append(row)
            print(_line(row), flush=True)
    frame_ms = (86 + 10 + 14) * 10 * 1000 / BAUD
    return {
        "baud": BAUD,
        "interval_ms": INTERVAL_MS,
        "frame_ms": round(frame_ms, 1),
        "cores": os.cpu_count(),
        "rows": rows,
    }


# -- the report (tools/bench_bridge_alone.md) -------------------------------------------------------------------


def report(fig: dict[str, Any], figures: dict[str, Any]) -> Section:
    rows = [
        [r["boards"], f"{r['delivered']}/{r['boards'] * r['messages_per_board']}", f"{r['msgs_per_s']:.0f}",
         f"{r['latency_p50_ms']:.0f} / {r['latency_p99_ms']:.0f}", f"{r['bridge_cpu_s_per_1000']:.2f}",
         f"{r['bridge_core_share']:.0%}", f"{r['boards_core_share']:.0%}",
         f"{r['board_retransmissions']} + {r['bridge_retransmissions']}", f"{r['host_cpu_busy']:.0%}"]
        for r in fig["rows"]
    ]  # fmt: skip
    biggest = fig["rows"][-1]
    n = biggest["boards"]
    retx = sum(r["board_retransmissions"] + r["bridge_retransmissions"] for r in fig["rows"])
    goals = [
        Goal("6b", f"{n} boards: p99 relay latency (ms)", "<= 30", f"{biggest['latency_p99_ms']:.0f}",
             biggest["latency_p99_ms"] <= 30),
        Goal("6b", f"{n} boards: the bridge's share of one core", "< 100%", f"{biggest['bridge_core_share']:.0%}",
             biggest["bridge_core_share"] < 1),
        Goal("6b", f"{n} boards: every message delivered", "all",
             f"{biggest['delivered']}/{n * biggest['messages_per_board']}", biggest["complete"]),
        Goal("6b", "clean lines: link retransmissions, all runs", "0", str(retx), retx == 0),
    ]  # fmt: skip
    head = ["boards", "delivered", "msg/s", "p50 / p99", "bridge CPU s / 1000", "bridge, of a core",
            "boards, of a core", "retransmissions", "host CPU"]  # fmt: skip
    values = {"interval_ms": str(fig["interval_ms"]), "baud": str(fig["baud"]), "frame_ms": str(fig["frame_ms"]),
              "table": table(head, rows), "goals_table": goal_table(goals)}  # fmt: skip
    return Section(values, goals)


def _line(r: dict[str, Any]) -> str:
    return (
        f"  {r['boards']:>3} synthetic boards: {r['delivered']}/{r['boards'] * r['messages_per_board']} delivered, "
        f"{r['msgs_per_s']:.0f} msg/s, latency p50 {r.get('latency_p50_ms', -1):.0f} ms "
        f"p99 {r.get('latency_p99_ms', -1):.0f} ms, bridge {r['bridge_cpu_s_per_1000']:.2f} CPU s/1000 msgs "
        f"({r['bridge_core_share']:.0%} of a core), boards {r['boards_core_share']:.0%} of a core, "
        f"host {r['host_cpu_busy']:.0%}, retransmissions {r['board_retransmissions']} + {r['bridge_retransmissions']}"
    )


def main() -> None:
    print_board_figure(__doc__, figure, "64,128,256")


if __name__ == "__main__":
    main()
