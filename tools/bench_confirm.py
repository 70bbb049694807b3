"""Figure 11 of BENCHMARKS.md: what end-to-end confirmation costs (docs/confirmation.md), each against the same run
without it: the broker's messages per board per second (the recorder's confirmations), the flash bytes per message
of the ring journal, and the heap the board spends on it.

    python tools/bench_confirm.py [--quick]        (part of make bench)

Boards of the board application (boards/sim, the ring journal, QoS 1, 100-byte payloads, one message every
`INTERVAL_MS`) publish to a Mosquitto on loopback while `host-bridge record` stores them; once with confirmation
off, once on (`--confirm` and `"confirm": {}`), each on fresh flash. Flash bytes come from the emulated flash's
counters over the whole run (a boot's own writes included, the same in both); the heap from the boards' summaries
(heap_min: the lowest free heap after a collection)."""

from __future__ import annotations

import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench_report import Goal, Section, goal_table, table
from figure_cli import print_figure

from host_bridge.boards.definition import BoardDefinition
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.cycle import boot_once
from host_bridge.hil.virtual_dut import VirtualDut
from host_bridge.processes import ManagedProcess
from host_bridge.recorder.record_command import command as recorder_command

BOARDS = 4
INTERVAL_MS = 50  # 20 messages a second per board: confirmations come at most once a second each
PAYLOAD = 100


def run(tmp: Path, broker: str, confirm: bool, messages: int) -> dict[str, Any]:
    """BOARDS boards at once beside a recorder; their summaries, flash counters, and the recorder's
    confirmations."""
    name = "on" if confirm else "off"
    out = tmp / f"recorded-{name}"
    args = recorder_command(broker, out, "--client-id", f"bench-recorder-{name}", "--stats-every", "1")
    args += ["--log-format", "json", *(["--confirm"] if confirm else [])]
    recorder = ManagedProcess(args, tmp / f"recorder-{name}.log")
    recorder.wait_for('"event": "connected"')
    results: dict[str, dict[str, Any]] = {}

    def board(i: int) -> None:
        dev = f"bench-confirm-{name}-{i}"
        work = tmp / dev
        work.mkdir()
        dut = VirtualDut(dev, BoardDefinition.load("sim"), flash=work / "f.flash", console_log=work / "console.log")
        config: dict[str, Any] = {
            "client_id": dev,
            "broker": broker,
            "publish": {"qos": 1, "count": messages, "interval_ms": INTERVAL_MS, "payload_bytes": PAYLOAD},
        }
        if confirm:
            config["confirm"] = {}
        try:
            dut.configure(config)
            end = boot_once(dut, timeout=300)
            results[dev] = {"summary": end.summary, "flash": (dut.stats() or {}).get("mqttlog", {})}
        finally:
            dut.close()

    start = time.monotonic()
    threads = [threading.Thread(target=board, args=(i,)) for i in range(BOARDS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.monotonic() - start
    recorder.stop()
    confirmations = 0
    for line in recorder.text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("event") == "progress":
            confirmations = int(record.get("confirmations", 0))
    if len(results) != BOARDS or any(r["summary"] is None for r in results.values()):
        raise SystemExit(f"a board did not finish; see {tmp}")
    summaries = [r["summary"] for r in results.values()]
    return {
        "seconds": round(seconds, 1),
        "confirmations": confirmations,
        "per_board_per_second": confirmations / BOARDS / seconds,
        "flash_bytes_per_message": sum(r["flash"]["bytes_programmed"] for r in results.values()) / (BOARDS * messages),
        "heap_min": min(s["heap_min"] for s in summaries),
        "unconfirmed": sum(s.get("confirm", {}).get("unconfirmed", 0) for s in summaries),
        "resent": sum(s.get("confirm", {}).get("resent", 0) for s in summaries),
    }


def figure(quick: bool) -> dict[str, Any]:
    messages = 100 if quick else 400
    with tempfile.TemporaryDirectory() as tmp_name, Mosquitto(Path(tmp_name) / "broker") as broker:
        tmp = Path(tmp_name)
        off = run(tmp, broker.address, False, messages)
        on = run(tmp, broker.address, True, messages)
    return {
        "boards": BOARDS,
        "messages": messages,
        "interval_ms": INTERVAL_MS,
        "payload": PAYLOAD,
        "off": off,
        "on": on,
        "flash_ratio": on["flash_bytes_per_message"] / off["flash_bytes_per_message"],
        "heap_spent": off["heap_min"] - on["heap_min"],
    }


# -- the report (tools/bench_confirm.md) ------------------------------------------------------------------------


def report(fig: dict[str, Any], figures: dict[str, Any]) -> Section:
    off, on = fig["off"], fig["on"]
    rows = [
        ["broker messages to each board per second (confirmations)", f"{off['per_board_per_second']:.2f}",
         f"{on['per_board_per_second']:.2f}"],
        ["flash bytes programmed per message (ring)", f"{off['flash_bytes_per_message']:.1f}",
         f"{on['flash_bytes_per_message']:.1f} ({fig['flash_ratio']:.3f}x)"],
        ["lowest free heap, deployed, 64-bit objects (KB)", f"{off['heap_min'] / 1024:.1f}",
         f"{on['heap_min'] / 1024:.1f} ({fig['heap_spent'] / 1024:.1f} KB spent)"],
        ["unconfirmed at the end / sent again", "", f"{on['unconfirmed']} / {on['resent']}"],
    ]  # fmt: skip
    goals = [
        Goal("11", "flash wear with confirmation / without", "<= 1.05", f"{fig['flash_ratio']:.3f}",
             fig["flash_ratio"] <= 1.05),
        Goal("11", "heap: the deployed ESP32 with WiFi keeps 32 KB", ">= 32.0 KB", f"{on['heap_min'] / 1024:.1f} KB",
             on["heap_min"] >= 32 * 1024),
    ]  # fmt: skip
    values = {"boards": str(fig["boards"]), "payload": str(fig["payload"]), "interval_ms": str(fig["interval_ms"]),
              "messages": str(fig["messages"]), "table": table(["", "without", "with confirmation"], rows),
              "goals_table": goal_table(goals)}  # fmt: skip
    return Section(values, goals)


def main() -> int:
    print_figure(__doc__, figure)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
