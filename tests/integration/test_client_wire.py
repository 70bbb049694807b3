"""The firmware client on a virtual board against a scripted broker that checks the wire byte by byte."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from dboard import console_host
from dmqtt import codec_host as codec
from dmqtt import journal_ring
from dmqtt.session import Session
from tests.integration.boards import MQTTLOG, board_config, finish, read_until, start_board, summary
from tests.integration.scripted_broker import Connection, ScriptedBroker


@pytest.fixture
def scripted() -> ScriptedBroker:
    b = ScriptedBroker()
    yield b  # type: ignore[misc]
    b.close()


def test_resend_after_reconnect_has_dup_and_the_same_ids(tmp_path: Path, scripted: ScriptedBroker) -> None:
    board = start_board(tmp_path, board_config("wire-dup", scripted.address, 1, 3))
    conn = scripted.accept()
    connect = conn.expect_connect()
    assert connect.clean is False  # persistent session
    conn.connack(session_present=False)
    first = [conn.recv_type(codec.PUBLISH) for _ in range(3)]
    assert all(not p.dup and p.qos == 1 for _, p in first)  # DUP 0 on a first send [MQTT-3.3.1-2]
    assert len({p.pid for _, p in first}) == 3 and all(p.pid for _, p in first)
    assert conn.nothing_for(1.0)  # no resend on a live connection [MQTT-4.4.0-1]
    conn.close()  # the connection drops with all three unacknowledged

    conn = scripted.accept()
    conn.expect_connect()
    conn.connack(session_present=True)
    again = [conn.recv_type(codec.PUBLISH) for _ in range(3)]
    for (raw1, _p1), (raw2, p2) in zip(first, again, strict=False):
        # Same packet, same id, DUP set [MQTT-3.3.1-1]: only bit 3 of the first byte differs.
        assert raw2[0] == raw1[0] | 0x08 and raw2[1:] == raw1[1:]
        conn.ack(codec.PUBACK, p2.pid)
    conn.recv_type(codec.DISCONNECT)
    code, out = finish(board)
    assert code == 0, out
    # The dropped connection was re-made once: every reconnect is counted, whatever ended the connection.
    assert (summary(out)["total"], summary(out)["reconnects"]) == (3, 1), out


def test_pubrel_is_resent_after_a_drop_that_follows_pubrec(tmp_path: Path, scripted: ScriptedBroker) -> None:
    board = start_board(tmp_path, board_config("wire-rel", scripted.address, 2, 1, "5"))
    conn = scripted.accept()
    conn.expect_connect()
    conn.connack(False)
    _, pub = conn.recv_type(codec.PUBLISH)
    conn.ack(codec.PUBREC, pub.pid)
    raw, rel = conn.recv_type(codec.PUBREL)
    assert raw == bytes([0x62, 0x02, pub.pid >> 8, pub.pid & 0xFF])  # flags 0010 [MQTT-3.6.1-1], short form
    conn.close()

    conn = scripted.accept()
    conn.expect_connect()
    conn.connack(True)
    raw, packet = conn.recv()
    assert raw == bytes([0x62, 0x02, pub.pid >> 8, pub.pid & 0xFF]), f"expected PUBREL again, got {packet!r}"
    conn.ack(codec.PUBCOMP, pub.pid)
    conn.recv_type(codec.DISCONNECT)
    code, out = finish(board)
    assert code == 0 and summary(out)["refused"] == 0, out


# A broker that acknowledges against the rules [MQTT-3.3.4-1]: (the QoS published, what the broker answers it with,
# whether it answers the PUBLISH's own packet id, what the board says).
BROKEN_ACKS = {
    "puback-for-qos2": (2, codec.PUBACK, True, "answered a QoS 2 PUBLISH (packet id {pid}) with PUBACK, which MQTT "
                        "forbids: it does not support QoS 2 (RabbitMQ's MQTT plugin downgrades it); publish at QoS 1"),
    "pubrec-for-qos1": (1, codec.PUBREC, True, "answered a QoS 1 PUBLISH (packet id {pid}) with PUBREC, which MQTT "
                        "forbids"),
    "pubcomp-before-pubrec": (2, codec.PUBCOMP, True, "answered a QoS 2 PUBLISH (packet id {pid}) with PUBCOMP"),
    "ack-for-no-flow": (1, codec.PUBACK, False, "sent PUBACK for packet id {pid}, which is in no flow of ours"),
}  # fmt: skip


@pytest.mark.parametrize("case", BROKEN_ACKS)
def test_a_broker_that_acknowledges_against_the_rules_is_named_not_waited_on(
    tmp_path: Path, scripted: ScriptedBroker, case: str
) -> None:
    """The client ends the connection (5.0: DISCONNECT, Protocol Error) and says what the broker did; the message
    stays journaled and goes again, unacknowledged until then, on the next connection (where this broker answers
    it as it should). Before, the client ignored the acknowledgement and waited for ever, its window full."""
    qos, answer, own_pid, said = BROKEN_ACKS[case]
    board = start_board(tmp_path, board_config(f"wire-{case}", scripted.address, qos, 1, "5"))
    conn = scripted.accept()
    conn.expect_connect()
    conn.connack(False)
    _, pub = conn.recv_type(codec.PUBLISH)
    pid = pub.pid if own_pid else pub.pid + 100
    conn.ack(answer, pid)
    raw, _ = conn.recv_type(codec.DISCONNECT)
    assert raw == bytes([0xE0, 0x01, 0x82]), raw  # 5.0: Protocol Error
    conn.close()
    conn = scripted.accept()
    conn.expect_connect()
    conn.connack(True)
    _, again = conn.recv_type(codec.PUBLISH)
    assert again.payload == pub.payload and again.dup, again  # the journaled message, sent again
    if qos == 1:
        conn.ack(codec.PUBACK, again.pid)
    else:
        conn.ack(codec.PUBREC, again.pid)
        conn.recv_type(codec.PUBREL)
        conn.ack(codec.PUBCOMP, again.pid)
    conn.recv_type(codec.DISCONNECT)
    code, out = finish(board)
    assert code == 0, out
    assert "the broker " + said.format(pid=pid) in out, out
    assert summary(out)["sent"] == 1, out


def test_a_pubrec_of_no_flow_is_answered_with_pubrel_and_the_connection_stays(
    tmp_path: Path, scripted: ScriptedBroker
) -> None:
    """A PUBREC for a packet id in no flow of ours: MQTT 5.0 calls it "not an error during recovery" (4.3.3), and
    a broker may send one again after a reconnect (amqtt does). The client answers PUBREL with 0x92 Packet
    Identifier not found and goes on; before, it ended the connection as for a broken rule."""
    board = start_board(tmp_path, board_config("wire-stale-pubrec", scripted.address, 2, 1, "5"))
    conn = scripted.accept()
    conn.expect_connect()
    conn.connack(False)
    _, pub = conn.recv_type(codec.PUBLISH)
    stale = pub.pid + 100
    conn.ack(codec.PUBREC, stale)
    raw, _ = conn.recv_type(codec.PUBREL)
    assert raw == bytes([0x62, 0x03, stale >> 8, stale & 0xFF, 0x92]), raw
    conn.ack(codec.PUBREC, pub.pid)
    conn.recv_type(codec.PUBREL)
    conn.ack(codec.PUBCOMP, pub.pid)
    conn.recv_type(codec.DISCONNECT)
    code, out = finish(board)
    assert code == 0 and "broker fault" not in out, out
    assert summary(out)["reconnects"] == 0, out


def test_a_maximum_qos_below_the_boards_ends_each_connection_and_nothing_goes_until_a_broker_takes_it(
    tmp_path: Path, scripted: ScriptedBroker
) -> None:
    """A 5.0 broker whose CONNACK says Maximum QoS 1, to a board publishing at QoS 2: the first reading is
    accepted (journaled) and never sent lower [MQTT-3.2.2-11]; the connection ends (DISCONNECT, Implementation
    specific error), and so does each next one before anything is sent, saying why. A broker that takes QoS 2
    then gets every reading, at QoS 2. Before, the client sent them at QoS 1."""
    board = start_board(tmp_path, board_config("wire-maxqos", scripted.address, 2, 2, "5"))
    for _ in range(3):
        conn = scripted.accept()
        conn.expect_connect()
        conn.connack(False, props={codec.MAXIMUM_QOS: 1})
        raw, _ = conn.recv_type(codec.DISCONNECT)
        assert raw == bytes([0xE0, 0x01, 0x83]), raw  # nothing before it: no PUBLISH at any QoS
        conn.close()
    conn = scripted.accept()
    conn.expect_connect()
    conn.connack(True)
    got = []
    while True:  # (the two PUBLISHes, and the PUBRELs, as the window lets them come)
        _, packet = conn.recv()
        if packet.type == codec.DISCONNECT:
            break
        if packet.type == codec.PUBLISH:
            assert packet.qos == 2, packet
            got.append(packet.payload)
            conn.ack(codec.PUBREC, packet.pid)
        else:
            assert packet.type == codec.PUBREL, packet
            conn.ack(codec.PUBCOMP, packet.pid)
    code, out = finish(board)
    assert code == 0, out
    said = "connection lost (the broker's Maximum QoS is 1 and journaled messages ask QoS 2"
    assert out.count(said) == 3, out
    assert summary(out)["total"] == 2 and len(set(got)) == 2, out


def test_pubrec_error_gets_no_pubrel(tmp_path: Path, scripted: ScriptedBroker) -> None:
    board = start_board(tmp_path, board_config("wire-refused", scripted.address, 2, 2, "5"))
    conn = scripted.accept()
    conn.expect_connect()
    conn.connack(False)
    _, p1 = conn.recv_type(codec.PUBLISH)
    _, p2 = conn.recv_type(codec.PUBLISH)
    conn.ack(codec.PUBREC, p1.pid, 0x87)  # Not authorized: the flow ends, no PUBREL
    conn.ack(codec.PUBREC, p2.pid, 0x10)  # No matching subscribers: success
    _, rel = conn.recv_type(codec.PUBREL)
    assert rel.pid == p2.pid
    conn.ack(codec.PUBCOMP, p2.pid)
    conn.recv_type(codec.DISCONNECT)
    code, out = finish(board)
    assert code == 0, out
    assert f"publish refused: packet id {p1.pid} reason 0x87" in out
    assert summary(out)["refused"] == 1


@pytest.mark.parametrize("receive_max", [1, 2, 3])
def test_receive_maximum_is_honoured(tmp_path: Path, scripted: ScriptedBroker, receive_max: int) -> None:
    count = 7
    board = start_board(tmp_path, board_config("wire-rm", scripted.address, 1, count, "5"))
    conn = scripted.accept()
    conn.expect_connect()
    conn.connack(False, props={codec.RECEIVE_MAXIMUM: receive_max})
    acked = 0
    outstanding: list[int] = []
    while acked < count:
        while len(outstanding) < min(receive_max, count - acked):
            outstanding.append(conn.recv_type(codec.PUBLISH)[1].pid)
        assert conn.nothing_for(0.3), f"more than Receive Maximum {receive_max} in flight"
        conn.ack(codec.PUBACK, outstanding.pop(0))
        acked += 1
    conn.recv_type(codec.DISCONNECT)
    code, out = finish(board)
    assert code == 0, out


def test_unexpected_pubrel_is_answered_and_the_connection_stays(tmp_path: Path, scripted: ScriptedBroker) -> None:
    board = start_board(tmp_path, board_config("wire-unexp", scripted.address, 1, 2, "5", publish={"interval_ms": 300}))
    conn = scripted.accept()
    conn.expect_connect()
    conn.connack(False)
    conn.ack(codec.PUBREL, 999)
    raw, packet = conn.recv()
    while packet.type == codec.PUBLISH:  # the board may publish first
        conn.ack(codec.PUBACK, packet.pid)
        raw, packet = conn.recv()
    assert raw == bytes([0x70, 0x03, 0x03, 0xE7, 0x92])  # PUBCOMP, Packet Identifier not found
    while True:
        raw, packet = conn.recv()
        if packet.type == codec.DISCONNECT:
            break
        conn.ack(codec.PUBACK, packet.pid)
    code, out = finish(board)
    assert code == 0 and summary(out)["reconnects"] == 0, out


def test_short_and_long_v5_acks_are_accepted(tmp_path: Path, scripted: ScriptedBroker) -> None:
    board = start_board(tmp_path, board_config("wire-forms", scripted.address, 2, 3, "5"))
    conn = scripted.accept()
    conn.expect_connect()
    conn.connack(False)
    pubs = [conn.recv_type(codec.PUBLISH)[1] for _ in range(3)]
    conn.send(bytes([0x50, 0x02, pubs[0].pid >> 8, pubs[0].pid & 0xFF]))  # length 2
    conn.send(bytes([0x50, 0x03, pubs[1].pid >> 8, pubs[1].pid & 0xFF, 0x00]))  # length 3
    conn.ack(codec.PUBREC, pubs[2].pid, 0x10, {codec.REASON_STRING: "nobody listens"})  # with properties
    for _ in range(3):
        _, rel = conn.recv_type(codec.PUBREL)
        conn.send(bytes([0x70, 0x04, rel.pid >> 8, rel.pid & 0xFF, 0x00, 0x00]))  # length 4, empty properties
    conn.recv_type(codec.DISCONNECT)
    code, out = finish(board)
    assert code == 0 and summary(out)["refused"] == 0, out


def test_malformed_packet_from_the_broker_closes_with_0x81(tmp_path: Path, scripted: ScriptedBroker) -> None:
    board = start_board(tmp_path, board_config("wire-bad", scripted.address, 1, 1, "5", publish={"interval_ms": 200}))
    conn = scripted.accept()
    conn.expect_connect()
    conn.connack(False)
    conn.send(bytes([0x36, 0x03, 0x00, 0x01, 0x74]))  # PUBLISH with QoS bits 11 [MQTT-3.3.1-4]
    raw, packet = conn.recv()
    while packet.type == codec.PUBLISH:
        raw, packet = conn.recv()
    assert packet.type == codec.DISCONNECT and packet.reason == codec.MALFORMED_PACKET
    conn.close()
    conn = scripted.accept()  # the outer layer reconnects
    conn.expect_connect()
    conn.connack(True)
    _, pub = conn.recv_type(codec.PUBLISH)
    conn.ack(codec.PUBACK, pub.pid)
    conn.recv_type(codec.DISCONNECT)
    code, out = finish(board)
    assert code == 0, out


class FilePartition:
    """The mqttlog partition of a virtual board's flash file, from the host: NOR semantics kept."""

    def __init__(self, flash: Path) -> None:
        self.path = flash

    def readblocks(self, block: int, buf: memoryview | bytearray, offset: int = 0) -> None:
        with open(self.path, "rb") as f:
            f.seek(MQTTLOG.offset + block * 4096 + offset)
            buf[:] = f.read(len(buf))

    def writeblocks(self, block: int, buf: memoryview | bytes, offset: int = 0) -> None:
        addr = MQTTLOG.offset + block * 4096 + offset
        with open(self.path, "r+b") as f:
            f.seek(addr)
            old = f.read(len(buf))
            f.seek(addr)
            f.write(bytes(a & b for a, b in zip(old, bytes(buf), strict=False)))

    def ioctl(self, op: int, arg: int) -> int:
        if op == 4:
            return MQTTLOG.size // 4096
        if op == 5:
            return 4096
        if op == 6:
            with open(self.path, "r+b") as f:
                f.seek(MQTTLOG.offset + arg * 4096)
                f.write(b"\xff" * 4096)
        return 0


