"""Figure 4 of BENCHMARKS.md: flash wear per message of each journal backend, against the records' own bytes and
against a file-per-message store (as Paho C keeps its persistence) measured in the same run, and the years a
board's journal partition lasts at one message per second; also the firmware's heap and QoS 1 throughput with and
without the window.

    python tools/flash_cost.py [--quick] [--messages N]        (part of make bench)

Runs the board application against a Mosquitto on loopback: once with count 0 (the cost of a boot: config,
boot counter, journal open) and once with N messages, and takes the difference per message from the emulated
flash's counters, for the ring journal (boards/sim, "mqttlog" partition) and the LittleFS file journal
(boards/sim-nojournal). The file-per-message store runs as its own board application
(tools/bench_apps/file_per_message). Years assume the flash's rated 100,000 erase cycles per sector (W25Q32JV
datasheet) spread evenly over the partition, as the ring and LittleFS both spread them, on an ESP32-DevKitC's
partition table (boards/esp32-devkitc).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_report import Goal, Section, goal_table, table

from host_bridge.boards.definition import BoardDefinition
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.cycle import boot_once
from host_bridge.hil.virtual_dut import VirtualDut

TOPIC = "sensors/{client_id}/telemetry"
PER_MESSAGE_APP = Path(__file__).resolve().parent / "bench_apps" / "file_per_message"
ERASE_CYCLES = 100_000
SECONDS_PER_YEAR = 365 * 24 * 3600
GOAL_RATIO = 1.05
GOAL_YEARS = 10


def run_board(
    workdir: Path,
    board: str,
    broker: str,
    qos: int,
    count: int,
    payload: int,
    group: int = 0,
    window: int | str = 8,
    app: Path | None = None,
) -> tuple[dict[str, dict[str, int]], dict[str, Any]]:
    config = {
        "client_id": "cost",
        "broker": broker,
        "window": window,
        "group_commit": group,
        "publish": {"topic": TOPIC, "qos": qos, "count": count, "payload_bytes": payload},
    }
    options: dict[str, Any] = {}
    if app is not None:  # the file-per-message app reads its own two keys (the board app refuses unknown ones)
        config |= {"count": count, "size": payload}
        options["app"] = app
    dut = VirtualDut(
        "cost", BoardDefinition.load(board), flash=workdir / "f.flash", console_log=workdir / "console.log", **options
    )
    if app is not None:
        dut.summary_keys = ("total",)  # the file-per-message app's own summary line
    try:
        dut.configure(config)
        end = boot_once(dut, timeout=300)
        stats = dut.stats()
    finally:
        dut.close()
    if end.kind != "done" or end.summary is None or stats is None:
        raise SystemExit(f"board failed ({end.status}):\n{end.console}")
    return stats, end.summary


def per_message(
    tmp: Path, name: str, board: str, part: str, broker: str, qos: int, messages: int, payload: int, **kw: Any
) -> dict[str, float]:
    """The partition's counters per message: N messages less a boot that publishes none."""
    costs = {}
    for count in (0, messages):
        work = tmp / f"{name}-{qos}-{count}"
        work.mkdir()
        stats, _ = run_board(work, board, broker, qos, count, payload, **kw)
        costs[count] = stats[part]
    base, full = costs[0], costs[messages]
    return {k: (full[k] - base[k]) / messages for k in full}


