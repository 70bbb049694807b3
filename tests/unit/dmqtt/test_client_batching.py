"""The client hands the transport as many of the session's packets at once as its output buffer holds: a window
opened by several acknowledgements sends the messages queued behind it in one write, each packet whole, in
order, none split between writes. And a 5.0 acknowledgement that carries a success reason code (No matching
subscribers, what Mosquitto answers when no one subscribes) reaches on_published with its code. Over a broker in
memory, on an in-memory NOR partition."""

from __future__ import annotations

import pytest

from dmqtt import codec_host as codec
from dmqtt.client import MQTTClient
from dmqtt.journal_ring import RingJournal
from tests.unit.host_client import Broker
from tests.unit.nor import NorPartition

pytestmark = pytest.mark.usefixtures("micropython_time")


class CountingBroker(Broker):
    """The broker in memory, keeping each write's bytes."""

    def __init__(self, version: int = codec.V311) -> None:
        super().__init__(version=version)
        self.writes: list[bytes] = []

    def send(self, buf: bytearray, start: int, end: int) -> int:
        self.writes.append(bytes(buf[start:end]))
        return super().send(buf, start, end)


def connected(broker: CountingBroker, version: int = codec.V311, **options: int) -> MQTTClient:
    """A client over `broker`, its journal on an in-memory NOR partition, connected."""
    client = MQTTClient("batch", RingJournal(NorPartition(8), 256), version, **options)
    client.open()
    client.connect(broker)
    return client


def packets_of(write: bytes, version: int) -> list[codec.Packet]:
    """The packets of one write, which must end on a packet's end."""
    decoder = codec.PacketDecoder(version, 1 << 16)
    packets = list(decoder.packets(write))
    assert decoder.ready, f"a write ends inside a packet: {write!r}"
    return packets


def fill_window(broker: CountingBroker, client: MQTTClient, count: int, payload: bytes) -> list[int]:
    pids = [client.publish(b"sensors/batch", payload + b"%03d" % k, 1) for k in range(count)]
    broker.writes.clear()
    return pids


def acknowledge(broker: CountingBroker, client: MQTTClient, ptype: int, pids: list[int]) -> list[bytes]:
    """The broker acknowledges `pids` (ptype: PUBACK, PUBREC or PUBCOMP) in one go; the writes the client's next
    poll makes."""
    broker.writes.clear()
    for pid in pids:
        broker.inbox += codec.encode_ack(ptype, pid, 0, codec.V311)
    client.poll(1)
    return broker.writes


def test_a_window_opened_by_acknowledgements_sends_the_queued_messages_in_one_write() -> None:
    broker = CountingBroker()
    client = connected(broker, window=4)
    pids = fill_window(broker, client, 10, b"m")  # 4 in flight, 6 queued behind the window
    assert len(broker.publishes()) == 4
    writes = acknowledge(broker, client, codec.PUBACK, pids[:4])
    assert len(writes) == 1, writes  # the 4 the acknowledgements let out, together
    sent = packets_of(writes[0], codec.V311)
    assert [p.pid for p in sent] == pids[4:8]
    assert [bytes(p.payload) for p in sent] == [b"m%03d" % k for k in range(4, 8)]


def test_what_does_not_fit_the_output_buffer_goes_in_the_next_write_whole_and_in_order() -> None:
    broker = CountingBroker()
    # A 256-byte output buffer: two 100-byte messages fit in it, a third does not.
    client = connected(broker, window=6, max_packet=256)
    payload = b"p" * 97
    pids = fill_window(broker, client, 12, payload)
    writes = acknowledge(broker, client, codec.PUBACK, pids[:6])
    assert len(writes) == 3, [len(w) for w in writes]
    assert all(len(write) <= 256 for write in writes)
    sent = [packet for write in writes for packet in packets_of(write, codec.V311)]
    assert [p.pid for p in sent] == pids[6:12]
    assert [bytes(p.payload) for p in sent] == [payload + b"%03d" % k for k in range(6, 12)]


def test_pubrels_owed_together_leave_in_one_write_as_do_the_publishes_their_completion_lets_out() -> None:
    broker = CountingBroker()
    client = connected(broker, window=2)
    pids = [client.publish(b"sensors/batch", b"q2-%d" % k, 2) for k in range(4)]  # 2 in flight, 2 queued
    released = [(codec.PUBREL, pids[0]), (codec.PUBREL, pids[1])]
    let_out = [(codec.PUBLISH, pids[2]), (codec.PUBLISH, pids[3])]
    for ack, expected in ((codec.PUBREC, released), (codec.PUBCOMP, let_out)):
        writes = acknowledge(broker, client, ack, pids[:2])
        assert len(writes) == 1, writes
        assert [(p.type, p.pid) for p in packets_of(writes[0], codec.V311)] == expected


def test_a_no_matching_subscribers_puback_completes_the_flow_with_its_code() -> None:
    broker = CountingBroker(codec.V5)
    client = connected(broker, codec.V5, window=4)
    results: list[tuple[int, int]] = []
    client.on_published = lambda pid, code: results.append((pid, code))
    first = client.publish(b"sensors/batch", b"nobody listens", 1)
    second = client.publish(b"sensors/batch", b"success", 1)
    broker.inbox += codec.encode_ack(codec.PUBACK, first, codec.NO_MATCHING_SUBSCRIBERS, codec.V5)
    broker.inbox += bytes((0x40, 3, second >> 8, second & 0xFF, 0))  # Success with its reason code spelled out
    client.poll(1)
    assert results == [(first, codec.NO_MATCHING_SUBSCRIBERS), (second, codec.SUCCESS)]
    assert client.outstanding() == 0 and client.published == 2 and client.refused == 0


def test_a_publish_behind_a_full_window_asks_the_session_for_nothing() -> None:
    """With the window full, a publish() journals and queues its message and leaves the pump alone: nothing can
    leave until acknowledgements come, and the poll() that reads them sends what they let out. (A pump and a
    next_packet() that finds nothing cost a tenth of a queued message's CPU.)"""
    broker = CountingBroker()
    client = connected(broker, window=4)
    asked = []
    next_packet = client.session.next_packet
    client.session.next_packet = lambda buf, at=0: asked.append(at) or next_packet(buf, at)  # type: ignore[method-assign]
    pids = fill_window(broker, client, 4, b"m")
    assert asked  # while the window had room, each publish() pumped its message out
    asked.clear()
    queued = [client.publish(b"sensors/batch", b"q%03d" % k, 1) for k in range(6)]
    assert asked == [] and broker.writes == []
    writes = acknowledge(broker, client, codec.PUBACK, pids)
    assert [p.pid for w in writes for p in packets_of(w, codec.V311)] == queued[:4]
