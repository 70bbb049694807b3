"""The board application on the virtual board publishes over TCP to a real Mosquitto; a paho-mqtt observer
checks what arrives: every QoS on every protocol version, in order, DUP 0 and RETAIN 0 on first delivery."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from host_bridge.broker import Mosquitto
from host_bridge.vboard import VirtualBoard


def test_bad_config_is_reported_without_a_crash(tmp_path: Path) -> None:
    conf = tmp_path / "config.json"
    conf.write_text(json.dumps({"client_id": "bad", "broker": "127.0.0.1:1", "publish": {"qos": 5}}))
    with VirtualBoard(flash=tmp_path / "b.flash", config=conf, stdout=subprocess.PIPE) as board:
        board.start()
        assert board.process is not None
        out, _ = board.process.communicate(timeout=30)
        assert board.wait() == 3
    text = out.decode()
    assert "config error: publish.qos must be 0, 1 or 2" in text and "Traceback" not in text


def test_foreign_journal_partition_is_reported_and_reinitialised(tmp_path: Path, mosquitto: Mosquitto) -> None:
    from host_bridge.vboard.runner import create_flash
    from tests.integration.boards import MQTTLOG

    create_flash(tmp_path / "b.flash", 2 * 1024 * 1024)
    with open(tmp_path / "b.flash", "r+b") as f:
        f.seek(MQTTLOG.offset)
        f.write(bytes(range(256)) * 64)  # 16 KiB that are not a journal
    conf = tmp_path / "config.json"
    conf.write_text(json.dumps({"client_id": "foreign", "broker": mosquitto.address, "publish": {"qos": 1, "count": 5}}))
    with VirtualBoard(flash=tmp_path / "b.flash", config=conf, stdout=subprocess.PIPE) as board:
        board.start()
        assert board.process is not None
        out, _ = board.process.communicate(timeout=60)
        assert board.wait() == 0, out.decode()
    assert "journal: 4 sector(s) without a valid header will be erased before use" in out.decode()
