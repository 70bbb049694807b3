"""settle(): how a wake ends before deep sleep (docs/low-power.md). It returns once every QoS 1/2 flow is
acknowledged, or at its deadline with how many are left, after a clean DISCONNECT; what is left stays in the
journal and goes at the next connection, and nothing acknowledged goes again. The confirming client reads the
recorder's retained confirmation first. On CPython over brokers in memory; the asyncio face's on asyncio."""

from __future__ import annotations

import asyncio
import time

import pytest

from dmqtt import codec_host as codec
from dmqtt.aio import AsyncClient
from dmqtt.client import MQTTClient
from dmqtt.confirm import ConfirmingClient
from dmqtt.journal_ring import RingJournal
from host_bridge.recorder.confirmation import Entry, encode
from tests.unit.host_client import Broker
from tests.unit.nor import NorPartition

pytestmark = pytest.mark.usefixtures("micropython_time")


class Holding(Broker):
    """A broker that acknowledges the first `acks` QoS 1 PUBLISH packets and sits on the rest; `hangup_after`: it
    closes the connection once it has had that many packets."""

    def __init__(self, acks: int, hangup_after: int | None = None, present: bool = False) -> None:
        super().__init__()
        if present:
            self.inbox = bytearray(codec.encode_connack(True, 0, codec.V311))
        self.acks = acks
        self.hangup_after = hangup_after

    def hung_up(self) -> bool:
        return self.hangup_after is not None and len(self.sent) >= self.hangup_after and not self.inbox

    def readinto(self, buf: bytearray | memoryview) -> int | None:
        return 0 if self.hung_up() else super().readinto(buf)

    def wait(self, timeout_ms: int, writable: bool = False) -> bool:
        return self.hung_up() or super().wait(timeout_ms, writable)

    def send(self, buf: bytearray, start: int, end: int) -> int:
        for packet in self._decoder.packets(bytes(buf[start:end])):
            self.sent.append(packet)
            if packet.type == codec.PUBLISH and self.acks > 0:
                self.acks -= 1
                self.inbox += codec.encode_ack(codec.PUBACK, packet.pid, 0, codec.V311)
        return end - start

    def of_type(self, ptype: int) -> list[codec.Packet]:
        return [p for p in self.sent if p.type == ptype]


def boot(flash: NorPartition) -> MQTTClient:
    client = MQTTClient("sleeper", RingJournal(flash, 256), codec.V311, window=8)
    client.open()
    return client


def five_readings(acks: int) -> tuple[NorPartition, MQTTClient, Holding]:
    """A wake: five QoS 1 readings published to a broker that acknowledges the first `acks` of them."""
    flash = NorPartition(6)
    client = boot(flash)
    broker = Holding(acks=acks)
    client.connect(broker)
    for n in range(5):
        client.publish(b"sensors/a", b"reading %d" % n, 1)
    return flash, client, broker


def test_settle_returns_once_everything_is_acknowledged_after_a_clean_disconnect() -> None:
    flash, client, broker = five_readings(acks=5)
    began = time.monotonic()
    assert client.settle(60000) == 0
    assert time.monotonic() - began < 30  # it did not wait out its deadline (a bound far from either, for loaded hosts)
    assert len(broker.of_type(codec.DISCONNECT)) == 1 and not client.connected
    assert boot(flash).outstanding() == 0  # the next wake has nothing to send again


def test_what_settle_leaves_at_its_deadline_goes_at_the_next_wake_and_only_that() -> None:
    flash, client, broker = five_readings(acks=2)
    began = time.monotonic()
    assert client.settle(300) == 3
    assert 0.25 < time.monotonic() - began < 30  # it waited for its deadline (the upper bound only bounds a hang)
    assert len(broker.of_type(codec.DISCONNECT)) == 1  # a clean end: the broker keeps the session
    acknowledged = {bytes(p.payload) for p in broker.of_type(codec.PUBLISH)[:2]}

    wake = boot(flash)  # a deep sleep is a reset: the journal says what is left
    assert wake.outstanding() == 3
    again = Holding(acks=3, present=True)
    wake.connect(again)
    assert wake.settle(5000) == 0
    resent = {bytes(p.payload) for p in again.of_type(codec.PUBLISH)}
    assert resent == {b"reading 2", b"reading 3", b"reading 4"} and not resent & acknowledged
    assert all(p.dup for p in again.of_type(codec.PUBLISH))  # the same flows, resent [MQTT-3.3.1-1]


