"""The client's state as the application reads it (connected, mark, window, retain_cleared): plain attributes kept
up to date where they change (not properties, which slow every attribute store on MicroPython), over a broker in
memory on CPython."""

from __future__ import annotations

import pytest

from dmqtt import codec_host as codec
from dmqtt.client import MQTTClient
from dmqtt.errors import MQTTError, PublishRefused
from dmqtt.journal_ring import RingJournal
from tests.unit.host_client import Broker
from tests.unit.nor import NorPartition

pytestmark = pytest.mark.usefixtures("micropython_time")

NO_RETAIN = {codec.RETAIN_AVAILABLE: 0, codec.RECEIVE_MAXIMUM: 3}


def test_connected_window_and_mark_follow_the_connection_and_the_journal() -> None:
    flash = NorPartition(6)
    client = MQTTClient("state", RingJournal(flash, 256), codec.V5, window="auto", max_messages=8)
    client.open()
    assert not client.connected and client.mark == 0 and client.window == 8
    client.connect(Broker(acking=True, version=codec.V5, connack_props=NO_RETAIN))
    assert client.connected and client.window == 3  # the broker's Receive Maximum [MQTT-3.3.4-7]
    client.publish(b"t", b"m", 1, mark=7)
    assert client.mark == 7
    client.publish(b"t", b"m", 0, mark=9)  # QoS 0: the mark has a record of its own
    assert client.mark == 9
    client.close()
    assert not client.connected
    again = MQTTClient("state", RingJournal(flash, 256), codec.V5)
    again.open()
    assert again.mark == 9  # journaled: it survives the reboot


@pytest.mark.parametrize("qos", [0, 1])
def test_the_mark_and_the_outstanding_count_before_open_read_the_journal(qos: int) -> None:
    """A -1 or a 0 read before open() would number an application's readings from nowhere, or say nothing waits
    while the journal holds messages: reading either opens the journal first."""
    flash = NorPartition(6)
    first = MQTTClient("state", RingJournal(flash, 256), codec.V5)
    first.open()
    for mark in (40, 41):
        first.publish(b"t", b"m", 1, mark=mark)  # the last run stopped at reading 41, two messages unacknowledged
    first.close()
    again = MQTTClient("state", RingJournal(flash, 256), codec.V5)
    assert again.mark == 41
    if qos:
        again.publish(b"t", b"m", qos, mark=again.mark + 1)
    assert again.outstanding() == 2 + qos
    counted = MQTTClient("state", RingJournal(flash, 256), codec.V5)
    assert counted.outstanding() == 2 + qos and counted.mark == 41 + qos


@pytest.mark.parametrize("qos", [0, 1])
def test_a_retained_message_to_a_broker_without_retain_goes_out_unretained_and_counted(qos: int) -> None:
    broker = Broker(acking=True, version=codec.V5, connack_props=NO_RETAIN)
    client = MQTTClient("state", RingJournal(NorPartition(6), 256), codec.V5)
    client.open()
    client.connect(broker)
    client.publish(b"t", b"m", qos, retain=True)
    client.poll(1)
    [sent] = [p for p in broker.sent if p.type == codec.PUBLISH]
    assert not sent.retain and client.retain_cleared == 1  # a retained PUBLISH would break [MQTT-3.2.2-14]


def test_a_topic_buffer_changed_since_the_last_publish_is_checked_again() -> None:
    """publish() checks a topic once while it is the same bytes or str object; a bytearray may change between
    calls, so it is checked every time."""
    broker = Broker(acking=True)
    client = MQTTClient("state", RingJournal(NorPartition(6), 256), codec.V311)
    client.open()
    client.connect(broker)
    topic = bytearray(b"sensors/a")
    client.publish(topic, b"m", 1)
    topic[-1:] = b"#"
    with pytest.raises(PublishRefused):
        client.publish(topic, b"m", 1)  # a wildcard in a topic name [MQTT-3.3.2-2]
    text = "sensors/b"
    client.publish(text, b"m", 0)
    client.publish(text, b"m", 0)
    assert [p.topic for p in broker.sent if p.type == codec.PUBLISH] == ["sensors/a", "sensors/b", "sensors/b"]
    assert client.refused == 1


@pytest.mark.parametrize("qos", [0, 1])
def test_a_publish_exactly_the_brokers_maximum_packet_size_goes_and_one_byte_more_is_refused(qos: int) -> None:
    broker = Broker(acking=True, version=codec.V5, connack_props={codec.MAXIMUM_PACKET_SIZE: 50})
    client = MQTTClient("state", RingJournal(NorPartition(6), 256), codec.V5)
    client.open()
    client.connect(broker)
    fits = 50 - codec.publish_size(len(b"t"), 0, qos, codec.V5)
    client.publish(b"t", b"x" * fits, qos)
    with pytest.raises(PublishRefused) as refused:
        client.publish(b"t", b"x" * (fits + 1), qos)  # [MQTT-3.2.2-15]
    assert refused.value.code == codec.PACKET_TOO_LARGE
    client.poll(1)
    [sent] = [p for p in broker.sent if p.type == codec.PUBLISH]
    assert len(sent.payload) == fits


def test_running_out_of_heap_while_sending_ends_the_connection_and_the_next_one_sends_everything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reconnect's resends are encoded in one burst; when the heap cannot take a step of it (MemoryError), the
    packets taken from the session's queues so far were never sent. The connection ends as a lost one does
    (MQTTError, which every caller already handles), and the next connection sends every flow again. A publish()
    whose message is journaled returns its packet id though the send failed."""
    client = MQTTClient("heap", RingJournal(NorPartition(6), 256), codec.V311)
    client.open()
    offline = [client.publish(b"t", b"m%d" % i, 1) for i in range(3)]  # journaled while offline
    session = client.session
    real = session.next_packet
    failures = [1]

    def short_of_heap(buf: bytearray, at: int = 0) -> int:
        if at and failures[0]:  # the second packet of the burst: the first is encoded, and dequeued
            failures[0] -= 1
            raise MemoryError("memory allocation failed, allocating 464 bytes")
        return real(buf, at)

    monkeypatch.setattr(session, "next_packet", short_of_heap)
    first = Broker()
    with pytest.raises(MQTTError, match="out of heap"):
        client.connect(first)
    assert not client.connected and client.transport is None
    assert first.publishes() == []  # nothing of the burst went out
    second = Broker(acking=True)
    client.connect(second)
    client.poll(1)
    assert [p.pid for p in second.sent if p.type == codec.PUBLISH] == offline
    failures[0] = 1
    pid = client.publish(b"t", b"late", 1)  # its burst fails as the first's did
    assert pid and not client.connected  # accepted: it is journaled, though its send failed
    third = Broker(acking=True)
    client.connect(third)
    client.poll(1)
    assert [(p.pid, p.payload) for p in third.sent if p.type == codec.PUBLISH] == [(pid, b"late")]
    assert client.session.outstanding() == 0
