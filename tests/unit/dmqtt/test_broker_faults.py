"""A broker that breaks a promise is named, not waited on (docs/brokers.md): a Maximum QoS below a journaled
message's QoS, and a CONNACK its version forbids, end the connection with an MQTTError that says what the broker
did and what to do; the journal keeps every message. Over a broker in memory on CPython (the acknowledgement
rules are tested on the wire: tests/integration/test_client_wire.py)."""

from __future__ import annotations

import pytest

from dmqtt import codec_host as codec
from dmqtt.client import MQTTClient
from dmqtt.errors import MQTTError
from dmqtt.journal_ring import RingJournal
from tests.unit.host_client import Broker
from tests.unit.nor import NorPartition

pytestmark = pytest.mark.usefixtures("micropython_time")


def client_with(flash: NorPartition, version: int = codec.V5, **options: object) -> MQTTClient:
    client = MQTTClient("faults", RingJournal(flash, 256), version, max_messages=8, **options)  # type: ignore[arg-type]
    client.open()
    return client


def kinds(broker: Broker) -> list[int]:
    return [p.type for p in broker.sent]


@pytest.mark.parametrize(("max_qos", "qos"), [(1, 2), (0, 1), (0, 2)])
def test_a_maximum_qos_below_a_journaled_message_is_said_before_anything_is_sent(max_qos: int, qos: int) -> None:
    flash = NorPartition(6)
    client = client_with(flash)
    client.publish(b"t", b"one", qos)  # offline: journaled
    client.publish(b"t", b"two", qos)
    broker = Broker(version=codec.V5, connack_props={codec.MAXIMUM_QOS: max_qos})
    with pytest.raises(MQTTError) as raised:
        client.connect(broker)
    said = str(raised.value)
    assert f"the broker's Maximum QoS is {max_qos} and journaled messages ask QoS {qos}" in said, said
    # Nothing of them sent, at their QoS or lower [MQTT-3.2.2-11]; 5.0: DISCONNECT, Implementation specific error.
    assert kinds(broker) == [codec.CONNECT, codec.DISCONNECT] and broker.sent[1].reason == 0x83
    assert not client.connected and client.connect_failures == 1
    assert client.outstanding() == 2  # the journal keeps both
    fine = Broker(acking=True, version=codec.V5)
    client.connect(fine)
    assert [(p.qos, bytes(p.payload)) for p in fine.sent if p.type == codec.PUBLISH] == [(qos, b"one"), (qos, b"two")]


def test_a_message_above_the_maximum_qos_published_while_connected_is_journaled_and_ends_the_connection() -> None:
    client = client_with(NorPartition(6))
    disconnects: list[tuple[int | None, str]] = []
    client.on_disconnect = lambda code, reason: disconnects.append((code, reason))
    broker = Broker(acking=True, version=codec.V5, connack_props={codec.MAXIMUM_QOS: 1})
    client.connect(broker)
    client.publish(b"t", b"qos1", 1)  # within the broker's limit: sent and acknowledged
    client.poll(0)
    assert client.outstanding() == 0
    pid = client.publish(b"t", b"qos2", 2)  # accepted (journaled): publish() says so, and the connection ends
    assert pid and not client.connected and client.outstanding() == 1
    assert [p.qos for p in broker.sent if p.type == codec.PUBLISH] == [1]  # never sent at QoS 1 instead
    assert broker.sent[-1].type == codec.DISCONNECT and broker.sent[-1].reason == 0x83
    assert disconnects == [(0x83, disconnects[0][1])] and "ask QoS 2" in disconnects[0][1]


def test_a_31_connack_to_a_50_connect_says_the_broker_does_not_speak_50() -> None:
    client = client_with(NorPartition(6))
    broker = Broker(version=codec.V5)
    broker.inbox = bytearray(codec.encode_connack(False, 1, codec.V311))  # 0x01: unacceptable protocol version
    said = (
        r"^CONNACK reason code 0x01 is not allowed \(1 to 5 are MQTT 3\.1\.1's refusals: a broker that does not speak"
    )
    with pytest.raises(MQTTError, match=said):
        client.connect(broker)
    assert not client.connected


def test_a_50_connack_to_a_311_connect_ends_the_attempt() -> None:
    client = client_with(NorPartition(6), codec.V311)
    broker = Broker(version=codec.V311)
    broker.inbox = bytearray(codec.encode_connack(False, 0, codec.V5, {codec.MAXIMUM_QOS: 1}))
    with pytest.raises(MQTTError, match="unexpected bytes at the end of the packet"):
        client.connect(broker)
    assert not client.connected
