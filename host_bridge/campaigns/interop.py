"""The interop matrix (docs/brokers.md): the board's client, on a virtual board, against each broker this machine
can install (host_bridge/broker/peers.py), at QoS 0, 1 and 2, over MQTT 3.1.1 and 5.0, with a persistent session
and a power cut in the middle of the flow (the session kept across the reconnect). Each cell is judged by a
subscriber on that broker, as the bench judges: nothing lost at QoS 1 and 2, QoS 2 once. Where the broker breaks a
rule, the cell says what the client said (its `broker fault:` line); where it refuses the version, what it answered.

`python tools/broker_matrix.py` runs it and writes bench/brokers.json, from which docs/brokers.md's table is
rendered (render_table); `make soak` runs every broker, `make test` one fast peer beside Mosquitto."""

from __future__ import annotations

import json
import random
import re
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from host_bridge.boards.definition import BoardDefinition
from host_bridge.broker.peers import PEERS, Peer
from host_bridge.errors import BrokerError
from host_bridge.hil.cycle import CutPlan, run_to_completion
from host_bridge.hil.dut import DutError
from host_bridge.hil.scenario import app_config
from host_bridge.hil.subscriber import Subscriber
from host_bridge.hil.verdict import BoardRun, judge_runs
from host_bridge.hil.virtual_dut import VirtualDut

VERSIONS = ("3.1.1", "5")
QOS = (0, 1, 2)
# What ends a cell before its run completes: a connection lost for the same reason twice (a rule the broker broke
# comes back at every connection: the client's words for it), or a connection that never comes (said at the 1st,
# 2nd, 4th, 8th... attempt).
_LOST = re.compile(r"^connection lost \((.*)\)$", re.M)
_CONNECT_FAILED = re.compile(r"connect failed \((.*)\); retrying")
_GIVE_UP_ATTEMPTS = 2  # connect failed lines: the 1st and 2nd attempts (the 4th would come after 4 more delays)

Say = Callable[[str], None]


@dataclass(frozen=True)
class Cell:
    """One broker, version and QoS: `outcome` is "kept" (every promise kept through the power cut), "lost" or
    "duplicated" (counts in `detail`), "fault" (the client's words for the rule the broker broke), "refused" (the
    connection never came: what was said) or "no run"."""

    broker: str
    broker_version: str
    mqtt: str
    qos: int
    outcome: str
    detail: str
    sent: int
    received: int