def test_packet_ids_wrap_past_65535_on_the_wire(tmp_path: Path, scripted: ScriptedBroker) -> None:
    # A board whose journal says the last packet id was 65533 (as after a long life), written by the host
    # with the very same journal code.
    from host_bridge.vboard.flash_image import create_flash

    create_flash(tmp_path / "board.flash", 2 * 1024 * 1024)
    seeded = Session(journal_ring.RingJournal(FilePartition(tmp_path / "board.flash")))
    seeded.open()
    seeded.next_pid = 65533
    seeded.note_mark(0)
    board = start_board(tmp_path, board_config("wire-wrap", scripted.address, 1, 4))
    conn = scripted.accept()
    conn.expect_connect()
    conn.connack(False)
    pids = []
    for _ in range(4):
        _, pub = conn.recv_type(codec.PUBLISH)
        pids.append(pub.pid)
        conn.ack(codec.PUBACK, pub.pid)
    assert pids == [65534, 65535, 1, 2]  # wraps 65535 -> 1, never 0 [MQTT-2.3.1-1]
    conn.recv_type(codec.DISCONNECT)
    code, out = finish(board)
    assert code == 0, out


def test_connect_carries_credentials_will_and_keep_alive(tmp_path: Path, scripted: ScriptedBroker) -> None:
    config = board_config(
        "wire-ka",
        scripted.address,
        1,
        1,
        "5",
        keepalive_s=1,
        session_expiry_s=600,
        username="sensor",
        password="s3cret",
        will={"topic": "status/{client_id}", "payload": "offline", "qos": 1, "retain": True},
        publish={"interval_ms": 4000},
    )
    board = start_board(tmp_path, config)
    conn = scripted.accept()
    connect = conn.expect_connect()
    assert (connect.username, connect.password, connect.keepalive, connect.clean) == ("sensor", b"s3cret", 1, False)
    assert (connect.will_topic, connect.will_payload, connect.will_qos, connect.will_retain) == (
        "status/wire-ka",
        b"offline",
        1,
        True,
    )
    assert connect.props[codec.SESSION_EXPIRY_INTERVAL] == 600
    conn.connack(False)
    _, pub = conn.recv_type(codec.PUBLISH)
    conn.ack(codec.PUBACK, pub.pid)
    start = time.monotonic()
    conn.recv_type(codec.PINGREQ, timeout=3)  # idle: a PINGREQ within the keep-alive period
    # Before the broker would give up on it: 1.5 times the keep-alive [MQTT-3.1.2-24] (the board aims at one).
    assert time.monotonic() - start < 1.5
    conn.send(codec.encode_empty(codec.PINGRESP))
    conn.recv_type(codec.PINGREQ, timeout=3)
    # No PINGRESP this time: the board gives the connection up, telling why (Keep Alive timeout); its run is
    # complete, so it does not come back.
    _, bye = conn.recv_type(codec.DISCONNECT, timeout=5)
    assert bye.reason == 0x8D
    with pytest.raises(ConnectionError):
        conn.recv(timeout=8)
    code, out = finish(board)
    assert code == 0 and "no PINGRESP within the keep-alive period" in out, out