def test_a_connection_lost_while_settling_ends_the_wait_without_an_exception() -> None:
    flash = NorPartition(6)
    client = boot(flash)
    client.connect(Holding(acks=0, hangup_after=3))  # CONNECT and the two PUBLISH packets, then the broker goes
    for n in range(2):
        client.publish(b"sensors/a", b"reading %d" % n, 1)
    began = time.monotonic()
    assert client.settle(60000) == 2 and not client.connected
    assert time.monotonic() - began < 30  # the loss ended the wait, not the deadline
    assert client.settle(100) == 2  # not connected: it says what is left and returns at once
    assert boot(flash).outstanding() == 2


class Recorder(Holding):
    """A broker whose retained confirmation follows the SUBACK of the confirmation topic (when it has one)."""

    def __init__(self, acks: int, retained: bytes | None) -> None:
        super().__init__(acks)
        self.retained = retained

    def send(self, buf: bytearray, start: int, end: int) -> int:
        n = super().send(buf, start, end)
        for packet in self._decoder_tail():
            if packet.type == codec.SUBSCRIBE:
                self.inbox += codec.encode_suback(packet.pid, [0], codec.V311)
                if self.retained is not None:
                    self.inbox += codec.encode_publish("confirm/sleeper", self.retained, 0, 0, retain=True)
        return n

    def _decoder_tail(self) -> list[codec.Packet]:
        seen = getattr(self, "_seen", 0)
        self._seen = len(self.sent)
        return self.sent[seen:]


def confirming(flash: NorPartition, epoch: int) -> ConfirmingClient:
    client = ConfirmingClient("sleeper", RingJournal(flash, 256), "confirm/sleeper", epoch, version=codec.V311)
    client.open()
    return client


def test_the_confirming_client_reads_the_retained_confirmation_and_sends_what_the_store_lacks() -> None:
    flash = NorPartition(8)
    client = confirming(flash, epoch=1)
    client.connect(Holding(acks=4))
    for n in range(4):
        client.publish(b"sensors/a", b"reading %d" % n, 1)
    assert client.settle(2000) == 0 and client.unconfirmed() == 4

    # The next sending wake: the recorder stored seq 0, 1 and 3 of boot 1 and says 2 is missing.
    wake = confirming(flash, epoch=2)
    broker = Recorder(acks=10, retained=encode(7, [Entry(1, 2, 4, ((2, 2),))]))
    wake.connect(broker)
    wake.subscribe("confirm/sleeper", 0)
    assert wake.settle(2000) == 0
    assert [bytes(p.payload) for p in broker.of_type(codec.PUBLISH)] == [b"reading 2"]  # from the journal
    assert wake.session.resent == 1 and len(broker.of_type(codec.DISCONNECT)) == 1


def test_without_a_retained_confirmation_the_confirming_client_waits_only_briefly() -> None:
    client = confirming(NorPartition(8), epoch=1)
    broker = Recorder(acks=1, retained=None)
    client.connect(broker)
    client.subscribe("confirm/sleeper", 0)
    client.publish(b"sensors/a", b"reading 0", 1)
    began = time.monotonic()
    assert client.settle(60000) == 0
    assert 0.4 < time.monotonic() - began < 30  # the half second it gives a confirmation, not the deadline


def test_the_asyncio_pattern_of_docs_low_power_journals_offline_then_sends_at_a_later_wake() -> None:
    """docs/low-power.md's asyncio pattern: a sampling wake publishes with no connection and closes; the sending
    wake connects and settles, and everything journaled goes once."""
    flash = NorPartition(6)

    async def wake(reading: int, sending: bool) -> tuple[int, Holding | None]:
        client = AsyncClient("sleeper", RingJournal(flash, 256), idle_ms=2, version=codec.V311, keepalive=0)
        await client.publish(b"sensors/a", b"reading %d" % reading, 1)  # journaled, no connection
        if not sending:
            await client.close()
            return client.client.outstanding(), None
        broker = Holding(acks=10)
        await asyncio.wait_for(client.connect(lambda: broker), 5)
        return await client.settle(5000), broker

    assert asyncio.run(wake(0, False))[0] == 1
    assert asyncio.run(wake(1, False))[0] == 2
    left, broker = asyncio.run(wake(2, True))
    assert left == 0 and broker is not None
    assert [bytes(p.payload) for p in broker.of_type(codec.PUBLISH)] == [b"reading 0", b"reading 1", b"reading 2"]