def run_cell(peer: Peer, mqtt: str, qos: int, workdir: Path, count: int, seed: int, timeout: float) -> Cell:
    """The client's run of `count` messages at `qos` over `mqtt` against the running `peer`, with one power cut
    after a message is accepted (its flows in flight), judged by a subscriber on the same broker."""
    name = f"interop-{peer.name}-{mqtt.replace('.', '')}-q{qos}"
    user, password = peer.credentials or (None, None)
    try:
        observer = Subscriber(peer.address, f"{name}-observer", topic=f"sensors/{name}/#", username=user,
                              password=password)  # fmt: skip
    except (OSError, TimeoutError) as exc:
        return Cell(peer.name, peer.version(), mqtt, qos, "no run", f"the observer: {exc}", 0, 0)
    dut = VirtualDut(name, BoardDefinition.load("sim"), flash=workdir / name / "board.flash",
                     console_log=workdir / f"{name}.console.log")  # fmt: skip
    stop = threading.Event()
    ended: list[str] = []

    def watch() -> None:
        """Ends the run where it cannot complete: a broker's fault, or no connection at all."""
        while not stop.is_set():
            text = dut.console.all() if dut.console is not None else ""
            lost = _LOST.findall(text)
            fault = next((reason for reason in lost if lost.count(reason) > 1), None)
            failures = _CONNECT_FAILED.findall(text)
            if fault or (len(failures) >= _GIVE_UP_ATTEMPTS and "connected session_present" not in text):
                ended.append(f"fault: {fault}" if fault else f"refused: {failures[-1]}")
                stop.set()
                dut.power_cut()
                return
            stop.wait(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    try:
        config = app_config(dut, name, peer.address, qos, count, mqtt, publish={"interval_ms": 20})
        if peer.credentials is not None:
            config["username"], config["password"] = peer.credentials
        dut.configure(config)
        watcher.start()
        plan = CutPlan(cuts=1, inside_flash=0.0, accepted=(2, max(3, count // 2)))
        try:
            result = run_to_completion(dut, plan, random.Random(seed), timeout=timeout, stop=stop)
        except DutError as exc:
            result = None
            if not ended:
                ended.append(f"no run: {str(exc).splitlines()[0][:160]}")
        if ended or result is None or result.summary is None:
            kind, _, detail = (ended[0] if ended else "no run: the run did not complete").partition(": ")
            return Cell(peer.name, peer.version(), mqtt, qos, "fault" if kind == "fault" else kind, detail, 0,
                        len(observer.deliveries()))  # fmt: skip
        run = BoardRun.from_cycle(dut, result, qos)
        verdict = judge_runs(name, observer, [run], settle=10)
        tally = verdict.tallies[0]
        if tally.lost and qos:
            outcome, detail = "lost", f"{tally.lost} of {tally.sent} lost"
        elif tally.duplicated and qos == 2:
            outcome, detail = "duplicated", f"{tally.duplicated} of {tally.sent} twice"
        else:
            outcome = "kept"
            detail = f"{tally.received} of {tally.sent}" + (f", {tally.lost} QoS 0 lost" if tally.lost else "")
        return Cell(peer.name, peer.version(), mqtt, qos, outcome, detail, tally.sent, tally.received)
    finally:
        stop.set()
        if watcher.is_alive():
            watcher.join(5)
        dut.close()
        observer.close()


def run_matrix(
    names: list[str], workdir: Path, count: int = 12, timeout: float = 120, say: Say = print, every: bool = True
) -> list[Cell]:
    """Every cell of the brokers `names` (PEERS' keys), each broker started and stopped around its cells. With
    `every` False, a version the broker does not speak gets one cell (QoS 1): its answer is the same at every QoS."""
    cells: list[Cell] = []
    for name in names:
        peer = PEERS[name](workdir / name)
        say(f"{name}: starting")
        try:
            peer.start()
        except BrokerError as exc:
            say(f"{name}: {exc}")
            cells += [
                Cell(name, peer.version(), mqtt, qos, "no run", str(exc), 0, 0) for mqtt in VERSIONS for qos in QOS
            ]
            continue
        try:
            for mqtt in VERSIONS:
                for qos in QOS if every or mqtt in peer.versions else (1,):
                    if peer.process is not None and peer.process.poll() is not None:
                        say(f"{name}: the broker exited (its log: {peer.log_path}); starting it again")
                        peer.start()
                    cell = run_cell(peer, mqtt, qos, workdir / name, count, seed=len(cells), timeout=timeout)
                    say(f"{name} MQTT {mqtt} QoS {qos}: {cell.outcome} ({cell.detail})")
                    cells.append(cell)
        finally:
            peer.stop()
    return cells


def save(cells: list[Cell], path: Path, count: int) -> None:
    path.write_text(json.dumps({"messages_per_cell": count, "cells": [asdict(c) for c in cells]}, indent=1) + "\n")


def load(path: Path) -> list[Cell]:
    return [Cell(**c) for c in json.loads(path.read_text())["cells"]]


_MARK = {"kept": "kept", "lost": "LOST", "duplicated": "TWICE", "fault": "broker fault", "refused": "refused"}


def render_table(cells: list[Cell]) -> str:
    """docs/brokers.md's table: a row per broker and version, a column per QoS, each cell's outcome in short and
    the words behind it below the table."""
    lines = ["| broker | MQTT | QoS 0 | QoS 1 | QoS 2 |", "|---|---|---|---|---|"]
    notes: list[str] = []
    rows: dict[tuple[str, str, str], dict[int, Cell]] = {}
    for cell in cells:
        rows.setdefault((cell.broker, cell.broker_version, cell.mqtt), {})[cell.qos] = cell
    for (broker, version, mqtt), by_qos in rows.items():
        shown = []
        for qos in QOS:
            found = by_qos.get(qos)
            if found is None:
                shown.append("-")
                continue
            text = _MARK.get(found.outcome, found.outcome)
            if found.outcome in ("fault", "refused", "no run", "lost", "duplicated"):
                if found.detail not in notes:
                    notes.append(found.detail)
                text += f" [{notes.index(found.detail) + 1}]"
            shown.append(text)
        lines.append(f"| {broker} {version} | {mqtt} | " + " | ".join(shown) + " |")
    lines.append("")
    lines += [f"- [{i + 1}] {note}" for i, note in enumerate(notes)]
    return "\n".join(lines) + "\n"