def test_offline_queue_is_sent_when_the_broker_appears(tmp_path: Path) -> None:
    from host_bridge.broker.mosquitto import free_port

    port = free_port()
    board = start_board(tmp_path, board_config("wire-offline", f"127.0.0.1:{port}", 2, 5, publish={"interval_ms": 100}))
    # No broker yet: connection refused, the five messages go into the journal (the board says it accepted them).
    before = read_until(board, lambda out: len(console_host.lines(out, "accepted")) == 5)
    scripted = ScriptedBroker(port)
    try:
        conn = scripted.accept(timeout=40)
        conn.expect_connect()
        conn.connack(False)
        pubs = [conn.recv_type(codec.PUBLISH)[1] for _ in range(5)]
        assert [json.loads(p.payload)["seq"] for p in pubs] == [0, 1, 2, 3, 4]
        assert not any(p.dup for p in pubs)  # never sent before: new flows
        for p in pubs:
            conn.ack(codec.PUBREC, p.pid)
            conn.recv_type(codec.PUBREL)
            conn.ack(codec.PUBCOMP, p.pid)
        conn.recv_type(codec.DISCONNECT)
    finally:
        scripted.close()
    code, out = finish(board, before=before)
    assert code == 0, out
    assert out.count("connect failed") >= 1 and summary(out)["total"] == 5