def test_the_asyncio_face_settles_as_the_blocking_one_does() -> None:
    flash = NorPartition(6)

    async def wake(acks: int, publish: int, present: bool, timeout_ms: int) -> tuple[int, Holding]:
        broker = Holding(acks=acks, present=present)
        client = AsyncClient("sleeper", RingJournal(flash, 256), idle_ms=2, version=codec.V311, keepalive=0)
        await client.connect(lambda: broker)
        for n in range(publish):
            await client.publish(b"sensors/a", b"reading %d" % n, 1)
        return await client.settle(timeout_ms), broker

    left, broker = asyncio.run(wake(acks=1, publish=3, present=False, timeout_ms=300))
    assert left == 2 and len(broker.of_type(codec.DISCONNECT)) == 1
    left, broker = asyncio.run(wake(acks=2, publish=0, present=True, timeout_ms=5000))
    assert left == 0 and [bytes(p.payload) for p in broker.of_type(codec.PUBLISH)] == [b"reading 1", b"reading 2"]


def aio_confirming(flash: NorPartition, epoch: int, timeout_s: float = 30) -> AsyncClient:
    return AsyncClient(
        "sleeper", RingJournal(flash, 256), idle_ms=2, confirm_topic="confirm/sleeper", epoch=epoch,
        timeout_s=timeout_s, version=codec.V311, keepalive=0,
    )  # fmt: skip


def test_the_asyncio_face_confirms_as_the_blocking_one_reads_the_retained_confirmation_and_resends_the_gap() -> None:
    flash = NorPartition(8)

    async def first_wake() -> tuple[int, int]:
        client = aio_confirming(flash, epoch=1)
        await client.connect(lambda: Recorder(acks=4, retained=None))
        for n in range(4):
            await client.publish(b"sensors/a", b"reading %d" % n, 1)
        return await client.settle(2000), client.unconfirmed()

    assert asyncio.run(first_wake()) == (0, 4)  # acknowledged, never confirmed: kept in the journal

    async def second_wake() -> tuple[int, Recorder, AsyncClient]:
        # The recorder stored seq 0, 1 and 3 of boot 1 and says 2 is missing; the client subscribes by itself.
        client = aio_confirming(flash, epoch=2)
        broker = Recorder(acks=10, retained=encode(7, [Entry(1, 2, 4, ((2, 2),))]))
        await client.connect(lambda: broker)
        return await client.settle(2000), broker, client

    left, broker, client = asyncio.run(second_wake())
    assert left == 0
    assert [p.topics[0][0] for p in broker.of_type(codec.SUBSCRIBE)] == ["confirm/sleeper"]
    assert [bytes(p.payload) for p in broker.of_type(codec.PUBLISH)] == [b"reading 2"]  # from the journal
    assert client.client.session.resent == 1 and len(broker.of_type(codec.DISCONNECT)) == 1


def test_the_asyncio_face_sends_again_what_stays_unconfirmed_past_its_timeout_and_a_cut_keeps_it() -> None:
    flash = NorPartition(8)

    async def wake() -> tuple[Recorder, int]:
        client = aio_confirming(flash, epoch=1, timeout_s=0.3)
        broker = Recorder(acks=10, retained=None)
        await client.connect(lambda: broker)
        for n in range(2):
            await client.publish(b"sensors/a", b"reading %d" % n, 1)
        deadline = time.monotonic() + 5
        while len(broker.of_type(codec.PUBLISH)) < 4:  # each sent, acknowledged, unconfirmed: sent again
            assert time.monotonic() < deadline, [bytes(p.payload) for p in broker.of_type(codec.PUBLISH)]
            await asyncio.sleep(0.01)
        unconfirmed = client.unconfirmed()
        client._task.cancel()  # a power cut: nothing more is written
        return broker, unconfirmed

    broker, unconfirmed = asyncio.run(wake())
    assert (
        sorted(bytes(p.payload) for p in broker.of_type(codec.PUBLISH))[:4] == [b"reading 0"] * 2 + [b"reading 1"] * 2
    )
    assert unconfirmed == 2
    # After the cut the journal still holds both: the recorder's confirmation of seq 0 leaves only seq 1 to send.

    async def after_cut() -> Recorder:
        client = aio_confirming(flash, epoch=2)
        broker = Recorder(acks=10, retained=encode(8, [Entry(1, 1, 2, ((1, 1),))]))
        await client.connect(lambda: broker)
        await client.settle(2000)
        return broker

    assert [bytes(p.payload) for p in asyncio.run(after_cut()).of_type(codec.PUBLISH)] == [b"reading 1"]
