"""A message too large for an MQTT 3.1.1 broker (dmqtt.oversize): 3.1.1 cannot say a broker's packet limit, and a
broker with one (Mosquitto's max_packet_size) drops the connection on a larger PUBLISH. Once the same message,
larger than any the broker acknowledged, has been in flight at two dropped connections, its flow ends refused
(0x95) and publish() refuses a message as large; the run goes on. A link that only flaps never refuses a message
no larger than one acknowledged. On CPython over a broker in memory."""

from __future__ import annotations

import pytest

from dmqtt import codec_host as codec
from dmqtt.client import MQTTClient
from dmqtt.errors import MQTTError, PublishRefused
from dmqtt.journal_ring import RingJournal
from tests.unit.host_client import ScriptedInbox
from tests.unit.nor import NorPartition

pytestmark = pytest.mark.usefixtures("micropython_time")


class LimitedBroker(ScriptedInbox):
    """A 3.1.1 broker that acknowledges every QoS 1 PUBLISH and drops the connection, without reading further,
    at one larger than `limit` bytes (or at the PUBLISH numbered `flap_at`, whatever its size: a flapping link)."""

    def __init__(self, limit: int, flap_at: int | None = None, present: bool = True) -> None:
        super().__init__(codec.encode_connack(present, 0, codec.V311))
        self.limit = limit
        self.flap_at = flap_at
        self.dead = False
        self.delivered: list[bytes] = []
        self.seen = 0
        self._decoder = codec.PacketDecoder(codec.V311, 1 << 20)

    def send(self, buf: bytearray, start: int, end: int) -> int:
        if self.dead:
            raise OSError(104, "ECONNRESET")
        data = bytes(buf[start:end])
        for packet in self._decoder.packets(data):
            if packet.type != codec.PUBLISH:
                continue
            self.seen += 1
            size = codec.publish_size(len(packet.topic.encode()), len(packet.payload), packet.qos, codec.V311)
            if size > self.limit or self.seen == self.flap_at:
                self.dead = True
                return end - start
            self.delivered.append(bytes(packet.payload))
            self.inbox += codec.encode_ack(codec.PUBACK, packet.pid, 0, codec.V311)
        return end - start

    def readinto(self, buf: bytearray | memoryview) -> int | None:
        got = super().readinto(buf)  # what it sent before it closed is read first, as from a socket
        return 0 if got is None and self.dead else got

    def wait(self, timeout_ms: int, writable: bool = False) -> bool:
        return writable or self.dead or bool(self.inbox)

    def close(self) -> None:
        self.dead = True


def run(client: MQTTClient, broker: LimitedBroker) -> None:
    """Connect and poll until the connection ends or everything is acknowledged."""
    try:
        client.connect(broker)
        while client.outstanding():
            client.poll(10)
    except MQTTError:
        pass


def test_a_message_the_311_broker_drops_twice_ends_refused_and_the_run_goes_on() -> None:
    client = MQTTClient("big-311", RingJournal(NorPartition(8), 2048), codec.V311, max_packet=2048, window=8)
    results: list[tuple[int, int]] = []
    client.on_published = lambda pid, code: results.append((pid, code))
    client.open()
    small = [client.publish("t/s", b"s%d" % n, 1) for n in range(3)]
    big = client.publish("t/big", b"x" * 700, 1)
    after = [client.publish("t/s", b"a%d" % n, 1) for n in range(3)]
    brokers = [LimitedBroker(600) for _ in range(3)]
    for broker in brokers:
        run(client, broker)
    # The first two connections died on it (after acknowledging what came before it); the third never sends it.
    assert [b.dead for b in brokers[:2]] == [True, True] and brokers[2].seen == 3
    assert (big, 0x95) in results and client.refused == 1 and client.outstanding() == 0
    delivered = [p for b in brokers for p in b.delivered]
    assert sorted(set(delivered)) == sorted([b"s0", b"s1", b"s2", b"a0", b"a1", b"a2"])
    assert {pid for pid, code in results if code == 0} == set(small + after)
    with pytest.raises(PublishRefused) as refused:  # one as large is refused at once, before the journal
        client.publish("t/big", b"y" * 700, 1)
    assert refused.value.code == 0x95 and "dropped the connection twice" in str(refused.value)
    assert "max_packet_size" in str(refused.value)
    client.publish("t/s", b"b" * 100, 1)  # a smaller one still goes


def test_a_flapping_link_never_refuses_a_message_no_larger_than_one_acknowledged() -> None:
    client = MQTTClient("flap-311", RingJournal(NorPartition(8), 512), codec.V311, window=8)
    client.open()
    client.publish("t/s", b"x" * 100, 1)
    run(client, LimitedBroker(600))  # acknowledged: the broker takes 100-byte messages
    client.publish("t/s", b"y" * 100, 1)
    for _ in range(3):  # the same message in flight at three drops in a row
        run(client, LimitedBroker(600, flap_at=1))
    assert client.refused == 0 and client.outstanding() == 1
    last = LimitedBroker(600)
    run(client, last)
    assert last.delivered == [b"y" * 100] and client.outstanding() == 0


def test_one_drop_is_not_enough() -> None:
    client = MQTTClient("once-311", RingJournal(NorPartition(8), 2048), codec.V311, max_packet=2048)
    client.open()
    client.publish("t/big", b"x" * 700, 1)
    run(client, LimitedBroker(600))
    raised = LimitedBroker(1000)  # the broker's limit raised meanwhile: it goes
    run(client, raised)
    assert client.refused == 0 and raised.delivered == [b"x" * 700]