HOOKS_APP = """
import json
from dmqtt.client import CONNECTED, DISCONNECTED, MQTTClient
from dmqtt.errors import DmqttError, MQTTError, PublishRefused
from dmqtt.journal import open_journal
from dmqtt.transport import TCPTransport

events = []
c = MQTTClient("hooks", open_journal(), version=5)
c.on_connect = lambda present: events.append(["connect", present])
c.on_disconnect = lambda code, reason: events.append(["disconnect", code])
c.on_message = lambda topic, payload, qos, retain, dup: events.append(["message", topic, payload.decode(), qos])
c.on_published = lambda pid, code: events.append(["published", pid, code])
c.open()
states = [c.state]
c.connect(TCPTransport(HOST, PORT))
states.append(c.state)
pid = c.publish(b"t/a", b"x", qos=1)
try:
    c.publish(b"t/+", b"x", qos=1)
except PublishRefused as exc:
    events.append(["refused", exc.code, isinstance(exc, DmqttError)])
c.wait_idle(10000)
try:
    while True:
        c.poll(100)
except MQTTError as exc:
    events.append(["lost", isinstance(exc, DmqttError)])
states.append(c.state)
print(json.dumps({"pid": pid, "events": events, "states": states, "expected": [DISCONNECTED, CONNECTED],
                  "counters": [c.connects, c.disconnects, c.received, c.published, c.refused, c.outstanding()]}))
"""


