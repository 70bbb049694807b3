"""The session state machine (sans-I/O) over both journal backends, on CPython: windows, resends, acks, packet
ids, incoming QoS 2, and what a new session replays from the flash."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dmqtt import codec_host as codec
from dmqtt import journal_record as rec
from dmqtt import journal_ring
from dmqtt.errors import ProtocolError
from dmqtt.journal_file import FileJournal
from dmqtt.session import QueueFull, Session
from tests.unit.nor import NorPartition

Store = Callable[[], Any]


def store_factory(kind: str, tmp_path: Path, compact_bytes: int = 4096) -> Store:
    """A factory giving a fresh journal object over the same flash (a reboot): the ring, or the file journal."""
    if kind == "ring":
        part = NorPartition(16)
        return lambda: journal_ring.RingJournal(part, record_max=512)
    path = str(tmp_path / "mqtt.journal")
    return lambda: FileJournal(path, record_max=512, compact_bytes=compact_bytes)


@pytest.fixture(params=["ring", "file"])
def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return store_factory(request.param, tmp_path)


def boot(new_store: Store, version: int = codec.V311, **kw: Any) -> Session:
    session = Session(new_store(), version, **kw)
    session.open()
    return session


def drain(session: Session) -> list[codec.Packet]:
    out = []
    buf = bytearray(1024)
    while n := session.next_packet(buf):
        wire = bytes(buf[:n])
        out += list(codec.PacketDecoder(session.version).packets(wire))
    return out


def deliver(session: Session, wire: bytes) -> None:
    decoder = codec.PacketDecoder(session.version)
    decoder.feed(wire)
    assert decoder.ready
    session.handle(decoder.ptype, decoder.flags, decoder.body)


def ack(session: Session, ptype: int, pid: int, reason: int = 0) -> None:
    deliver(session, codec.encode_ack(ptype, pid, reason, session.version))


def publish(session: Session, n: int, qos: int, topic: bytes = b"t/1") -> list[int]:
    return [session.accept(topic, b"m%d" % i, qos) for i in range(n)]


def test_accepted_message_is_on_flash_before_accept_returns(new_store: Store) -> None:
    s = boot(new_store)
    pid = s.accept(b"sensors/a", b"payload", 1, retain=True, mark=41)
    again = boot(new_store)  # reboot: nothing kept in RAM
    assert again.outstanding() == 1 and again.mark == 41
    again.connected(session_present=True)
    [p] = drain(again)
    assert (p.type, p.pid, p.topic, p.payload, p.qos, p.retain) == (
        codec.PUBLISH,
        pid,
        "sensors/a",
        b"payload",
        1,
        True,
    )
    assert p.dup  # it may have been sent before the reset [MQTT-3.3.1-1]


def test_window_of_eight_no_stop_and_wait(new_store: Store) -> None:
    s = boot(new_store, window=8)
    pids = publish(s, 12, 1)
    s.connected(True)
    first = drain(s)
    assert [p.pid for p in first] == pids[:8] and not any(p.dup for p in first)  # DUP 0 [MQTT-3.3.1-2]
    assert drain(s) == []  # no resend on a live connection [MQTT-4.4.0-1]
    for pid in pids[:3]:
        ack(s, codec.PUBACK, pid)
    assert [p.pid for p in drain(s)] == pids[8:11]


@pytest.mark.parametrize("receive_max", [1, 2, 3])
def test_receive_maximum_caps_the_window(new_store: Store, receive_max: int) -> None:
    s = boot(new_store, codec.V5, window=8)
    pids = publish(s, 6, 2)
    s.connected(True, receive_max=receive_max)
    assert [p.pid for p in drain(s)] == pids[:receive_max]
    ack(s, codec.PUBREC, pids[0])
    # PUBREL goes out, but the flow still holds its place until PUBCOMP (MQTT 5.0 4.9).
    assert [(p.type, p.pid) for p in drain(s)] == [(codec.PUBREL, pids[0])]
    ack(s, codec.PUBCOMP, pids[0])
    assert [p.pid for p in drain(s)] == [pids[receive_max]]


def topics_and_aliases(packets: list[codec.Packet]) -> list[tuple[str, int | None]]:
    return [(p.topic, (p.props or {}).get(codec.TOPIC_ALIAS)) for p in packets]


def test_topic_aliases_name_a_topic_once_per_connection(new_store: Store) -> None:
    s = boot(new_store, codec.V5)
    pids = publish(s, 2, 1, b"sensors/board-7/telemetry") + publish(s, 2, 1, b"sensors/board-7/status")
    s.connected(True, topic_aliases=10)
    # First use: the name and a new alias (never 0, never above the broker's maximum [MQTT-3.3.2-8]
    # [MQTT-3.3.2-9]); then the alias alone, with a zero-length name.
    assert topics_and_aliases(drain(s)) == [
        ("sensors/board-7/telemetry", 1),
        ("", 1),
        ("sensors/board-7/status", 2),
        ("", 2),
    ]
    ack(s, codec.PUBACK, pids[0])
    s.lost()
    s.connected(True, topic_aliases=1)
    # A new connection knows no alias [MQTT-3.3.2-7]: the resent flows name their topic again, and only one alias
    # is allowed now, so the second topic goes without one.
    assert topics_and_aliases(drain(s)) == [
        ("sensors/board-7/telemetry", 1),
        ("sensors/board-7/status", None),
        ("sensors/board-7/status", None),
    ]


@pytest.mark.parametrize(("version", "granted"), [(codec.V5, 0), (codec.V311, 10)])
def test_no_topic_alias_unless_the_broker_grants_them_on_mqtt_5(new_store: Store, version: int, granted: int) -> None:
    s = boot(new_store, version)
    publish(s, 2, 1, b"sensors/b/telemetry")
    s.connected(True, topic_aliases=granted)
    assert topics_and_aliases(drain(s)) == [("sensors/b/telemetry", None)] * 2


def test_reconnect_with_session_resends_with_dup_and_same_ids(new_store: Store) -> None:
    s = boot(new_store)
    pids = publish(s, 3, 1)
    s.connected(True)
    sent = drain(s)
    ack(s, codec.PUBACK, pids[1])
    s.lost()
    s.connected(True)
    resent = drain(s)
    assert [(p.pid, p.payload, p.dup) for p in resent] == [
        (pids[0], sent[0].payload, True),
        (pids[2], sent[2].payload, True),
    ]


def test_qos2_after_pubrec_resends_pubrel_never_publish(new_store: Store) -> None:
    s = boot(new_store)
    [pid] = publish(s, 1, 2)
    s.connected(True)
    drain(s)
    ack(s, codec.PUBREC, pid)
    assert [p.type for p in drain(s)] == [codec.PUBREL]
    s.lost()
    s.connected(True)
    assert [(p.type, p.pid) for p in drain(s)] == [(codec.PUBREL, pid)]
    rebooted = boot(new_store)
    rebooted.connected(True)
    assert [(p.type, p.pid) for p in drain(rebooted)] == [(codec.PUBREL, pid)]
    results: list[tuple[int, int]] = []
    rebooted.on_result = lambda p, r: results.append((p, r))
    ack(rebooted, codec.PUBCOMP, pid)
    assert results == [(pid, 0)] and rebooted.outstanding() == 0
    assert boot(new_store).outstanding() == 0


def test_pubrels_go_in_the_order_their_pubrecs_came_and_resend_oldest_first(new_store: Store) -> None:
    s = boot(new_store)
    pids = publish(s, 3, 2)
    s.connected(True)
    drain(s)
    for pid in (pids[2], pids[0]):  # a broker may acknowledge out of order
        ack(s, codec.PUBREC, pid)
    ack(s, codec.PUBREC, pids[1])
    # In the order the PUBRECs were received [MQTT-4.6.0-3], not the order the messages were accepted.
    assert [(p.type, p.pid) for p in drain(s)] == [(codec.PUBREL, pid) for pid in (pids[2], pids[0], pids[1])]
    s.lost()
    s.connected(True)  # resent on a kept session: oldest message first
    assert [p.pid for p in drain(s)] == pids


def test_window_count_survives_every_way_a_flow_ends(new_store: Store) -> None:
    """The window is a count kept as flows start and end (not a search of the slots): a flow that ends by PUBACK,
    by PUBCOMP, by a refusing PUBREC, or a PUBLISH too large to send must each give its place back."""
    s = boot(new_store, codec.V5, window=2)
    q1, q2a, q2b, q1b, q1c = (s.accept(b"t", b"m", qos) for qos in (1, 2, 2, 1, 1))
    s.connected(True)
    assert [p.pid for p in drain(s)] == [q1, q2a]
    ack(s, codec.PUBACK, q1)
    assert [p.pid for p in drain(s)] == [q2b]
    ack(s, codec.PUBREC, q2a)
    assert [(p.type, p.pid) for p in drain(s)] == [(codec.PUBREL, q2a)]  # still holds its place
    ack(s, codec.PUBREC, q2b, 0x87)  # refused: the flow ends here
    assert [p.pid for p in drain(s)] == [q1b]
    ack(s, codec.PUBCOMP, q2a)
    assert [p.pid for p in drain(s)] == [q1c]
    s.max_packet = 10  # (a broker with a smaller Maximum Packet Size): a later message can never be sent
    big = s.accept(b"t", b"x" * 64, 1)
    ack(s, codec.PUBACK, q1b)
    assert drain(s) == [] and s.outstanding() == 1  # the large one ended as refused, its place given back
    s.max_packet = 1024
    last = s.accept(b"t", b"m", 1)
    assert [p.pid for p in drain(s)] == [last] and big != last


def test_packet_ids_skip_an_id_in_flight_after_a_whole_wrap(new_store: Store) -> None:
    boot(new_store, max_messages=2).accept(b"t", b"held", 1)
    s = boot(new_store, max_messages=2)  # after a reboot: the id in flight is ahead of the next one, at the wrap
    held = s.next_pid
    s.connected(True)
    drain(s)
    seen = set()
    for _ in range(65535 + 3):  # more than every id, one message in flight at a time beside `held`
        pid = s.accept(b"t", b"m", 1)
        seen.add(pid)
        drain(s)
        ack(s, codec.PUBACK, pid)
        assert pid != held
    assert len(seen) == 65534 and 0 not in seen  # every id but the one in flight, never 0 [MQTT-2.3.1-1]


def test_pubrec_error_ends_the_flow_without_pubrel(new_store: Store) -> None:
    s = boot(new_store, codec.V5)
    results: list[tuple[int, int]] = []
    s.on_result = lambda p, r: results.append((p, r))
    pid1, pid2 = publish(s, 2, 2)
    s.connected(True)
    drain(s)
    ack(s, codec.PUBREC, pid1, 0x87)  # Not authorized
    ack(s, codec.PUBREC, pid2, 0x10)  # No matching subscribers: success
    assert [(p.type, p.pid) for p in drain(s)] == [(codec.PUBREL, pid2)]
    assert results == [(pid1, 0x87)]
    assert boot(new_store).outstanding() == 1  # the refused one is gone from the journal too


def test_puback_reasons(new_store: Store) -> None:
    s = boot(new_store, codec.V5)
    results: list[tuple[int, int]] = []
    s.on_result = lambda p, r: results.append((p, r))
    a, b = publish(s, 2, 1)
    s.connected(True)
    drain(s)
    ack(s, codec.PUBACK, a, 0x10)
    ack(s, codec.PUBACK, b, 0x97)
    assert results == [(a, 0x10), (b, 0x97)] and s.outstanding() == 0


def test_session_not_present_sends_journaled_messages_as_new_flows(new_store: Store) -> None:
    s = boot(new_store)
    results: list[tuple[int, int]] = []
    s.on_result = lambda p, r: results.append((p, r))
    q1, q2 = publish(s, 2, 2)
    s.connected(True)
    drain(s)
    ack(s, codec.PUBREC, q1)
    drain(s)
    s.lost()
    s.connected(session_present=False)
    again = drain(s)
    # Both go again as new flows, DUP=0: q2 had no PUBREC; q1 had one, but a broker without the session
    # cannot release it any more (the payload was kept on flash for this).
    assert [(p.type, p.pid, p.dup, p.payload) for p in again] == [
        (codec.PUBLISH, q1, False, b"m0"),
        (codec.PUBLISH, q2, False, b"m1"),
    ]
    assert results == []
    rebooted = boot(new_store)  # and a reboot in this state keeps both
    assert rebooted.outstanding() == 2


def test_packet_ids_wrap_and_skip_ids_in_flight(new_store: Store) -> None:
    s = boot(new_store)
    s.next_pid = 65533
    pids = publish(s, 3, 1)
    assert pids == [65534, 65535, 1]  # never 0 [MQTT-2.3.1-1]
    s.next_pid = 65534
    assert s.accept(b"t", b"x", 1) == 2  # 65535 and 1 are still in flight
    assert boot(new_store).next_pid == 2  # survives a reboot


def test_a_flow_whose_home_slot_is_taken_is_found_all_the_same(new_store: Store) -> None:
    """A flow sits in the slot its packet id names (pid modulo the slots) when that one is free, so that an
    acknowledgement looks at one slot; when another flow holds it, the flow goes elsewhere and is still found,
    before and after a reboot."""
    s = boot(new_store, max_messages=4)
    results: list[tuple[int, int]] = []
    s.on_result = lambda p, r: results.append((p, r))
    s.connected(True)
    first, second, _third = publish(s, 3, 1)  # ids 1, 2, 3: slots 1, 2, 3
    drain(s)
    ack(s, codec.PUBACK, second)  # slot 2 free
    fourth, fifth = publish(s, 2, 1)  # 4 in slot 0; 5's slot (1) is the first's: it takes slot 2
    drain(s)
    assert s.full() and s.outstanding() == 4
    rebooted = boot(new_store, max_messages=4)
    rebooted.on_result = s.on_result
    rebooted.connected(True)
    assert sorted(p.pid for p in drain(rebooted)) == [first, 3, fourth, fifth]
    for session in (s, rebooted):
        ack(session, codec.PUBACK, fifth)
        ack(session, codec.PUBACK, first)
        assert session.outstanding() == 2
    assert results == [(second, 0), (fifth, 0), (first, 0), (fifth, 0), (first, 0)]


def test_queue_full(new_store: Store) -> None:
    s = boot(new_store, max_messages=4)
    publish(s, 4, 1)
    with pytest.raises(QueueFull):
        s.accept(b"t", b"x", 1)


def test_unexpected_acks(new_store: Store) -> None:
    """An acknowledgement of no flow of ours breaks the protocol [MQTT-3.3.4-1]: ProtocolError, named (the client
    then disconnects); an unexpected PUBREL is answered, the connection kept."""
    s = boot(new_store, codec.V5)
    s.connected(True)
    for ptype, name, pid in ((codec.PUBACK, "PUBACK", 77), (codec.PUBCOMP, "PUBCOMP", 78)):
        with pytest.raises(ProtocolError, match=f"sent {name} for packet id {pid}, which is in no flow of ours"):
            ack(s, ptype, pid)
    assert drain(s) == []
    ack(s, codec.PUBREL, 79)
    [p] = drain(s)
    assert (p.type, p.pid, p.reason) == (codec.PUBCOMP, 79, codec.PACKET_ID_NOT_FOUND)


def test_incoming_qos2_delivered_once_across_a_reboot(new_store: Store) -> None:
    got: list[bytes] = []
    s = boot(new_store)
    s.on_message = lambda t, p, q, r, d: got.append(p)
    s.connected(True)
    msg = codec.encode_publish("cmd/1", b"go", 2, 9)
    deliver(s, msg)
    assert [(p.type, p.pid) for p in drain(s)] == [(codec.PUBREC, 9)]
    rebooted = boot(new_store)  # power cut between PUBREC and PUBREL
    rebooted.on_message = lambda t, p, q, r, d: got.append(p)
    rebooted.connected(True)
    deliver(rebooted, codec.encode_publish("cmd/1", b"go", 2, 9, dup=True))
    assert got == [b"go"]
    assert [(p.type, p.pid) for p in drain(rebooted)] == [(codec.PUBREC, 9)]
    ack(rebooted, codec.PUBREL, 9)
    assert [(p.type, p.pid) for p in drain(rebooted)] == [(codec.PUBCOMP, 9)]
    deliver(rebooted, msg)  # the id may now carry a new message
    assert got == [b"go", b"go"]


def test_incoming_qos1_acknowledged_after_delivery(new_store: Store) -> None:
    got: list[tuple[str, bytes, int]] = []
    s = boot(new_store)
    s.on_message = lambda t, p, q, r, d: got.append((t, p, q))
    s.connected(True)
    deliver(s, codec.encode_publish("cmd/2", b"x", 1, 5))
    assert got == [("cmd/2", b"x", 1)]
    assert [(p.type, p.pid) for p in drain(s)] == [(codec.PUBACK, 5)]


def test_maximum_qos_and_retain_available(new_store: Store) -> None:
    """Retain Available 0: a retained message goes unretained [MQTT-3.2.2-14]. A Maximum QoS below a message's: it
    is never sent, at its QoS [MQTT-3.2.2-11] or lower (a QoS 2 message sent at QoS 1 may arrive twice); the
    session says so (the client ends the connection) and keeps it queued for a broker that takes it."""
    s = boot(new_store, codec.V5)
    s.accept(b"t", b"x", 2, retain=True)
    s.connected(True, max_qos=1, retain_available=False)
    with pytest.raises(ProtocolError, match="Maximum QoS is 1 and journaled messages ask QoS 2"):
        drain(s)
    s.lost()
    s.connected(True, max_qos=2, retain_available=False)
    [p] = drain(s)
    assert (p.qos, p.retain) == (2, False)
    ack(s, codec.PUBREC, p.pid)
    [rel] = drain(s)
    ack(s, codec.PUBCOMP, rel.pid)
    assert s.outstanding() == 0


def test_ring_erases_only_when_it_wraps_and_costs_near_the_record_size() -> None:
    part = NorPartition(8)
    s = Session(journal_ring.RingJournal(part, 512))
    s.open()
    s.connected(True)
    messages = 3000
    for i in range(messages):
        pid = s.accept(b"sensors/dev/telemetry", b"x" * 40, 1, mark=i + 1)
        drain(s)
        ack(s, codec.PUBACK, pid)
    record = 7 + 13 + 21 + 40 + 7 + 2  # PUB and DONE records
    per_message = part.bytes_programmed / messages
    assert per_message < record * 1.05, per_message  # sector headers and META snapshots: under 5%
    assert part.erases <= messages * record // (4096 - 16) + 2
    again = Session(journal_ring.RingJournal(part, 512))
    again.open()
    assert again.mark == messages and again.outstanding() == 0


def test_ring_carries_live_messages_forward_when_it_wraps() -> None:
    part = NorPartition(6)
    s = Session(journal_ring.RingJournal(part, 512), max_messages=8)
    s.open()
    s.connected(True)
    stuck = s.accept(b"t/stuck", b"never acked", 1)
    drain(s)
    for _i in range(2000):
        pid = s.accept(b"t/x", b"y" * 60, 1)
        drain(s)
        ack(s, codec.PUBACK, pid)
    assert part.erases > 6  # the ring went round several times
    again = Session(journal_ring.RingJournal(part, 512), max_messages=8)
    again.open()
    again.connected(True)
    [p] = drain(again)
    assert (p.pid, p.topic, p.payload, p.dup) == (stuck, "t/stuck", b"never acked", True)


class CountingReads(NorPartition):
    def __init__(self, sectors: int) -> None:
        super().__init__(sectors)
        self.reads = 0

    def readblocks(self, block: int, buf: bytearray | memoryview, offset: int = 0) -> None:
        self.reads += 1
        super().readblocks(block, buf, offset)


@pytest.mark.parametrize("in_flight", [0, 4])
def test_ring_reclaims_a_sector_without_reading_it_when_the_session_holds_nothing_there(in_flight: int) -> None:
    """A steady flow's oldest sector holds no live record (its flows ended long ago): the session says so
    (`holds`), and the reclaim reads none of its records (on a chip, 4 KB of flash and a CRC per record, once
    per sector's worth of messages). Also with flows in flight, whose slots' REL addresses are stale (a QoS 1
    flow has none): sector 0's reclaim read every record while a stale 0 counted. A record live there is still
    carried forward (the test above)."""
    part = CountingReads(6)
    s = Session(journal_ring.RingJournal(part, 512), max_messages=8)
    s.open()
    s.connected(True)
    part.reads = 0
    flowing = [s.accept(b"t/x", b"y" * 60, 1) for _i in range(in_flight)]
    for _i in range(2000):
        flowing.append(s.accept(b"t/x", b"y" * 60, 1))
        drain(s)
        ack(s, codec.PUBACK, flowing.pop(0))
    # (the flows accepted before the loop are read back once, to be sent: accept's fresh message is the last)
    assert part.erases > 6 and part.reads == in_flight, (part.erases, part.reads)


def test_file_journal_compacts_keeping_live_messages_and_cleans_leftovers(tmp_path: Path) -> None:
    path = str(tmp_path / "mqtt.journal")
    s = Session(FileJournal(path, 512, compact_bytes=2048))
    s.open()
    s.connected(True)
    stuck = s.accept(b"t/stuck", b"never acked", 2)
    drain(s)
    for _ in range(300):
        pid = s.accept(b"t/x", b"y" * 60, 1)
        drain(s)
        ack(s, codec.PUBACK, pid)
    assert (tmp_path / "mqtt.journal").stat().st_size <= 2048 + 200  # compacted, not growing
    (tmp_path / "mqtt.journal.tmp").write_bytes(b"half a compaction")
    again = Session(FileJournal(path, 512, compact_bytes=2048))
    notes = again.open()
    assert "interrupted compaction" in notes[0] and not (tmp_path / "mqtt.journal.tmp").exists()
    again.connected(True)
    [p] = drain(again)
    assert (p.pid, p.payload, p.dup) == (stuck, b"never acked", True)
    assert again.next_pid == s.next_pid


def test_file_journal_moves_a_foreign_file_aside(tmp_path: Path) -> None:
    (tmp_path / "mqtt.journal").write_bytes(b"{not a journal}")
    s = Session(FileJournal(str(tmp_path / "mqtt.journal"), 512))
    notes = s.open()
    assert "moved aside" in notes[0]
    assert (tmp_path / "mqtt.journal.corrupt").read_bytes() == b"{not a journal}"
    s.accept(b"t", b"x", 1)
    again = Session(FileJournal(str(tmp_path / "mqtt.journal"), 512))
    again.open()
    assert again.outstanding() == 1


def test_group_commit_programs_several_messages_at_once() -> None:
    part = NorPartition(8)
    s = Session(journal_ring.RingJournal(part, 512))
    s.open()
    s.note_mark(0)  # opens the first sector
    before = part.ops
    pids = [s.accept(b"t", b"m%d" % i, 1, mark=i + 1, defer=True) for i in range(5)]
    assert part.ops == before  # staged, nothing programmed yet
    lost = Session(journal_ring.RingJournal(part, 512))
    lost.open()
    assert lost.outstanding() == 0 and lost.mark == 0  # a power cut now loses them, and the mark with them
    s.connected(True)
    sent = drain(s)  # nothing is sent before it is on flash: next_packet syncs first
    assert part.ops == before + 1  # one program for five records
    assert [p.pid for p in sent] == pids
    again = Session(journal_ring.RingJournal(part, 512))
    again.open()
    assert again.outstanding() == 5 and again.mark == 5


def test_a_group_committed_message_larger_than_the_stage_is_programmed_at_once() -> None:
    part = NorPartition(8)
    s = Session(journal_ring.RingJournal(part, 1024))
    s.open()
    small = s.accept(b"t", b"small", 1, defer=True)
    before = part.ops
    large = s.accept(b"t", b"L" * 900, 1, defer=True)  # more than the 512-byte stage holds
    assert part.ops == before + 2  # the staged one first, then this one: both on flash, in order
    again = Session(journal_ring.RingJournal(part, 1024))
    again.open()
    assert again.outstanding() == 2 and again._find(small) >= 0 and again._find(large) >= 0


def test_group_commit_on_the_file_journal(tmp_path: Path) -> None:
    path = str(tmp_path / "j")
    s = Session(FileJournal(path, 512))
    s.open()
    for i in range(4):
        s.accept(b"t", b"x", 2, mark=i + 1, defer=True)
    s.sync()
    again = Session(FileJournal(path, 512))
    again.open()
    assert again.outstanding() == 4 and again.mark == 4


def test_more_journaled_messages_than_slots_is_reported(new_store: Store) -> None:
    s = boot(new_store, max_messages=4)
    publish(s, 4, 1)
    smaller = Session(new_store(), max_messages=2)
    notes = smaller.open()
    assert smaller.outstanding() == 2
    assert sum("raise max_messages" in n for n in notes) == 2


class Handler:
    """An application's on_message that records what it got; `fail` makes it raise (a crash in the handler)."""

    def __init__(self, fail: bool = False) -> None:
        self.got: list[tuple[str, bytes, int, bool, bool]] = []
        self.fail = fail

    def __call__(self, topic: str, payload: bytes, qos: int, retain: bool, dup: bool) -> None:
        self.got.append((topic, payload, qos, retain, dup))
        if self.fail:
            raise RuntimeError("the handler failed")


def booted_with(new_store: Store, handler: Handler) -> Session:
    """A reboot as the client does it: hooks set, journal replayed, interrupted deliveries made."""
    session = Session(new_store())
    session.on_message = handler
    session.open()
    session.deliver_pending()
    return session


def test_incoming_qos2_cut_before_the_handler_returned_is_delivered_after_the_reboot(new_store: Store) -> None:
    """The message goes to the journal with its id before the handler sees it; a cut inside the handler (here:
    the handler raising, then the reboot) brings it back, flagged dup, until a handler returns. Then the
    broker's resend is only acknowledged, and PUBREL releases the id."""
    s = boot(new_store)
    s.on_message = Handler(fail=True)
    s.connected(True)
    with pytest.raises(RuntimeError):
        deliver(s, codec.encode_publish("cmd/1", b"go", 2, 9, retain=True))
    handler = Handler()
    booted_with(new_store, handler)
    assert handler.got == [("cmd/1", b"go", 2, True, True)]
    again = booted_with(new_store, Handler())  # the handler returned: nothing comes back
    again.connected(True)
    assert again.on_message.got == []  # type: ignore[union-attr]
    deliver(again, codec.encode_publish("cmd/1", b"go", 2, 9, dup=True))
    assert [(p.type, p.pid) for p in drain(again)] == [(codec.PUBREC, 9)]
    ack(again, codec.PUBREL, 9)
    assert [(p.type, p.pid) for p in drain(again)] == [(codec.PUBCOMP, 9)]
    assert again.on_message.got == []  # type: ignore[union-attr]


def test_a_handler_that_raised_gets_the_message_before_pubrel_releases_it(new_store: Store) -> None:
    handler = Handler(fail=True)
    s = boot(new_store)
    s.on_message = handler
    s.connected(True)
    with pytest.raises(RuntimeError):
        deliver(s, codec.encode_publish("cmd/1", b"go", 2, 4))
    handler.fail = False
    ack(s, codec.PUBREL, 4)  # no reboot: the same session, the handler fixed
    assert [p[1] for p in handler.got] == [b"go", b"go"] and handler.got[1][4]
    assert [(p.type, p.pid) for p in drain(s)] == [(codec.PUBCOMP, 4)]


def test_a_broker_without_the_session_clears_the_receive_set(new_store: Store) -> None:
    """Session not present: the broker forgot its incoming flows, so their ids are free on our side too (an
    RXDONE each), and a new message under an old id is a new message, delivered."""
    handler = Handler()
    s = boot(new_store)
    s.on_message = handler
    s.connected(True)
    deliver(s, codec.encode_publish("cmd/1", b"one", 2, 7))
    rebooted = booted_with(new_store, handler)
    rebooted.connected(session_present=False)
    deliver(rebooted, codec.encode_publish("cmd/1", b"two", 2, 7))
    assert [p[1] for p in handler.got] == [b"one", b"two"]
    third = booted_with(new_store, handler)  # and the clearing itself was journaled
    third.connected(True)
    deliver(third, codec.encode_publish("cmd/1", b"two", 2, 7, dup=True))
    assert [p[1] for p in handler.got] == [b"one", b"two"]  # "two" is in the journal: only acknowledged


def test_more_incoming_qos2_than_our_receive_maximum_is_a_protocol_error(new_store: Store) -> None:
    s = Session(new_store(), rx_max=2)
    s.open()
    s.connected(True)
    deliver(s, codec.encode_publish("cmd/1", b"a", 2, 1))
    deliver(s, codec.encode_publish("cmd/1", b"b", 2, 2))
    with pytest.raises(ProtocolError) as refused:
        deliver(s, codec.encode_publish("cmd/1", b"c", 2, 3))
    assert refused.value.reason_code == codec.RECEIVE_MAXIMUM_EXCEEDED  # 0x93 [MQTT-3.3.4-8]


def test_a_format_1_receive_record_counts_as_delivered(new_store: Store) -> None:
    """A journal written before the message went into RX (format 1: pid only) resumes as delivered: the resend
    is acknowledged, not delivered again."""
    store = new_store()
    s = Session(store)
    s.open()
    store.commit(rec.RX, rec.put_pid(store.body, 12))
    handler = Handler()
    rebooted = booted_with(new_store, handler)
    rebooted.connected(True)
    deliver(rebooted, codec.encode_publish("cmd/1", b"x", 2, 12, dup=True))
    assert handler.got == [] and [(p.type, p.pid) for p in drain(rebooted)] == [(codec.PUBREC, 12)]


def test_a_message_the_journal_refuses_leaves_the_last_accepted_one_intact() -> None:
    """The journal refuses a message when it has no room (QueueFull, nothing written) after the session has
    laid the message's record into the journal's buffer; the message accepted before it, not sent yet, must
    still go out with its own topic and payload (its record was in that buffer: measured, it once went out
    with the refused message's payload, and was lost)."""
    s = Session(journal_ring.RingJournal(NorPartition(4), 1024), window=32)
    s.open()
    accepted = []
    with pytest.raises(QueueFull):
        for i in range(40):
            accepted.append((s.accept(b"t", b"%03d" % i + b"x" * 990, 1), b"%03d" % i))
    s.connected(True)
    sent = {p.pid: p.payload[:3] for p in drain(s)}
    assert sent == dict(accepted), "a message went out with another's payload"
