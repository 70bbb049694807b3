"""The client's state as the application reads it (connected, mark, window, retain_cleared): plain attributes kept
up to date where they change (not properties, which slow every attribute store on MicroPython), over a broker in
memory on CPython."""

from __future__ import annotations

import pytest

from dmqtt import codec_host as codec
from dmqtt.client import MQTTClient
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
def test_a_retained_message_to_a_broker_without_retain_goes_out_unretained_and_counted(qos: int) -> None:
    broker = Broker(acking=True, version=codec.V5, connack_props=NO_RETAIN)
    client = MQTTClient("state", RingJournal(NorPartition(6), 256), codec.V5)
    client.open()
    client.connect(broker)
    client.publish(b"t", b"m", qos, retain=True)
    client.poll(1)
    [sent] = [p for p in broker.sent if p.type == codec.PUBLISH]
    assert not sent.retain and client.retain_cleared == 1  # a retained PUBLISH would break [MQTT-3.2.2-14]