def test_the_client_reports_through_its_hooks_state_and_counters(tmp_path: Path, scripted: ScriptedBroker) -> None:
    """The application's whole view: hooks called at the moments the wire shows, the connection state, the
    counters, and errors under DmqttError (a bad topic is refused before anything is journaled or sent)."""
    app = tmp_path / "app"
    app.mkdir()
    host, port = scripted.address.rsplit(":", 1)
    (app / "main.py").write_text(f"HOST, PORT = {host!r}, {port}\n" + HOOKS_APP)
    board = start_board(tmp_path, {}, app=app, library=True)
    conn = scripted.accept()
    conn.expect_connect()
    conn.connack(session_present=False)
    _, pub = conn.recv_type(codec.PUBLISH)
    assert pub.topic == "t/a"  # the refused t/+ never reaches the wire
    conn.send(codec.encode_publish("cmd/x", b"hi", 1, 7, version=codec.V5))
    conn.ack(codec.PUBACK, pub.pid)
    _, ack = conn.recv_type(codec.PUBACK)
    assert ack.pid == 7
    conn.close()
    code, out = finish(board)
    assert code == 0, out
    report = summary(out, keys=("states", "events", "counters"))  # the test app's own report
    assert report["states"] == [*report["expected"], report["expected"][0]], report
    assert report["events"] == [
        ["connect", False],
        ["refused", codec.TOPIC_NAME_INVALID, True],
        ["message", "cmd/x", "hi", 1],
        ["published", report["pid"], 0],
        ["disconnect", None],
        ["lost", True],
    ], report
    assert report["counters"] == [1, 1, 1, 1, 1, 0], report


