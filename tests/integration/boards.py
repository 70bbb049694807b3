"""Helpers to run the board application on virtual boards in tests."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dboard import console, console_host
from host_bridge.hil.subscriber import Subscriber
from host_bridge.hil.verdict import BoardRun, judge_runs
from host_bridge.vboard import BoardDefinition, VirtualBoard

# What a wake prints when its hint does not match the journal (firmware/dmqtt/wake.py), opening the whole journal.
NOT_WHERE_LEFT = "dmqtt.wake: the journal is not where the last wake left it: opening it whole"

SIM = BoardDefinition.load("sim")
MQTTLOG = next(p for p in SIM.partitions if p.label == "mqttlog")


def board_config(
    client_id: str, broker: str, qos: int, count: int, version: str = "3.1.1", **extra: Any
) -> dict[str, Any]:
    publish = {"topic": "sensors/{client_id}/telemetry", "qos": qos, "count": count, "payload_bytes": 120}
    publish.update(extra.pop("publish", {}))
    return {"client_id": client_id, "broker": broker, "mqtt_version": version, "publish": publish, **extra}


def start_board(workdir: Path, config: dict[str, Any], **kwargs: Any) -> VirtualBoard:
    """Start the board application on the flash file in workdir (created on first use)."""
    conf = workdir / "config.json"
    conf.write_text(json.dumps(config))
    board = VirtualBoard(
        flash=workdir / "board.flash", config=conf, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kwargs
    )
    board.start()
    return board


def read_until(board: VirtualBoard, done: Callable[[str], bool], timeout: float = 30) -> str:
    """Read the board's piped console until done(what was read) (or `timeout`): a wait on what the board says,
    not on the clock. finish() returns the rest; give it what this read (`before=`)."""
    assert board.process is not None and board.process.stdout is not None
    out = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(board.process.stdout, selectors.EVENT_READ)
        while not done(out.decode(errors="replace")):
            left = deadline - time.monotonic()
            assert left > 0, f"the board never said what the test waits for; it said:\n{out.decode()[-2000:]}"
            if sel.select(left):
                chunk = os.read(board.process.stdout.fileno(), 4096)
                assert chunk, f"the board ended first:\n{out.decode()[-2000:]}"
                out += chunk
    return out.decode(errors="replace")


def finish(board: VirtualBoard, timeout: float = 60, before: str = "") -> tuple[int, str]:
    assert board.process is not None
    out, _ = board.process.communicate(timeout=timeout)
    code = board.wait()
    board.close()
    return code, before + out.decode(errors="replace")


def summary(out: str, keys: tuple[str, ...] = console.SUMMARY_KEYS) -> dict[str, Any]:
    """The run's summary line, read as the host reads any board's (dboard.console_host); `keys`: what it must
    hold (a test app's own summary has other keys)."""
    result = console_host.summary(out, keys)
    assert result is not None, f"no summary line in:\n{out}"
    return result


def check_promises(subscriber: Subscriber, dev: str, qos: int, count: int) -> None:
    """`dev` accepted `count` messages at `qos`: judged with the promises the bench and the audit use, and
    every accepted message arrived (QoS 0 included: these runs are on clean loopback)."""
    verdict = judge_runs(dev, subscriber, [BoardRun(dev, qos, count)])
    verdict.assert_kept()
    assert verdict.tallies[0].received == count, verdict.table()