def years(erased_per_message: float, partition_bytes: int) -> float | None:
    """At one message per second, until every sector of the partition has had its rated erase cycles."""
    if erased_per_message <= 0:
        return None
    messages = ERASE_CYCLES * (partition_bytes // 4096) / erased_per_message
    return messages / SECONDS_PER_YEAR


# The board application's telemetry JSON is about 85 bytes before its padding, so payloads below that are not
# exact: 100 bytes is the smallest round size every message has exactly (the floor below is then exact too).
PAYLOAD = 100
GOAL_PAYLOAD = 64  # the goal's message: its years follow from the measured erases, scaled by the record bytes


def figure(quick: bool, messages: int = 300, payload: int = PAYLOAD) -> dict[str, Any]:
    messages = 100 if quick else messages
    record = 7 + 13 + len(TOPIC.replace("{client_id}", "cost")) + payload  # PUB record
    devkit = {p.label: p.size for p in BoardDefinition.load("esp32-devkitc").partitions}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp_name, Mosquitto(Path(tmp_name) / "broker") as broker:
        tmp = Path(tmp_name)
        for name, board, part, group in (
            ("ring", "sim", "mqttlog", 0),
            ("ring, group commit 8", "sim", "mqttlog", 8),
            ("file journal (LittleFS)", "sim-nojournal", "vfs", 0),
        ):
            for qos in (1, 2):
                acks = 7 + 2 if qos == 1 else 2 * (7 + 2) + 4  # DONE (+ REL) records
                per = per_message(tmp, name, board, part, broker.address, qos, messages, payload, group=group)
                floor = record + acks
                partition = devkit["mqttlog" if part == "mqttlog" else "vfs"]
                row = {
                    "store": name,
                    "qos": qos,
                    "floor": floor,
                    **per,
                    "years": years(per["blocks_erased"], partition),
                }
                # The same store with the goal's payload: erases scale with the bytes each message writes.
                small = floor - payload + GOAL_PAYLOAD
                row["years_goal_payload"] = years(per["blocks_erased"] * small / floor, partition)
                rows.append(row)
        # The file-per-message store writes the message and deletes it: no MQTT, the same bytes per message.
        per = per_message(
            tmp, "file-per-message", "sim-nojournal", "vfs", broker.address, 1, messages, payload, app=PER_MESSAGE_APP
        )
        rows.append(
            {"store": "file per message (Paho C style)", "qos": 1, "floor": record + 9, **per,
             "years": years(per["blocks_erased"], devkit["vfs"])}
        )  # fmt: skip
    return {"messages": messages, "payload": payload, "erase_cycles": ERASE_CYCLES, "partitions": devkit, "rows": rows,
            "goal_ratio": GOAL_RATIO, "goal_years": GOAL_YEARS, "goal_payload": GOAL_PAYLOAD}  # fmt: skip


# -- the report (tools/flash_cost.md) ---------------------------------------------------------------------------


def report(fig: dict[str, Any], figures: dict[str, Any]) -> Section:
    rows = []
    goals = []
    for r in fig["rows"]:
        ratio = r["bytes_programmed"] / r["floor"]
        years = f"{r['years']:.0f}" if r["years"] is not None else "no erase"
        rows.append([r["store"], r["qos"], f"{r['bytes_programmed']:.1f}", r["floor"], f"{ratio:.2f}",
                     f"{r['blocks_erased']:.4f}", years])  # fmt: skip
        if r["store"] == "ring" and r["qos"] == 1:
            goals.append(Goal("4", "ring, QoS 1: bytes programmed / the records' bytes", f"<= {fig['goal_ratio']}",
                              f"{ratio:.2f}", ratio <= fig["goal_ratio"]))  # fmt: skip
            small = r.get("years_goal_payload")
            goals.append(Goal("4", f"ring, QoS 1, one {fig['goal_payload']}-byte message per second: years",
                              f">= {fig['goal_years']}", f"{small:.1f}" if small else "no erase",
                              small is None or small >= fig["goal_years"]))  # fmt: skip
    by_store = {(r["store"], r["qos"]): r for r in fig["rows"]}
    ring = by_store.get(("ring", 1))
    paho = by_store.get(("file per message (Paho C style)", 1))
    compare = ""
    if ring and paho and ring["blocks_erased"]:
        compare = (
            f"Per message the file-per-message store erases {paho['blocks_erased'] / ring['blocks_erased']:.2f}x "
            f"the sectors the ring does and programs {paho['bytes_programmed'] / ring['bytes_programmed']:.2f}x the "
            "bytes. Its years are longer only because the filesystem partition it wears is larger."
        )
    values = {
        "messages": str(fig["messages"]),
        "payload": str(fig["payload"]),
        "erase_cycles": f"{fig['erase_cycles']:,}",
        "mqttlog_kib": str(fig["partitions"]["mqttlog"] // 1024),
        "vfs_kib": str(fig["partitions"]["vfs"] // 1024),
        "goal_payload": str(fig["goal_payload"]),
        "table": table(
            ["store", "QoS", "bytes programmed", "records' bytes", "ratio", "sectors erased", "years"], rows
        ),
        "compare": compare,
        "goals_table": goal_table(goals),
    }
    return Section(values, goals)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--payload", type=int, default=PAYLOAD)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    result = figure(args.quick, args.messages, args.payload)
    print(f"flash cost per message ({result['messages']} messages, {result['payload']}-byte payloads)")
    print(f"{'store':<34}{'qos':>4}{'bytes programmed':>18}{'records':>9}{'ratio':>7}{'blocks erased':>15}{'years':>8}")
    for r in result["rows"]:
        years_text = f"{r['years']:.0f}" if r["years"] is not None else "-"
        print(
            f"{r['store']:<34}{r['qos']:>4}{r['bytes_programmed']:>18.1f}{r['floor']:>9}"
            f"{r['bytes_programmed'] / r['floor']:>7.2f}{r['blocks_erased']:>15.4f}{years_text:>8}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
