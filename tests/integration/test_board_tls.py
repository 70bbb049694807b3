"""Boards on TCP speak TLS to Mosquitto's TLS listener, the broker's certificate verified (CA, host name,
validity dates), with a password file and an ACL that lets each board publish only under sensors/<client id>/,
or with client certificates as identity. Every refusal says which on the console; no credential ever does."""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from host_bridge.boards.definition import BoardDefinition
from host_bridge.broker.broker_command import ACL
from host_bridge.broker.mosquitto import Mosquitto, write_password_file
from host_bridge.broker.pki import CertificateAuthority, stamp
from host_bridge.hil.cycle import CutPlan, boot_once, run_to_completion
from host_bridge.hil.dut import BootEnd
from host_bridge.hil.subscriber import Subscriber
from host_bridge.hil.verdict import BoardRun, judge_runs
from host_bridge.hil.virtual_dut import VirtualDut

PASSWORD = "hunter2-tls-secret"
SIM = BoardDefinition.load("sim")


@dataclass
class Pki:
    ca: CertificateAuthority
    other: CertificateAuthority
    broker: tuple[Path, Path]
    expired: tuple[Path, Path]
    future: tuple[Path, Path]
    foreign: tuple[Path, Path]  # a broker certificate another CA signed
    client: tuple[Path, Path]  # for the client id "tls-cert-board"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority(root / "ca")
    other = CertificateAuthority(root / "other", "another CA")
    return Pki(
        ca,
        other,
        broker=ca.issue("broker", "localhost", dns="localhost"),
        expired=ca.issue("expired", "localhost", dns="localhost", start=stamp(-10), end=stamp(-5)),
        future=ca.issue("future", "localhost", dns="localhost", start=stamp(5), end=stamp(10)),
        foreign=other.issue("broker", "localhost", dns="localhost"),
        client=ca.issue("client", "tls-cert-board"),
    )


def secured_broker(workdir: Path, pki: Pki, cert: tuple[Path, Path], client_certs: bool = False) -> Mosquitto:
    """Mosquitto with a TLS listener on `cert`, a password file (boards and the recorder) and an ACL: each
    client may publish only under sensors/<its client id>/, the recorder reads sensors/#."""
    workdir.mkdir(parents=True, exist_ok=True)
    passwords = write_password_file(workdir / "passwords", {"tls-board": PASSWORD, "recorder": PASSWORD})
    acl = workdir / "acl"
    acl.write_text(ACL)  # the one `host-bridge broker --tls` writes
    options = [f"acl_file {acl}"]
    if client_certs:
        options += [f"cafile {pki.ca.ca}", "require_certificate true", "use_identity_as_username true"]
    else:
        options += [f"password_file {passwords}"]
    return Mosquitto(workdir, persistence=True, tls=cert, options=tuple(options), allow_anonymous=False)


def tls_config(
    client_id: str, tls_broker: Mosquitto, qos: int, count: int, version: str = "3.1.1", **tls: Any
) -> dict[str, Any]:
    return {
        "client_id": client_id,
        "broker": tls_broker.address,
        "mqtt_version": version,
        "username": "tls-board",
        "password": PASSWORD,
        "tls": {"ca": "ca.pem", "server_hostname": "localhost", **tls},
        "publish": {"topic": "sensors/{client_id}/telemetry", "qos": qos, "count": count, "payload_bytes": 120},
    }


def make_dut(workdir: Path, pki: Pki, *extra_put: tuple[Path, str]) -> VirtualDut:
    """A TLS board on the ESP32's heap, installed as docs/install-paths.md tells one to be: from ROMFS (deployed it
    is a fraction of a kilobyte short of the heap budget; tests/hil/test_heap_budget.py holds that path)."""
    return VirtualDut(
        "tls",
        SIM,
        flash=workdir / "board.flash",
        console_log=workdir / "console.log",
        put=((pki.ca.ca, "ca.pem"), *extra_put),
        install="romfs",
    )


def one_boot(
    workdir: Path, pki: Pki, config: dict[str, Any], seconds: float = 4.0, *extra_put: tuple[Path, str]
) -> BootEnd:
    dut = make_dut(workdir, pki, *extra_put)
    try:
        dut.configure(config)
        return boot_once(dut, cut_after=seconds, timeout=60)
    finally:
        dut.close()


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[Mosquitto]:
    with secured_broker(tmp_path_factory.mktemp("tls-broker"), pki, pki.broker) as b:
        yield b


