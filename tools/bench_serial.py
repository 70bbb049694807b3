"""Figure 3 of BENCHMARKS.md: the serial link end to end. A virtual board publishes over its emulated UART, paced
at the baud rate, through `host-bridge run` to Mosquitto, at QoS 0, 1 and 2, with 64- and 512-byte payloads, at
115200 and 921600 baud, on a clean line and at bit error rates 1e-5, 1e-4 and 1e-3 (each with dropped bytes at half
that rate). An observer subscribed at the broker times the arrivals.

    python tools/bench_serial.py [--quick]          (part of make bench)

Two efficiencies against the line's physical limit, baud/10 bytes per second (8N1: ten bit times per byte):
  wire     bytes the board's UART sent per second (frames, acks, everything): how busy the line is kept
  payload  application payload bytes per second that reached the broker (MQTT headers, topic, frame overhead,
           lost frames and acknowledgements all cost here)
A noisy line's payload rate is also stated against the clean line's in the same run. Retransmissions, link
timeouts and MQTT reconnects come from the board's summary line."""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench_report import Goal, Section, goal_table, table

from dboard import console_host
from host_bridge.bridge.run_command import command as bridge_command
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.subscriber import Subscriber
from host_bridge.processes import ManagedProcess
from host_bridge.vboard import LineFaults, VirtualBoard

BAUDS = (115200, 921600)
SIZES = (64, 512)
NOISE = {"clean": 0.0, "1e-5": 1e-5, "1e-4": 1e-4, "1e-3": 1e-3}
TOPIC = "sensors/{client_id}/telemetry"  # 28 bytes with a 10-character client id: a typical topic
MQTT_OVERHEAD = 40  # about what a PUBLISH adds to a payload without a topic alias (for sizing the runs)
# Runs of each cell at a bit error rate of 1e-3, the cell the median run: there one run's rate moves from run to
# run of the same cell by more than the goal's margin (as many timeouts as the host's timing lets the noise cause).
ROUNDS_AT_1E3 = 3


class WireMeter(threading.Thread):
    """Samples the bytes the board's UART has sent, so the wire rate is taken over the same interval as the
    arrivals at the broker."""

    def __init__(self, board: VirtualBoard) -> None:
        super().__init__(daemon=True)
        assert board.line is not None
        self.line = board.line
        self.samples: list[tuple[float, int]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.02):
            self.samples.append((time.time(), self.line.to_host.bytes_moved))

    def at(self, when: float) -> float:
        """Bytes sent by `when` (interpolated between samples)."""
        before = [s for s in self.samples if s[0] <= when]
        after = [s for s in self.samples if s[0] > when]
        if not before:
            return float(after[0][1]) if after else 0.0
        if not after:
            return float(before[-1][1])
        (t0, b0), (t1, b1) = before[-1], after[0]
        return b0 + (b1 - b0) * (when - t0) / (t1 - t0)


