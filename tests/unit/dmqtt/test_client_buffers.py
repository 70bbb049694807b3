"""A PUBLISH sent while its publish() runs is encoded from the application's own topic and payload (no slices of
the journal's record: figure 1's allocation per message); once publish() has returned they are the
application's again, and a message still queued goes out as its record on flash has it. Over a scripted broker
that acknowledges only when told, on an in-memory NOR partition."""

from __future__ import annotations

import pytest

from dmqtt import codec_host as codec
from dmqtt.client import MQTTClient
from dmqtt.journal_ring import RingJournal
from tests.unit.host_client import Broker
from tests.unit.nor import NorPartition

pytestmark = pytest.mark.usefixtures("micropython_time")


def test_buffers_reused_after_publish_returns_never_change_what_is_sent() -> None:
    broker = Broker()
    client = MQTTClient("buffers", RingJournal(NorPartition(6), 256), codec.V311, window=1)
    client.open()
    client.connect(broker)
    topic, payload = bytearray(b"sensors/a/t"), bytearray(b"reading 1")
    first = client.publish(topic, payload, 1)  # sent at once: the window has room
    payload[:] = b"reading 2"
    client.publish(topic, payload, 1)  # queued: the window of 1 is full
    topic[:] = b"sensors/b/t"  # the application reuses both buffers
    payload[:] = b"reading X"
    assert broker.publishes() == [("sensors/a/t", b"reading 1")]
    broker.inbox += codec.encode_ack(codec.PUBACK, first, 0, codec.V311)
    client.poll(1)
    assert broker.publishes() == [("sensors/a/t", b"reading 1"), ("sensors/a/t", b"reading 2")]


def test_a_message_published_offline_goes_out_as_accepted_though_its_buffers_changed() -> None:
    """Accepted while disconnected (the offline queue), sent at the connection: nothing was journaled in
    between, so the record is still in the journal's buffer, but the application's buffers are not its own."""
    broker = Broker()
    client = MQTTClient("buffers", RingJournal(NorPartition(6), 256), codec.V311, window=8)
    client.open()
    topic, payload = bytearray(b"sensors/a/t"), bytearray(b"reading 1")
    client.publish(topic, payload, 1)
    topic[:] = b"sensors/b/t"
    payload[:] = b"reading X"
    client.connect(broker)
    client.poll(1)
    assert broker.publishes() == [("sensors/a/t", b"reading 1")]
