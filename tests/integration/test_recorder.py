"""`host-bridge record` on the wire (a scripted broker checks each packet and when it comes) and against a real
Mosquitto while the recorder is SIGKILLed again and again: nothing lost, its own duplicates marked."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from pyspark.sql import SparkSession

from dmqtt import codec_host as codec
from dmqtt_pipeline.audit import audit
from dmqtt_pipeline.spark import read_telemetry
from dmqtt_telemetry import format as telemetry_format
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.campaigns import chaos
from tests.conftest import REPO
from tests.integration.certificates import make_certificates
from tests.integration.recorder_proc import RecorderProcess, read_rows
from tests.integration.scripted_broker import Connection, ScriptedBroker

KILLS = int(os.environ.get("RECORDER_KILLS", "6"))
MESSAGES = int(os.environ.get("RECORDER_MESSAGES", "1500"))  # per QoS


def telemetry(seq: int, dev: str = "w") -> bytes:
    return telemetry_format.payload(dev, 1, seq, seq, 0.5)


def connected_publisher(address: str, client_id: str) -> mqtt.Client:
    """A connected paho publisher with its network loop running."""
    host, port = address.rsplit(":", 1)
    pub = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id)
    pub.max_inflight_messages_set(20)  # Mosquitto disconnects a client that exceeds its receive maximum (20)
    pub.connect(host, int(port))
    pub.loop_start()
    return pub


def logged_pids(out: Path) -> set[int]:
    lines = (out / "_recorder" / "wal.log").read_bytes().splitlines()[1:]
    return {json.loads(x)["m"]["packet_id"] for x in lines if x.startswith(b'{"m"')}


@pytest.mark.parametrize("version", ["3.1.1", "5"])
def test_acknowledges_only_what_is_on_disk_and_resumes_its_session(tmp_path: Path, version: str) -> None:
    broker = ScriptedBroker()
    out = tmp_path / "rec"
    recorder = RecorderProcess(out, broker.address, "--mqtt-version", version, "--flush-seconds", "60")
    try:
        conn = broker.accept()
        connect = conn.expect_connect()
        assert not connect.clean  # a persistent session [MQTT-3.1.2-4]
        if version == "5":
            assert connect.props[codec.SESSION_EXPIRY_INTERVAL] == 0xFFFFFFFF
        conn.connack(False)
        _, sub = conn.recv_type(codec.SUBSCRIBE)
        assert [(t, o & 3) for t, o in sub.topics] == [("sensors/#", 2)]
        conn.send(codec.encode_suback(sub.pid, [2], conn.version))
        conn.send(codec.encode_publish("sensors/w/telemetry", telemetry(0), qos=1, pid=5, version=conn.version))
        conn.send(codec.encode_publish("sensors/w/telemetry", telemetry(1), qos=2, pid=6, version=conn.version))
        _, puback = conn.recv_type(codec.PUBACK)
        _, pubrec = conn.recv_type(codec.PUBREC)
        assert (puback.pid, pubrec.pid) == (5, 6)
        # Acknowledged, so already in the fsynced log, though no Parquet commit is due for a minute.
        assert logged_pids(out) == {5, 6} and not list(out.glob("date=*/*.parquet"))
        recorder.kill()  # SIGKILL between PUBREC and PUBREL
        conn.close()

        recorder = RecorderProcess(out, broker.address, "--mqtt-version", version, "--flush-seconds", "60")
        conn = broker.accept()
        conn.expect_connect()
        conn.connack(True)  # the session survived: no new SUBSCRIBE is due
        conn.ack(codec.PUBREL, 6)
        _, pubcomp = conn.recv_type(codec.PUBCOMP)
        assert (pubcomp.pid, pubcomp.reason) == (6, 0)
        # The PUBACK for id 5 "got lost": the broker redelivers it with DUP set [MQTT-3.3.1.-1].
        conn.send(
            codec.encode_publish("sensors/w/telemetry", telemetry(0), qos=1, pid=5, dup=True, version=conn.version)
        )
        assert conn.recv_type(codec.PUBACK)[1].pid == 5
        conn.ack(codec.PUBREL, 77)  # an id the recorder never held
        _, unknown = conn.recv_type(codec.PUBCOMP)
        assert unknown.reason == (0x92 if version == "5" else 0)  # MQTT 5.0: Packet Identifier not found
        assert recorder.stop() == 0
        raw, _ = conn.recv_type(codec.DISCONNECT)  # a clean stop says goodbye
        assert raw[0] == 0xE0
    finally:
        recorder.stop()
        broker.close()
    rows = read_rows(out)
    assert [(r["seq"], r["qos"], r["packet_id"], r["dup"], r["recorder_dup"]) for r in rows] == [
        (0, 1, 5, False, False),
        (1, 2, 6, False, False),
        (0, 1, 5, True, True),  # stored twice by the recorder's doing: marked, not hidden
    ]
    assert "event=recovered rows=2" in recorder.text()


def test_unparsable_payloads_are_kept_with_the_reason(tmp_path: Path, mosquitto: Mosquitto) -> None:
    out = tmp_path / "rec"
    recorder = RecorderProcess(out, mosquitto.address, "--topic", "odd/#")
    recorder.wait_connected()
    pub = connected_publisher(mosquitto.address, "odd-publisher")
    for payload in (b"\xff\x01binary", b'{"dev": "x"}', telemetry(0, "ok")):
        pub.publish("odd/t", payload, qos=1).wait_for_publish()
    pub.loop_stop()
    pub.disconnect()
    recorder.wait_rows(3)
    assert recorder.stop() == 0
    rows = read_rows(out)
    assert [r["payload"] for r in rows] == [b"\xff\x01binary", b'{"dev": "x"}', telemetry(0, "ok")]
    assert [r["parse_error"] for r in rows] == ["payload is not UTF-8", "no boot; no seq; no t; no reading", None]


def test_the_recorder_compacts_closed_days_and_drops_days_past_its_retention(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """A store with three files on each of two past days (as months of a running recorder leave it): at its first
    commit the recorder drops the day past --retain-days and compacts the other into one file, rows unchanged."""
    from datetime import UTC, datetime

    from dmqtt_telemetry import format as telemetry_format
    from host_bridge.recorder.store import TelemetryStore
    from tests.unit.telemetry.test_store_maintenance import fill

    out = tmp_path / "rec"
    store = TelemetryStore(out)
    seq = fill(store, 0, 3, 4, 0)  # the partition date=2026-11-20
    fill(store, 1, 3, 4, seq)  # date=2026-11-21
    store.close()
    kept = read_rows(out)[12:]
    days = (datetime.now(UTC).date() - datetime(2026, 11, 21).date()).days  # so that 11-21 is kept, 11-20 not
    recorder = RecorderProcess(out, mosquitto.address, "--topic", "odd/#", "--retain-days", str(days))
    recorder.wait_connected()
    pub = connected_publisher(mosquitto.address, "maint-publisher")
    pub.publish("odd/t", telemetry(0, "today"), qos=1).wait_for_publish()
    pub.loop_stop()
    pub.disconnect()
    recorder.wait_for("event=maintained")
    assert recorder.stop() == 0
    assert "compacted_files=3 dropped_days=1" in recorder.text(), recorder.text()[-2000:]
    assert not telemetry_format.partition_dir(out, "2026-11-20").exists()
    assert len(list(telemetry_format.partition_dir(out, "2026-11-21").glob("*.parquet"))) == 1
    rows = read_rows(out)
    assert rows[:12] == kept and rows[12]["payload"] == telemetry(0, "today")


def test_killed_again_and_again_it_loses_nothing(tmp_path: Path, mosquitto: Mosquitto) -> None:
    """A publisher sends MESSAGES QoS 1 and MESSAGES QoS 2 messages while the recorder is SIGKILLed KILLS times at
    random moments and started again (`make soak` kills it 60 times over more messages). Every message is
    recorded; every QoS 2 message exactly once apart from the rows marked recorder_dup."""
    out = tmp_path / "rec"
    rng = random.Random(5)
    recorder = RecorderProcess(out, mosquitto.address, "--client-id", "kill-test-recorder")
    recorder.wait_connected()
    done = threading.Event()

    def publish() -> None:
        pub = connected_publisher(mosquitto.address, "kill-test-publisher")
        infos = []
        for seq in range(MESSAGES):
            for qos in (1, 2):
                infos.append(pub.publish(f"sensors/k{qos}/telemetry", telemetry(seq, f"k{qos}"), qos=qos))
            time.sleep(0.002)
        for info in infos:
            info.wait_for_publish(30)
        pub.loop_stop()
        pub.disconnect()
        done.set()

    publisher = threading.Thread(target=publish)
    publisher.start()
    kills = 0
    while publisher.is_alive() or kills < KILLS:  # (a publisher that failed ends too)
        time.sleep(rng.uniform(0.2, 1.0))
        if kills < KILLS:
            recorder.kill()
            kills += 1
            recorder = RecorderProcess(out, mosquitto.address)
            recorder.wait_connected()
    publisher.join()
    assert done.is_set(), "the publisher failed (pytest's thread-exception warning shows how)"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len({(r["dev"], r["seq"]) for r in read_rows(out)}) < 2 * MESSAGES:
        time.sleep(0.5)
    assert recorder.stop() == 0
    rows = read_rows(out)
    for dev in ("k1", "k2"):
        seqs = [r["seq"] for r in rows if r["dev"] == dev and not r["recorder_dup"]]
        assert set(seqs) == set(range(MESSAGES)), f"{dev}: lost {sorted(set(range(MESSAGES)) - set(seqs))[:10]}"
        if dev == "k2":
            assert len(seqs) == MESSAGES, "a QoS 2 message recorded twice without the recorder_dup mark"
    assert [r["arrival"] for r in rows] == list(range(len(rows)))  # one arrival counter across all lives
    print(f"recorder re-stores: {sum(r['recorder_dup'] for r in rows)} of {len(rows)} rows")


def test_credentials_are_sent_and_a_refusal_is_explained(tmp_path: Path) -> None:
    broker = ScriptedBroker()
    (tmp_path / "pw").write_text("s3cret\n")
    recorder = RecorderProcess(
        tmp_path / "rec", broker.address, "--username", "bench", "--password-file", str(tmp_path / "pw")
    )
    try:
        conn = broker.accept()
        connect = conn.expect_connect()
        assert (connect.username, connect.password) == ("bench", b"s3cret")
        conn.connack(False, 5)  # 3.1.1: not authorized
        assert recorder.process.wait(15) == 2
    finally:
        recorder.stop()
        broker.close()
    text = recorder.text()
    assert "the broker refused the connection (code 0x05); check the credentials" in text
    assert "s3cret" not in text


def test_what_the_broker_cannot_do_for_the_recorder_is_refused_at_start(tmp_path: Path) -> None:
    """docs/brokers.md: a shared subscription where the broker's 5.0 CONNACK says it has none, and --confirm where
    it grants less than QoS 2 (RabbitMQ's MQTT plugin), end the recorder at once with what to do (exit 2), rather
    than record nothing, or less than the promise it is asked to judge."""
    broker = ScriptedBroker()
    try:
        shared = RecorderProcess(
            tmp_path / "a", broker.address, "--mqtt-version", "5", "--topic", "$share/rec/sensors/#"
        )
        conn = broker.accept()
        conn.version = codec.V5
        conn.expect_connect()
        conn.connack(False, props={0x2A: 0})  # Shared Subscription Available: 0
        assert shared.process.wait(15) == 2
        confirming = RecorderProcess(tmp_path / "b", broker.address, "--confirm")
        conn = broker.accept()
        conn.expect_connect()
        conn.connack(False)
        _, sub = conn.recv_type(codec.SUBSCRIBE)
        conn.send(codec.encode_suback(sub.pid, [1 for _ in sub.topics], conn.version))  # QoS 1 at most
        assert confirming.process.wait(15) == 2
    finally:
        shared.stop()
        confirming.stop()
        broker.close()
    assert "$share/rec/sensors/# would record nothing; subscribe a plain topic filter" in shared.text(), shared.text()
    assert "--confirm: the broker granted QoS 1 for sensors/#, below the QoS 2" in confirming.text(), confirming.text()


def test_tls_to_the_broker_with_a_verified_certificate(tmp_path: Path) -> None:
    ca, cert, key = make_certificates(tmp_path)
    (tmp_path / "other").mkdir()
    other_ca, _, _ = make_certificates(tmp_path / "other")
    with Mosquitto(tmp_path / "tls-broker", tls=(cert, key)) as broker:
        good = RecorderProcess(tmp_path / "rec", broker.address, "--tls", "--cafile", str(ca))
        good.wait_connected()
        host, port = broker.address.rsplit(":", 1)
        pub = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="tls-publisher")
        pub.tls_set(ca_certs=str(ca))
        pub.connect(host, int(port))
        pub.loop_start()
        for seq in range(3):
            pub.publish("sensors/tls/telemetry", telemetry(seq, "tls"), qos=2).wait_for_publish(10)
        pub.loop_stop()
        pub.disconnect()
        good.wait_rows(3)
        assert good.stop() == 0
        assert [r["seq"] for r in read_rows(tmp_path / "rec")] == [0, 1, 2]
        bad = RecorderProcess(tmp_path / "rec2", broker.address, "--tls", "--cafile", str(other_ca))
        bad.wait_for("CERTIFICATE_VERIFY_FAILED")
        assert bad.stop() == 0
    assert "CERTIFICATE_VERIFY_FAILED" in bad.text() and "event=connected" not in bad.text()


def test_subscribes_only_when_the_session_or_the_topics_are_new(tmp_path: Path) -> None:
    broker = ScriptedBroker()
    out = tmp_path / "rec"

    def session(present: bool, *topics: str) -> tuple[RecorderProcess, Connection]:
        recorder = RecorderProcess(out, broker.address, *[a for t in topics for a in ("--topic", t)])
        conn = broker.accept()
        conn.expect_connect()
        conn.connack(present)
        return recorder, conn

    try:
        recorder, conn = session(False)
        _, sub = conn.recv_type(codec.SUBSCRIBE)
        conn.send(codec.encode_suback(sub.pid, [2], conn.version))
        recorder.wait_connected()
        assert recorder.stop() == 0
        # Same session, other topics: the old filter is dropped, the new one subscribed.
        recorder, conn = session(True, "lab/#")
        _, unsub = conn.recv_type(codec.UNSUBSCRIBE)
        assert unsub.filters == ["sensors/#"]
        conn.send(codec.encode_unsuback(unsub.pid, version=conn.version))
        _, sub = conn.recv_type(codec.SUBSCRIBE)
        assert [t for t, _ in sub.topics] == ["lab/#"]
        conn.send(codec.encode_suback(sub.pid, [2], conn.version))
        recorder.wait_connected()
        assert recorder.stop() == 0
        # Same session, other topics again, and a queued message right behind the CONNACK: it waits while the
        # recorder changes its subscriptions, then is stored.
        recorder = RecorderProcess(out, broker.address, "--topic", "lab/#", "--topic", "hall/#")
        conn = broker.accept()
        conn.expect_connect()
        conn.send(
            codec.encode_connack(True, 0, conn.version) + codec.encode_publish("lab/t", telemetry(7), qos=1, pid=3)
        )
        _, sub = conn.recv_type(codec.SUBSCRIBE)
        conn.send(codec.encode_suback(sub.pid, [2, 2], conn.version))
        assert conn.recv_type(codec.PUBACK)[1].pid == 3
        assert recorder.stop() == 0
        assert [r["seq"] for r in read_rows(out)] == [7]
        # Same session, same topics: nothing to subscribe (the broker would resend retained messages).
        recorder, conn = session(True, "lab/#", "hall/#")
        recorder.wait_connected()
        assert conn.nothing_for(0.5)
    finally:
        recorder.stop()
        broker.close()


def test_an_unreachable_broker_is_said_once_then_retried_quietly_until_it_comes(tmp_path: Path) -> None:
    from host_bridge.broker.mosquitto import free_port

    port = free_port()
    recorder = RecorderProcess(tmp_path / "rec", f"127.0.0.1:{port}")
    try:
        recorder.wait_for("event=broker_unreachable")
        # Retried with backoff from a quarter of a second: several attempts within three seconds, no new line.
        time.sleep(3)
        assert recorder.running
        assert recorder.text().count("broker_unreachable") == 1, recorder.text()
        assert "connect_failed" not in recorder.text(), recorder.text()
        assert "is it running (host-bridge broker starts one), and is --broker right?" in recorder.text()
        with Mosquitto(tmp_path / "broker", port=port) as broker:
            recorder.wait_connected()
            assert broker.address.endswith(f":{port}")
            assert recorder.stop() == 0
    finally:
        recorder.stop()


@pytest.mark.parametrize("wait", ["0", "1.5"])
def test_wait_gives_up_on_an_unreachable_broker_with_exit_2_before_creating_anything(tmp_path: Path, wait: str) -> None:
    from host_bridge.broker.mosquitto import free_port

    out = tmp_path / "rec"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "host_bridge", "record", "--broker", f"127.0.0.1:{free_port()}", "--out", str(out),
         "--wait", wait],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 2, done
    assert "unreachable (Connection refused): is it running" in done.stderr and f"--wait {wait}" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert time.monotonic() - started >= float(wait) and not out.exists()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 24 MiB tmpfs of the test's own: a filesystem that really fills (needs root, as CI runs)."""
    mount = chaos.small_disk(tmp_path / "disk", "24m")
    if mount is None:
        pytest.skip("mounting a small tmpfs needs root (CI runs as root)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Take every free byte of `disk` with one file (ENOSPC, or it raises); returns it (delete it to give the
    space back)."""
    filler = chaos.DiskFiller(disk)
    assert filler.fill() and filler.ballast is not None
    return filler.ballast


def test_a_full_disk_acknowledges_nothing_unstored_and_resumes_losing_nothing(
    tmp_path: Path, small_disk: Path, mosquitto: Mosquitto
) -> None:
    """The recorder's disk fills while QoS 1 and QoS 2 messages arrive: it stops acknowledging (the broker's
    session keeps them), says so once with what to do, and when space returns it records every message, each
    QoS 2 message once apart from rows marked recorder_dup."""
    out = small_disk / "rec"
    recorder = RecorderProcess(out, mosquitto.address, "--client-id", "full-disk-recorder", log_dir=tmp_path)
    recorder.wait_connected()
    pub = connected_publisher(mosquitto.address, "full-disk-publisher")
    count = 600
    try:
        for seq in range(count // 3):
            for qos in (1, 2):
                pub.publish(f"sensors/f{qos}/telemetry", telemetry(seq, f"f{qos}"), qos=qos)
            time.sleep(0.002)
        ballast = fill(small_disk)
        for seq in range(count // 3, count):
            for qos in (1, 2):
                pub.publish(f"sensors/f{qos}/telemetry", telemetry(seq, f"f{qos}"), qos=qos)
            time.sleep(0.002)
        recorder.wait_for("event=store_failed", timeout=30)
        time.sleep(3)  # a few retries while the disk stays full
        ballast.unlink()
        recorder.wait_for("event=store_recovered", timeout=30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len({(r["dev"], r["seq"]) for r in read_rows(out)}) < 2 * count:
            time.sleep(0.5)
    finally:
        pub.loop_stop()
        pub.disconnect()
        code = recorder.stop()
    assert code == 0
    log = recorder.text()
    assert log.count("event=store_failed") == 1, log  # once per condition, not once per retry
    assert "No space left on device" in log and "free space in" in log
    rows = read_rows(out)
    for dev in ("f1", "f2"):
        seqs = [r["seq"] for r in rows if r["dev"] == dev and not r["recorder_dup"]]
        assert set(seqs) == set(range(count)), f"{dev}: lost {sorted(set(range(count)) - set(seqs))[:10]}"
        if dev == "f2":
            assert len(seqs) == count, "a QoS 2 message recorded twice without the recorder_dup mark"


def test_a_recorder_started_on_a_full_disk_waits_for_space_instead_of_crashing(
    tmp_path: Path, small_disk: Path, mosquitto: Mosquitto
) -> None:
    """Its last run logged deliveries that are not yet in Parquet, and the disk is full: the recovery cannot
    write them. The recorder says so, does not connect (it could acknowledge nothing), and finishes the
    recovery when space returns."""
    from host_bridge.recorder.store import TelemetryStore

    out = small_disk / "rec"
    store = TelemetryStore(out)
    (store.state / "client_id").write_text("full-start-recorder")  # as the previous run kept it
    for seq in range(5):
        store.add(1_790_000_000_000_000 + seq, "sensors/w/telemetry", 1, False, False, seq + 1, telemetry(seq, "w"))
    store.sync()
    store.close()  # as a crash leaves it: logged, not committed
    ballast = fill(small_disk)
    recorder = RecorderProcess(out, mosquitto.address, log_dir=tmp_path)
    try:
        recorder.wait_for("event=store_failed", timeout=30)
        time.sleep(2.5)
        assert recorder.running and "event=connected" not in recorder.text()
        ballast.unlink()
        recorder.wait_for("event=store_recovered", timeout=30)
        recorder.wait_for("event=connected", timeout=30)
    finally:
        assert recorder.stop() == 0
    assert sorted(r["seq"] for r in read_rows(out)) == list(range(5))


def test_recorders_sharing_a_subscription_lose_nothing_when_one_is_killed(
    tmp_path: Path, mosquitto: Mosquitto, spark: SparkSession
) -> None:
    """Three recorders share `$share/recorders/sensors/#` (MQTT 5), each with its own persistent session and
    folder. One is SIGKILLed a third of the way through and started again half way: Mosquitto keeps handing it its
    share while it is away (queued in its session) and delivers them when it is back, so across the three folders
    every QoS 1 and QoS 2 message is there and no QoS 2 message twice; the audit reads the folders as one dataset."""
    group = ("--mqtt-version", "5", "--topic", "$share/recorders/sensors/#")
    outs = [tmp_path / f"rec-{i}" for i in range(3)]
    recorders = [RecorderProcess(out, mosquitto.address, "--client-id", out.name, *group) for out in outs]
    for recorder in recorders:
        recorder.wait_connected()
    pub = connected_publisher(mosquitto.address, "share-publisher")
    messages = 900
    infos = []
    for seq in range(messages):
        for qos in (1, 2):
            infos.append(pub.publish(f"sensors/s{qos}/telemetry", telemetry(seq, f"s{qos}"), qos=qos))
        if seq == messages // 3:
            for info in infos:
                info.wait_for_publish(30)
            recorders[1].kill()
        if seq == messages // 2:
            recorders[1] = RecorderProcess(outs[1], mosquitto.address, "--client-id", outs[1].name, *group)
            recorders[1].wait_connected()
        time.sleep(0.001)
    for info in infos:
        info.wait_for_publish(30)
    pub.loop_stop()
    pub.disconnect()

    def recorded() -> list[dict[str, object]]:
        return [r for out in outs for r in read_rows(out) if not r["recorder_dup"]]

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len({(r["dev"], r["seq"]) for r in recorded()}) < 2 * messages:
        time.sleep(0.5)
    for recorder in recorders:
        assert recorder.stop() == 0
    rows = recorded()
    shares = [len(read_rows(out)) for out in outs]
    assert all(share > messages // 3 for share in shares), shares  # each member took a share, the killed one too
    for dev in ("s1", "s2"):
        seqs = [r["seq"] for r in rows if r["dev"] == dev]
        assert set(seqs) == set(range(messages)), f"{dev}: lost {sorted(set(range(messages)) - set(seqs))[:10]}"
        if dev == "s2":
            assert len(seqs) == messages, "a QoS 2 message recorded twice across the recorders"
    result, _ = audit(read_telemetry(spark, ",".join(str(out) for out in outs)))
    assert result.ok and result.rows == sum(shares), result.summary("")