def run_one(work: Path, broker: Mosquitto, n: int, baud: int, qos: int, size: int, noise: str, count: int,
            limit_s: float) -> dict[str, Any]:  # fmt: skip
    client_id = f"bench-{n:04d}"
    folder = work / client_id
    folder.mkdir(parents=True)
    ber = NOISE[noise]
    config = {
        "client_id": client_id,
        "transport": "serial",
        "mqtt_version": "5",
        "uart": {"id": 1, "baud": baud},
        "publish": {"topic": TOPIC, "qos": qos, "count": count, "payload_bytes": size, "interval_ms": 0},
    }
    (folder / "config.json").write_text(json.dumps(config))
    observer = Subscriber(broker.address, f"observer-{client_id}", topic=TOPIC.format(client_id=client_id), clean=True)
    board = VirtualBoard(
        flash=folder / "board.flash",
        config=folder / "config.json",
        faults=LineFaults(baud=baud, bit_error_rate=ber, drop_rate=ber / 2, seed=n),
        serial_link=folder / "ttyBOARD",
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    bridge = ManagedProcess(
        bridge_command(broker.address, baud, {client_id: str(folder / "ttyBOARD")}), folder / "b.log"
    )
    meter = WireMeter(board)
    try:
        bridge.wait_for("event=start")
        meter.start()
        board.start()
        console = board.output(timeout=limit_s)
        time.sleep(0.3)  # the last arrivals
    finally:
        meter.done.set()
        board.close()
        bridge.stop()

        observer.close()
    summary = console_host.summary(console)
    first: dict[int, tuple[float, int]] = {}  # seq -> first arrival, payload bytes
    for record in observer.records:
        first.setdefault(json.loads(record.payload)["seq"], (record.arrived, len(record.payload)))
    arrivals = sorted(t for t, _ in first.values())
    # The telemetry JSON is at least ~86 bytes: "payload_bytes": 64 pads nothing. The actual length counts.
    payload_bytes = max((n for _, n in first.values()), default=size)
    row: dict[str, Any] = {"baud": baud, "qos": qos, "size": size, "payload_bytes": payload_bytes, "line": noise}
    row["count"] = count
    row["delivered"] = len(arrivals)
    row["complete"] = summary is not None and len(arrivals) == count
    if len(arrivals) >= 2:
        seconds = arrivals[-1] - arrivals[0]
        limit = baud / 10
        row["seconds"] = round(seconds, 2)
        row["payload_efficiency"] = (len(arrivals) - 1) * payload_bytes / seconds / limit
        row["wire_efficiency"] = (meter.at(arrivals[-1]) - meter.at(arrivals[0])) / seconds / limit
    if summary is not None:
        link = summary.get("link", {})
        row.update({k: link.get(k) for k in ("retransmissions", "timeouts", "probes", "crc_errors", "frames_out")})
        row["reconnects"] = summary["reconnects"]
        row["connect_failures"] = summary["connect_failures"]
    if summary is None or summary["reconnects"]:
        row["console"] = [line for line in console.splitlines() if not line.startswith(console_host.SUMMARY_START)][
            -30:
        ]
    else:
        row["console_tail"] = console[-600:]
    return row


def plan(quick: bool) -> list[tuple[int, int, int, str]]:
    if quick:
        return [(115200, q, s, noise) for noise in ("clean", "1e-4") for q in (1,) for s in SIZES]
    return [(b, q, s, noise) for b in BAUDS for noise in NOISE for q in (0, 1, 2) for s in SIZES]


def figure(quick: bool, runs: list[tuple[int, int, int, str]] | None = None) -> dict[str, Any]:
    seconds = 1.5 if quick else 4.0
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, Mosquitto(Path(tmp) / "broker") as broker:
        for n, (baud, qos, size, noise) in enumerate(runs or plan(quick), 1):
            # As many messages as a clean line carries in `seconds`; a noisy one gets the same and more time.
            count = max(20, int(seconds * baud / 10 / (max(size, 86) + MQTT_OVERHEAD)))
            limit_s = 30 + seconds * (12 if noise == "1e-3" else 4)
            rounds = ROUNDS_AT_1E3 if noise == "1e-3" and not quick else 1
            cell = []
            for i in range(rounds):
                run = run_one(Path(tmp) / f"round{i}", broker, n, baud, qos, size, noise, count, limit_s)
                cell.append(run)
                print(_line(run), flush=True)
            cell.sort(key=lambda r: r.get("payload_efficiency") or 0.0)
            row = cell[len(cell) // 2]
            if rounds > 1:
                row["round_payload_efficiencies"] = [r.get("payload_efficiency") for r in cell]
            rows.append(row)
    clean = {(r["baud"], r["qos"], r["size"]): r.get("payload_efficiency") for r in rows if r["line"] == "clean"}
    for r in rows:
        base = clean.get((r["baud"], r["qos"], r["size"]))
        r["of_clean"] = r["payload_efficiency"] / base if base and r.get("payload_efficiency") else None
    return {"seconds_per_clean_run": seconds, "topic": TOPIC, "rows": rows}


# -- the report (tools/bench_serial.md) -------------------------------------------------------------------------


def _cell(r: dict[str, Any]) -> str:
    if "payload_efficiency" not in r:
        return f"{r['delivered']}/{r['count']} delivered"
    text = f"{r['payload_efficiency']:.2f} / {r['wire_efficiency']:.2f}"
    if r["line"] != "clean" and r.get("of_clean"):
        text += f" ({r['of_clean']:.2f})"
    if r.get("retransmissions"):
        text += f", {r['retransmissions']} rtx"
    if r.get("reconnects"):
        text += f", **{r['reconnects']} reconnects**"
    if not r["complete"]:
        text += ", **incomplete**"
    return text


def report(fig: dict[str, Any], figures: dict[str, Any]) -> Section:
    rows = fig["rows"]
    lines = sorted({r["line"] for r in rows}, key=list(NOISE).index)
    table_rows = []
    for baud in sorted({r["baud"] for r in rows}):
        for qos in (0, 1, 2):
            for size in sorted({r["payload_bytes"] for r in rows}):
                found = {r["line"]: r for r in rows if (r["baud"], r["qos"], r["payload_bytes"]) == (baud, qos, size)}
                if found:
                    table_rows.append([baud, qos, size] + [_cell(found[k]) if k in found else "" for k in lines])
    goals = _goals(rows)
    values = {
        "topic": fig["topic"],
        "rounds_at_1e3": str(ROUNDS_AT_1E3),
        "table": table(["baud", "QoS", "payload B", *lines], table_rows),
        "goals_table": goal_table(goals),
    }
    stalls = _stalls_at_1e3(rows)
    if stalls:
        values["stalls"] = stalls
    return Section(values, goals)


def _goals(rows: list[dict[str, Any]]) -> list[Goal]:
    goals = []
    clean = [r for r in rows if r["line"] == "clean" and "wire_efficiency" in r]
    big = [r for r in clean if r["size"] == 512 and r["qos"] in (0, 1)]
    if big:
        worst = min(r["wire_efficiency"] for r in big)
        goals.append(Goal("3", "clean line, 512-byte QoS 0/1: wire / (baud/10)", ">= 0.95", f"{worst:.2f}",
                          worst >= 0.95))  # fmt: skip
    small = [r for r in clean if r["size"] == 64 and r["qos"] == 1]
    if small:
        worst = min(r["payload_efficiency"] for r in small)
        goals.append(Goal("3", f"clean line, smallest telemetry message ({small[0]['payload_bytes']} B) QoS 1: "
                          "payload / (baud/10)", ">= 0.75", f"{worst:.2f}", worst >= 0.75))  # fmt: skip
    if clean:
        retx = sum(r.get("retransmissions") or 0 for r in clean)
        goals.append(Goal("3", "clean line: link retransmissions, all runs", "0", str(retx), retx == 0))
    for noise, goal in (("1e-4", 0.70), ("1e-3", 0.30)):
        noisy = [r for r in rows if r["line"] == noise and r.get("of_clean")]
        if not noisy:
            continue
        worst = min(noisy, key=lambda r: r["of_clean"])
        measured = f"{worst['of_clean']:.2f}"
        label = f"bit error rate {noise}: payload rate / the clean line's (worst run)"
        if "round_payload_efficiencies" in worst:
            label = (f"bit error rate {noise}: payload rate / the clean line's (worst cell, each the median of "
                     f"{len(worst['round_payload_efficiencies'])} runs; that cell's runs in brackets)")  # fmt: skip
            base = worst["payload_efficiency"] / worst["of_clean"]
            measured += " (" + ", ".join(f"{e / base:.2f}" for e in worst["round_payload_efficiencies"]) + ")"
        goals.append(Goal("3", label, f">= {goal}", measured, worst["of_clean"] >= goal))
    noisy_runs = [r for r in rows if r["line"] != "clean"]
    if noisy_runs:
        reconnects = sum(r.get("reconnects") or 0 for r in noisy_runs)
        goals.append(Goal("3", "noisy lines: MQTT reconnects (counted in the board's summary)", "0", str(reconnects),
                          reconnects == 0))  # fmt: skip
    return goals


def _stalls_at_1e3(rows: list[dict[str, Any]]) -> str:
    """Each 1e-3 worst run's timeouts, and the least time they kept the line waiting (20 ms each)."""
    parts = []
    for baud in sorted({r["baud"] for r in rows}):
        runs = [r for r in rows if r["baud"] == baud and r["line"] == "1e-3" and r.get("timeouts") is not None]
        if not runs:
            continue
        worst = min(runs, key=lambda r: r["of_clean"])
        stalled = worst["timeouts"] * 0.020
        parts.append(
            f"at {baud} baud its worst run ({worst['of_clean']:.2f} of the clean rate) had {worst['timeouts']} "
            f"timeouts and {worst['retransmissions']} retransmissions for {worst['frames_out']} frames sent: at "
            f"least {stalled:.1f} s of its {worst['seconds']:.1f} s ({stalled / worst['seconds']:.0%}) waiting out "
            "timeouts"
        )
    return "; ".join(parts)


def _line(r: dict[str, Any]) -> str:
    if "payload_efficiency" not in r:
        return f"  {r['baud']} qos {r['qos']} {r['size']} B {r['line']}: {r['delivered']} delivered"
    return (
        f"  {r['baud']:>6} qos {r['qos']} {r['payload_bytes']:>3} B {r['line']:>5}: "
        f"payload {r['payload_efficiency']:.2f} wire {r['wire_efficiency']:.2f} of baud/10, "
        f"{r['delivered']}/{r['count']} delivered, "
        f"retransmissions {r.get('retransmissions')}, timeouts {r.get('timeouts')}, reconnects {r.get('reconnects')}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", help="baud,qos,size,line (e.g. 115200,1,64,clean): one run")
    args = parser.parse_args()
    runs = None
    if args.only:
        baud, qos, size, noise = args.only.split(",")
        runs = [(int(baud), int(qos), int(size), noise)]
    print(json.dumps(figure(args.quick, runs), indent=1))


if __name__ == "__main__":
    main()