@pytest.mark.parametrize("qos", [0, 1])
def test_topic_aliases_on_the_wire_and_named_again_after_a_reconnect(
    tmp_path: Path, scripted: ScriptedBroker, qos: int
) -> None:
    """MQTT 5.0 with a Topic Alias Maximum in the CONNACK: the board names its topic once per connection, then
    sends the alias with a zero-length name (QoS 0 as QoS 1); a new connection starts without aliases
    [MQTT-3.3.2-7], so a flow resent on it names its topic again."""
    board = start_board(tmp_path, board_config(f"wire-alias-{qos}", scripted.address, qos, 4, "5"))
    topic = f"sensors/wire-alias-{qos}/telemetry"
    conn = scripted.accept()
    conn.expect_connect()
    conn.connack(False, props={codec.TOPIC_ALIAS_MAXIMUM: 2})
    first = 4 if qos == 0 else 2
    pubs = [conn.recv_type(codec.PUBLISH)[1] for _ in range(first)]
    # Alias 1: never 0, within the broker's maximum [MQTT-3.3.2-8] [MQTT-3.3.2-9].
    assert [(p.topic, p.props.get(codec.TOPIC_ALIAS)) for p in pubs] == [(topic, 1)] + [("", 1)] * (first - 1)
    if qos:
        conn.ack(codec.PUBACK, pubs[0].pid)  # the second stays unacknowledged: it is resent on the next connection
        conn.hang_up()
        conn = scripted.accept()
        conn.expect_connect()
        conn.connack(True, props={codec.TOPIC_ALIAS_MAXIMUM: 2})
        rest = [conn.recv_type(codec.PUBLISH)[1] for _ in range(3)]
        assert rest[0].dup and rest[0].pid == pubs[1].pid
        assert [(p.topic, p.props.get(codec.TOPIC_ALIAS)) for p in rest] == [(topic, 1), ("", 1), ("", 1)]
        for p in rest:
            conn.ack(codec.PUBACK, p.pid)
    conn.recv_type(codec.DISCONNECT)
    code, out = finish(board)
    assert code == 0, out


