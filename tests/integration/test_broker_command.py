"""`host-bridge broker`, as a newcomer starts it: Mosquitto on loopback that takes a publish and a subscription,
stopped with its whole folder kept; with --tls, a verified TLS listener whose passwords and per-board ACL are
enforced. Every process it started ends with it."""

from __future__ import annotations

import signal
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from host_bridge.broker.mosquitto import free_port
from tests.conftest import REPO


@contextmanager
def broker_command(tmp_path: Path, *args: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "host_bridge", "broker", "--port", str(port), "--dir", str(tmp_path / "b"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith(f"broker: listening on 127.0.0.1:{port}"), first + process.stdout.read()
        yield process, port
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0


def client(port: int, client_id: str, tls: Path | None, password: str | None) -> mqtt.Client:
    c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id)
    if password is not None:
        c.username_pw_set(client_id, password)
    if tls is not None:
        c.tls_set(ca_certs=str(tls), cert_reqs=ssl.CERT_REQUIRED)  # the broker's certificate verified
    c.connect("localhost" if tls else "127.0.0.1", port)
    c.loop_start()
    return c


def delivered(
    port: int, publisher: str, topic: str, tls: Path | None = None, passwords: dict[str, str] | None = None
) -> bytes:
    """`publisher` publishes to `topic` at QoS 1; what a subscriber (the recorder, with --tls) got (b"": nothing)."""
    passwords = passwords or {}
    got: list[bytes] = []
    arrived = threading.Event()
    subscribed = threading.Event()
    reader = client(port, "recorder", tls, passwords.get("recorder"))
    reader.on_subscribe = lambda *a: subscribed.set()
    reader.on_message = lambda c, u, m: (got.append(m.payload), arrived.set())
    reader.subscribe("sensors/#", qos=1)
    writer = client(port, publisher, tls, passwords.get(publisher))
    try:
        assert subscribed.wait(10), "no SUBACK"
        writer.publish(topic, b"hello", qos=1).wait_for_publish(10)
        arrived.wait(3)
    finally:
        for c in (writer, reader):
            c.loop_stop()
            c.disconnect()
    return got[0] if got else b""


def test_the_broker_command_serves_a_first_publish(tmp_path: Path) -> None:
    with broker_command(tmp_path) as (process, port):
        assert delivered(port, "first", "sensors/first/t") == b"hello"
    config = (tmp_path / "b" / "mosquitto.conf").read_text()
    assert "set_tcp_nodelay true" in config and "persistence true" in config


def test_the_broker_command_with_tls_enforces_passwords_and_the_acl(tmp_path: Path) -> None:
    users = {"board-1": "s3cret", "recorder": "r3corder"}
    args = [arg for name, word in users.items() for arg in ("--user", f"{name}:{word}")]
    with broker_command(tmp_path, "--tls", *args) as (process, port):
        ca = tmp_path / "b" / "tls" / "ca.pem"
        assert delivered(port, "board-1", "sensors/board-1/t", ca, users) == b"hello"
        # Under its own name only: a publish as another board is not delivered.
        assert delivered(port, "board-1", "sensors/board-2/t", ca, users) == b""
        # A wrong password is no way in: CONNACK refuses it.
        refused = threading.Event()
        intruder = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="board-1")
        intruder.username_pw_set("board-1", "wrong")
        intruder.tls_set(ca_certs=str(ca), cert_reqs=ssl.CERT_REQUIRED)
        intruder.on_connect = lambda c, u, f, rc, p: rc.is_failure and refused.set()
        intruder.connect("localhost", port)
        intruder.loop_start()
        try:
            assert refused.wait(10), "a wrong password was let in"
        finally:
            intruder.loop_stop()
            intruder.disconnect()


def test_users_without_tls_are_refused_with_what_to_do(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "host_bridge", "broker", "--user", "a:b", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert run.returncode == 2 and "--user goes with --tls" in run.stderr and "Traceback" not in run.stderr