def recorder_subscriber(tls_broker: Mosquitto, pki: Pki, name: str) -> Subscriber:
    return Subscriber(tls_broker.address, name, username="recorder", password=PASSWORD, tls_ca=pki.ca.ca)


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_verified_tls_delivers_every_qos_through_power_cuts(
    tmp_path: Path, pki: Pki, tls_broker: Mosquitto, qos: int
) -> None:
    subscriber = recorder_subscriber(tls_broker, pki, f"tls-observer-{qos}")
    dev = f"tls-board-q{qos}"
    dut = make_dut(tmp_path, pki)
    try:
        dut.configure(
            {**tls_config(dev, tls_broker, qos, 80, "5"), "publish": {"qos": qos, "count": 80, "interval_ms": 10}}
        )
        # Two cuts of at most 30 messages each cannot outrun 80: both land (QoS 0 has no accepted lines, so its
        # cuts go inside the flash operations of its progress marks).
        plan = CutPlan(cuts=2, inside_flash=1.0 if qos == 0 else 0.5, flash_ops=(5, 30), accepted=(5, 30))
        result = run_to_completion(dut, plan, random.Random(qos), timeout=120)
    finally:
        dut.close()
    assert result.summary is not None and result.summary["total"] == 80
    assert (result.cuts, result.boots) == (2, 3), result  # the dose given, every time
    verdict = judge_runs(dev, subscriber, [BoardRun.from_cycle(dut, result, qos)])
    subscriber.close()
    verdict.assert_kept()
    assert verdict.tallies[0].received == 80 or qos == 0
    console = (tmp_path / "console.log").read_text()
    assert "connected session_present" in console and PASSWORD not in console
    assert "WARNING" not in console  # verification on: no insecure warning


@pytest.mark.parametrize(
    ("which", "server_hostname", "says"),
    [
        ("foreign", "localhost", "is not correctly signed by the trusted CA"),
        ("broker", "tls_broker.example.net", "Common Name (CN) does not match"),
        ("expired", "localhost", "validity has expired"),
        ("future", "localhost", "validity starts in the future"),
    ],
)
def test_a_broker_certificate_that_does_not_check_out_is_refused_saying_why(
    tmp_path: Path, pki: Pki, which: str, server_hostname: str, says: str
) -> None:
    with secured_broker(tmp_path / "broker", pki, getattr(pki, which)) as tls_broker:
        end = one_boot(tmp_path, pki, tls_config("tls-board", tls_broker, 1, 3, server_hostname=server_hostname))
        log = tls_broker.log_path.read_text()
    assert end.kind == "power-cut" and f"connect failed (tls: The certificate {says}" in end.console, end.console
    assert "New client connected" not in log  # nothing reached MQTT
    assert PASSWORD not in end.console


def test_a_wrong_password_is_reported_and_retried_with_backoff_not_a_storm(
    tmp_path: Path, pki: Pki, tls_broker: Mosquitto
) -> None:
    config = tls_config("tls-board", tls_broker, 1, 3, "5")
    config["password"] = "not-the-password"
    end = one_boot(tmp_path, pki, config, seconds=6.0)
    # Mosquitto 2.0 answers a bad password with 0x87 (Not authorized) rather than 0x86.
    refused = r"connect failed \(the broker refused the connection: (bad user name or password|not authorized)"
    said = len(re.findall(refused + r" \(code 0x8[67]\)\)", end.console))
    # Backoff from half a second, doubling: 3 to 6 attempts in 6 s, of which the 1st, 2nd and 4th are said. A
    # storm (an attempt a few milliseconds apart) would say the 8th, 16th, 32nd... too.
    assert 2 <= said <= 3, end.console
    assert "not-the-password" not in end.console


def test_client_certificates_are_the_identity(tmp_path: Path, pki: Pki) -> None:
    """require_certificate with use_identity_as_username: the board's certificate (its key inline in
    secrets.json, its certificate a file) is its identity; without one the handshake is refused."""
    with secured_broker(tmp_path / "broker", pki, pki.broker, client_certs=True) as tls_broker:
        subscriber = Subscriber(
            tls_broker.address, "cert-observer", tls_ca=pki.ca.ca, tls_cert=pki.ca.issue("recorder", "recorder")
        )
        config = {
            k: v
            for k, v in tls_config("tls-cert-board", tls_broker, 2, 20).items()
            if k not in ("username", "password")
        }
        config["tls"]["cert"] = "client.pem"
        secrets = tmp_path / "secrets.json"
        secrets.write_text(json.dumps({"tls": {"key": pki.client[1].read_text()}}))
        end = one_boot(tmp_path / "good", pki, config, 8.0, (pki.client[0], "client.pem"), (secrets, "secrets.json"))
        assert "connected session_present" in end.console, end.console
        verdict = judge_runs("cert", subscriber, [BoardRun("tls-cert-board", 2, 20)])
        subscriber.close()
        verdict.assert_kept()
        key_body = pki.client[1].read_text().splitlines()[1]
        assert key_body not in end.console
        config["tls"].pop("cert")
        bare = one_boot(tmp_path / "bare", pki, config, 3.0)
    assert "connect failed (tls:" in bare.console and "connected session_present" not in bare.console, bare.console


