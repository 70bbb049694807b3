"""Taking a recorder out of service: `host-bridge record --retire` ends its persistent session at the broker, so
that nothing queues for it for ever. A recorder stopped while boards publish leaves their messages queued in its
session; --retire (3.1.1 and 5.0) has the broker drop the session and its queue, keeps every row the store holds,
and a client connecting with the same id afterwards finds no session. A running recorder's folder is refused."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

from dmqtt_telemetry.format import payload
from host_bridge.broker.mosquitto import Mosquitto
from tests.conftest import REPO
from tests.integration.recorder_proc import RecorderProcess, read_rows


def retire(out: Path, broker: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "host_bridge", "record", "--broker", broker, "--out", str(out), "--retire", *extra],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip


def session_present(broker: str, client_id: str, v5: bool) -> bool:
    """Whether the broker still holds a session for `client_id` (a connection that asks to keep it)."""
    host, port = broker.rsplit(":", 1)
    version = MQTTProtocolVersion.MQTTv5 if v5 else MQTTProtocolVersion.MQTTv311
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=version,
                         clean_session=None if v5 else False)  # fmt: skip
    answered = threading.Event()
    flags: dict[str, bool] = {}

    def on_connect(_c: mqtt.Client, _u: object, connect_flags: mqtt.ConnectFlags, *_: object) -> None:
        flags["present"] = connect_flags.session_present
        answered.set()

    client.on_connect = on_connect
    if v5:
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = 0  # (this check itself leaves nothing behind)
        client.connect(host, int(port), clean_start=False, properties=props)
    else:
        client.connect(host, int(port))
    client.loop_start()
    try:
        assert answered.wait(10), "no CONNACK"
    finally:
        client.loop_stop()
        client.disconnect()
    return flags["present"]


@pytest.mark.parametrize("version", ["3.1.1", "5"])
def test_retire_ends_the_session_and_keeps_the_store(tmp_path: Path, version: str) -> None:
    with Mosquitto(tmp_path / "broker", persistence=True) as broker:
        out = tmp_path / "store"
        recorder = RecorderProcess(out, broker.address, "--mqtt-version", version)
        host, port = broker.address.rsplit(":", 1)
        board = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="retire-b1")
        board.connect(host, int(port))
        board.loop_start()
        try:
            recorder.wait_connected()
            for seq in range(5):
                board.publish("sensors/retire-b1/telemetry", payload("retire-b1", 1, seq, seq, 1.0), qos=1)
            recorder.wait_rows(5)
            # A running recorder's folder is refused: its lock is held.
            running = retire(out, broker.address, "--mqtt-version", version)
            assert running.returncode == 2 and "another recorder is writing" in running.stderr, running.stderr
            recorder.stop()
            for seq in range(5, 10):  # queued in the stopped recorder's session
                board.publish("sensors/retire-b1/telemetry", payload("retire-b1", 1, seq, seq, 1.0),
                              qos=1).wait_for_publish(10)  # fmt: skip
        finally:
            board.loop_stop()
            board.disconnect()
        client_id = (out / "_recorder" / "client_id").read_text().strip()
        done = retire(out, broker.address, "--mqtt-version", version)
        assert done.returncode == 0, done.stderr
        assert f"session {client_id} ended at {broker.address}" in done.stdout
        assert not session_present(broker.address, client_id, v5=version == "5")
        assert [r["seq"] for r in read_rows(out)] == list(range(5))  # the store keeps what it had
        assert not (out / "_recorder" / "subscriptions").exists()
