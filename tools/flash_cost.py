"""Flash cost per message of each journal backend, the firmware's heap, and QoS 1 throughput with and without
the window, measured on the virtual board.

    python tools/flash_cost.py [--messages N]        (part of make bench)

Runs the board application against a Mosquitto on loopback: once with count 0 (the cost of a boot: config,
boot counter, journal open) and once with N messages, and reports the difference per message from the
emulated flash's counters, for the ring journal (boards/sim, "mqttlog" partition) and the LittleFS file
journal (boards/sim-nojournal). The record's own bytes are the floor to compare against.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from host_bridge.boards import BoardDefinition
from host_bridge.broker import Mosquitto
from host_bridge.hil.cycle import boot_once
from host_bridge.hil.dut import VirtualDut

TOPIC = "sensors/{client_id}/telemetry"


def run_board(
    workdir: Path, board: str, broker: str, qos: int, count: int, payload: int, group: int = 0, window: int = 8
) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    config = {
        "client_id": "cost",
        "broker": broker,
        "window": window,
        "group_commit": group,
        "publish": {"topic": TOPIC, "qos": qos, "count": count, "payload_bytes": payload},
    }
    dut = VirtualDut(
        "cost", BoardDefinition.load(board), flash=workdir / "f.flash", console_log=workdir / "console.log"
    )
    try:
        dut.configure(config)
        end = boot_once(dut, timeout=300)
        stats = dut.stats()
    finally:
        dut.close()
    if end.kind != "done" or end.summary is None or stats is None:
        raise SystemExit(f"board failed ({end.status}):\n{end.console}")
    return stats, end.summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--payload", type=int, default=100)
    args = parser.parse_args()
    record = 7 + 13 + len(TOPIC.replace("{client_id}", "cost")) + args.payload  # PUB record
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Mosquitto(Path(tmp) / "broker") as broker:
        for board, part, group in (("sim", "mqttlog", 0), ("sim", "mqttlog", 8), ("sim-nojournal", "vfs", 0)):
            for qos in (1, 2):
                acks = 7 + 2 if qos == 1 else 2 * (7 + 2) + 4  # DONE (+ REL) records
                costs = {}
                for count in (0, args.messages):
                    work = Path(tmp) / f"{board}-{group}-{qos}-{count}"
                    work.mkdir()
                    stats, _ = run_board(work, board, broker.address, qos, count, args.payload, group)
                    costs[count] = stats[part]
                base, full = costs[0], costs[args.messages]
                per = {k: (full[k] - base[k]) / args.messages for k in full}
                rows.append((part, group, qos, per, record + acks))
        (Path(tmp) / "heap").mkdir()
        _, heap = run_board(Path(tmp) / "heap", "sim", broker.address, 1, 100, 256)
        rates = {}
        for window in (1, 8):
            work = Path(tmp) / f"rate-{window}"
            work.mkdir()
            _, result = run_board(work, "sim", broker.address, 1, 1000, 100, 0, window)
            rates[window] = 1000 / (result["ms"] / 1000)
    print(f"flash cost per message ({args.messages} messages, {args.payload}-byte payloads, window 8)")
    print(
        f"{'journal':<24}{'qos':>4}{'bytes programmed':>18}{'records (floor)':>17}{'ratio':>7}"
        f"{'blocks erased':>15}{'program ops':>13}"
    )
    for part, group, qos, per, floor in rows:
        name = "ring (mqttlog)" if part == "mqttlog" else "file (LittleFS)"
        name += f", group {group}" if group else ""
        print(
            f"{name:<24}{qos:>4}{per['bytes_programmed']:>18.1f}{floor:>17}{per['bytes_programmed'] / floor:>7.2f}"
            f"{per['blocks_erased']:>15.3f}{per['program_ops']:>13.2f}"
        )
    print(
        f"QoS 1 throughput to Mosquitto on loopback, 1000 messages: window 1 (stop-and-wait) {rates[1]:.0f}/s, "
        f"window 8 {rates[8]:.0f}/s, ratio {rates[8] / rates[1]:.2f}"
    )
    used = heap["heap_at_boot"] - heap["heap_free"]
    print(
        f"heap: {heap['heap_at_boot']} bytes free at boot (-X heapsize 110k), {heap['heap_free']} free after 100 QoS 1"
    )
    print(f"      messages with 256-byte payloads and window 8: {used} bytes in use by the firmware's objects and")
    print("      buffers (its code is frozen, as firmware/manifest.py has it on a real board; 64-bit Unix port: an")
    print("      ESP32's 32-bit objects are about half that size)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