@pytest.mark.parametrize("version", ["5", "3.1.1"])
def test_publishing_outside_its_acl(tmp_path: Path, pki: Pki, tls_broker: Mosquitto, version: str) -> None:
    """What Mosquitto 2.0 does, measured here: on 5.0 it answers PUBACK 0x87 (Not authorized) and then closes
    the connection; on 3.1.1 (no reason codes) it acknowledges, discards and closes. The board ends each 5.0
    flow as refused and counts it; it reconnects once per refused message, never in a loop, and completes its
    run. On 3.1.1 it cannot tell a discarded message from a delivered one: the subscriber and the audit show
    the loss."""
    subscriber = recorder_subscriber(tls_broker, pki, f"acl-observer-{version}")
    config = tls_config("tls-board", tls_broker, 1, 5, version)
    config["publish"]["topic"] = "sensors/someone-else/telemetry"
    dut = make_dut(tmp_path, pki)
    try:
        dut.configure(config)
        end = boot_once(dut, timeout=60)
    finally:
        dut.close()
    assert end.kind == "done" and end.summary is not None, end.console
    summary = end.summary
    assert summary["total"] == 5 and summary["reconnects"] + summary["connect_failures"] <= 30, summary
    if version == "5":
        assert summary["refused"] == 5 and end.console.count("reason 0x87") == 5, end.console
    else:
        assert summary["refused"] == 0
    # A message the board's own identity may publish, sent after the run: once it has arrived, so would have
    # anything the broker let through before it (one broker, one subscription: in order).
    marker_arrived(tls_broker, pki, subscriber)
    assert subscriber.distinct("tls-board") == set()  # the broker delivered none of them, in either version
    subscriber.close()


def marker_arrived(tls_broker: Mosquitto, pki: Pki, subscriber: Subscriber, timeout: float = 10) -> None:
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="tls-board", clean_session=True)
    client.username_pw_set("tls-board", PASSWORD)
    client.tls_set(ca_certs=str(pki.ca.ca))
    host, port = tls_broker.address.rsplit(":", 1)
    client.connect(host, int(port))
    client.loop_start()
    try:
        client.publish("sensors/tls-board/marker", b"after the run", qos=1).wait_for_publish(timeout)
        deadline = time.monotonic() + timeout
        with subscriber.arrived:
            while not any(r.topic == "sensors/tls-board/marker" for r in subscriber.records):
                left = deadline - time.monotonic()
                assert left > 0, "the marker never arrived"
                subscriber.arrived.wait(left)
    finally:
        client.loop_stop()
        client.disconnect()


def test_a_message_larger_than_the_read_buffer_arrives_whole_over_tls(
    tmp_path: Path, pki: Pki, tls_broker: Mosquitto
) -> None:
    """A 900-byte command comes in one TLS record, larger than the client's 512-byte read buffer: the rest of
    the record waits inside mbedTLS, where polling the TCP socket cannot see it; the transport reads on."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    config = tls_config("tls-big", tls_broker, 1, 40, "5")
    config["publish"]["interval_ms"] = 100
    config["subscribe"] = [{"topic": "cmd/{client_id}", "qos": 1}]
    dut = make_dut(tmp_path, pki)
    sender = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="tls-commander")
    sender.username_pw_set("recorder", PASSWORD)
    sender.tls_set(ca_certs=str(pki.ca.ca))
    host, port = tls_broker.address.rsplit(":", 1)
    try:
        dut.configure(config)
        dut.start()
        dut.expect("connected session_present", timeout=30)
        time.sleep(0.5)
        sender.connect(host, int(port))
        sender.loop_start()
        sender.publish("cmd/tls-big", b"C" * 900, qos=1).wait_for_publish(10)
        found = dut.expect(r"message cmd/tls-big 1 b'(C+)'", timeout=20)
        assert len(found.group(1)) == 900
        assert dut.wait_boot(60).kind == "done"
    finally:
        sender.loop_stop()
        sender.disconnect()
        dut.close()