def _serve_until(conn: Connection, last: int) -> list[int]:
    """Answer the board's packets (SUBACK, PUBACK) until one of type `last`; the types it sent."""
    seen = []
    while True:
        _, packet = conn.recv()
        seen.append(packet.type)
        if packet.type == last:
            return seen
        if packet.type == codec.SUBSCRIBE:
            conn.send(codec.encode_suback(packet.pid, [1], conn.version))
        elif packet.type == codec.PUBLISH:
            conn.ack(codec.PUBACK, packet.pid)


@pytest.mark.parametrize("version", ["3.1.1", "5"])
def test_subscriptions_made_again_at_a_reconnect_into_a_present_session_on_mqtt5_only(
    tmp_path: Path, scripted: ScriptedBroker, version: str
) -> None:
    """The board application subscribes at a boot's first connection; at a later connection whose CONNACK says
    the session is present it subscribes again on MQTT 5 (a broker restored from a snapshot was seen to keep a
    session that no longer delivered to it) and not on 3.1.1 (a SUBSCRIBE behind a resent PUBLISH that Mosquitto
    refuses and closes on loses its acknowledgement to the reset)."""
    subscription = {"topic": "cmd/wire-resub", "qos": 1}
    config = board_config(f"wire-resub-{version}", scripted.address, 1, 2, version, subscribe=[subscription])
    board = start_board(tmp_path, config)
    conn = scripted.accept()
    conn.expect_connect()
    conn.connack(session_present=True)
    first = _serve_until(conn, codec.PUBLISH)  # its first message goes unacknowledged...
    conn.hang_up()  # ... and the connection drops: the board reconnects
    conn = scripted.accept()
    conn.expect_connect()
    conn.connack(session_present=True)
    second = _serve_until(conn, codec.DISCONNECT)
    code, out = finish(board)
    assert code == 0, out
    assert first.count(codec.SUBSCRIBE) == 1
    assert second.count(codec.SUBSCRIBE) == (1 if version == "5" else 0), second
    assert second.count(codec.PUBLISH) == 2  # the first again (DUP) and the second
