"""The asyncio face (dmqtt.aio) on CPython's asyncio, over a scripted peer: incoming messages are acknowledged
when the application is done with them (QoS 2: PUBCOMP waits for the body of the `async for`; a power cut before
that brings the message again, dup set), a transport that takes a packet in pieces never blocks the event loop,
and a full window makes publish() wait without blocking it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from dmqtt import aio
from dmqtt import codec_host as codec
from dmqtt.aio import AsyncClient
from dmqtt.journal_ring import RingJournal
from tests.unit.host_client import ScriptedInbox
from tests.unit.nor import NorPartition

pytestmark = pytest.mark.usefixtures("micropython_time")


class Peer(ScriptedInbox):
    """The broker's side of a transport, in memory: what the client sent, decoded; what the test queues, read by
    the client. `chunk`: the most bytes one send() takes (a slow serial link takes a packet in pieces)."""

    def __init__(self, session_present: bool = False, chunk: int = 1 << 20) -> None:
        super().__init__(codec.encode_connack(session_present, 0, codec.V311))
        self.sent: list[codec.Packet] = []
        self.sends = 0
        self.chunk = chunk
        self.budget = chunk  # bytes send() takes until the next wait(): the line moves between polls
        self.closed = False
        self.hung_up = False  # the broker closed its end: the client reads end of stream
        self._decoder = codec.PacketDecoder(codec.V311, 1 << 16)

    def send(self, buf: bytearray, start: int, end: int) -> int:
        if self.closed:
            raise OSError("closed")
        self.sends += 1
        n = min(end - start, self.budget)
        self.budget -= n
        self.sent += list(self._decoder.packets(bytes(buf[start : start + n])))
        return n

    def readinto(self, buf: bytearray | memoryview) -> int | None:
        return 0 if self.hung_up else super().readinto(buf)

    def wait(self, timeout_ms: int, writable: bool = False) -> bool:
        self.budget = self.chunk
        return writable or bool(self.inbox) or self.hung_up

    def close(self) -> None:
        self.closed = True

    def of_type(self, ptype: int) -> list[codec.Packet]:
        return [p for p in self.sent if p.type == ptype]

    def publish(self, pid: int, payload: bytes, qos: int = 2) -> None:
        self.inbox += codec.encode_publish("cmd/a", payload, qos, pid)

    def ack(self, ptype: int, pid: int) -> None:
        self.inbox += codec.encode_ack(ptype, pid, 0, codec.V311)


async def until(condition: object, limit_s: float = 5.0) -> None:
    """Wait on the event loop until condition() holds."""
    deadline = time.monotonic() + limit_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.001)


@pytest.fixture
def flash() -> Iterator[NorPartition]:
    yield NorPartition(8)


def new_client(flash: NorPartition) -> AsyncClient:
    return AsyncClient("aio", RingJournal(flash, 512), idle_ms=2, version=codec.V311, keepalive=0)


def test_qos2_is_done_when_the_loop_body_returns_and_comes_again_after_a_cut(flash: NorPartition) -> None:
    async def first_boot() -> list[tuple[bytes, bool]]:
        peer = Peer()
        client = new_client(flash)
        await client.connect(lambda: peer)
        peer.publish(7, b"open valve")
        got = []
        async for _topic, payload, _qos, _retain, dup in client.messages():
            got.append((payload, dup))
            await until(lambda: peer.of_type(codec.PUBREC))  # acknowledged on arrival: the broker releases it
            peer.ack(codec.PUBREL, 7)
            await asyncio.sleep(0.05)
            # Still in the body: the application holds the message, so PUBCOMP waits.
            assert not peer.of_type(codec.PUBCOMP), "PUBCOMP before the application was done"
            break  # a power cut here: the body never came back
        return got

    assert asyncio.run(first_boot()) == [(b"open valve", False)]

    async def second_boot() -> list[tuple[bytes, bool]]:
        peer = Peer(session_present=True)
        client = new_client(flash)  # the same flash: the journal holds the message, not handled
        await client.connect(lambda: peer)
        got = []
        async for _topic, payload, _qos, _retain, dup in client.messages():
            got.append((payload, dup))
            if len(got) == 2:
                break
            peer.ack(codec.PUBREL, 7)  # the broker resends PUBREL after the reconnect [MQTT-4.4.0-1]
            await asyncio.sleep(0.05)
            assert not peer.of_type(codec.PUBCOMP)
            peer.publish(8, b"close valve")
        await until(lambda: peer.of_type(codec.PUBREC))
        # The first message is done (the loop came back for the second): released, PUBCOMP sent.
        assert [p.pid for p in peer.of_type(codec.PUBCOMP)] == [7]
        await client.close()
        return got

    # Again after the cut, flagged dup; then the next message, once.
    assert asyncio.run(second_boot()) == [(b"open valve", True), (b"close valve", False)]


def test_qos1_is_acknowledged_only_when_the_application_is_done(flash: NorPartition) -> None:
    async def run() -> None:
        peer = Peer()
        client = new_client(flash)
        await client.connect(lambda: peer)
        peer.publish(3, b"a", qos=1)
        peer.publish(4, b"b", qos=1)
        messages = client.messages()
        topic, payload, qos, _retain, _dup = await messages.__anext__()
        assert (topic, payload, qos) == ("cmd/a", b"a", 1)
        await asyncio.sleep(0.05)
        assert not peer.of_type(codec.PUBACK), "PUBACK before the application was done"
        await messages.__anext__()
        await until(lambda: peer.of_type(codec.PUBACK))
        assert [p.pid for p in peer.of_type(codec.PUBACK)] == [3]
        await client.close()

    asyncio.run(run())


def test_a_transport_that_takes_packets_in_pieces_never_blocks_the_loop(flash: NorPartition) -> None:
    async def run() -> int:
        peer = Peer(chunk=7)  # a few bytes per poll, as a serial link with a full window takes them
        client = new_client(flash)
        await client.connect(lambda: peer)
        interleaved = 0  # ticks of another task that ran while a packet was half sent
        stop = False

        async def ticker() -> None:
            nonlocal interleaved
            while not stop:
                await asyncio.sleep(0)
                interleaved += client.client.tx_tail != client.client.tx_end

        task = asyncio.create_task(ticker())
        pids = [await client.publish(b"t/x", b"y" * 100, 1) for _ in range(5)]
        await until(lambda: len(peer.of_type(codec.PUBLISH)) == 5)
        for pid in pids:
            peer.ack(codec.PUBACK, pid)
        await client.wait_idle()
        stop = True
        await task
        publishes = peer.of_type(codec.PUBLISH)
        # Whole and in order, though each went out in 17 pieces.
        assert [p.payload for p in publishes] == [b"y" * 100] * 5 and [p.pid for p in publishes] == pids
        await client.close()
        return interleaved

    assert asyncio.run(run()) >= 5 * 10


def test_a_connection_lost_with_a_packet_half_sent_is_made_again_when_its_timer_fires_at_once(
    flash: NorPartition, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection task waits for the connection's end or its next timer, whichever comes first. Under load
    both come in one round of the scheduler, and the timer wins: the task runs the timer's upkeep on a connection
    that has just ended, with a packet half sent. The task must go on to reconnect, not die."""

    async def both_at_once(awaitable: object, ms: int) -> None:
        await awaitable  # type: ignore[misc]
        raise TimeoutError  # the timer fired in the same round

    async def run() -> list[codec.Packet]:
        # The first takes nothing at first (its CONNACK is scripted), then 7 bytes a poll: a packet stays half sent.
        first, second = Peer(chunk=0), Peer()
        peers = [first, second]
        client = new_client(flash)
        monkeypatch.setattr(aio, "_within", both_at_once)
        await client.connect(lambda: peers.pop(0))
        first.budget = first.chunk = 7
        pid = await client.publish(b"t/x", b"y" * 100, 1)
        await until(lambda: client.client.tx_tail not in (0, client.client.tx_end))
        first.hung_up = True  # the broker goes away with the PUBLISH half sent
        await until(lambda: client.client.connects == 2)
        await until(lambda: len(second.of_type(codec.PUBLISH)) == 1)
        second.ack(codec.PUBACK, pid)
        await client.wait_idle()
        await client.close()
        return second.of_type(codec.PUBLISH)

    [again] = asyncio.run(run())
    assert again.payload == b"y" * 100  # sent whole on the new connection


def test_a_connection_attempt_that_runs_out_of_heap_is_made_again(flash: NorPartition) -> None:
    """The connection's steps allocate (a transport, a socket): a MemoryError there fails that attempt, as a
    refused connection does, and the task tries again after its backoff instead of ending for good."""

    async def run() -> tuple[int, str]:
        peer = Peer()
        attempts = []

        def factory() -> Peer:
            attempts.append(1)
            if len(attempts) == 1:
                raise MemoryError("memory allocation failed, allocating 464 bytes")
            return peer

        client = new_client(flash)
        await asyncio.wait_for(client.connect(factory), 5)
        error = client.last_error  # why the attempt before failed
        pid = await client.publish(b"t/x", b"y", 1)
        await until(lambda: len(peer.of_type(codec.PUBLISH)) == 1)
        peer.ack(codec.PUBACK, pid)
        await client.wait_idle()
        await client.close()
        return len(attempts), error

    attempts, error = asyncio.run(run())
    assert attempts == 2 and "464 bytes" in error


def test_a_message_that_runs_the_heap_out_as_it_arrives_ends_the_connection_and_comes_again(
    flash: NorPartition,
) -> None:
    """Taking in what came allocates (an incoming message's topic and payload). A MemoryError there ends the
    connection, as a lost one does; the broker sends the message again on the next one. The reader must not end
    alone, which would leave the connection open and deaf."""

    class Starved(Peer):
        def readinto(self, buf: bytearray | memoryview) -> int | None:
            if self.inbox.startswith(b"\x32"):  # a QoS 1 PUBLISH is next: the heap has no room for it
                raise MemoryError("memory allocation failed, allocating 464 bytes")
            return super().readinto(buf)

    async def run() -> list[tuple[bytes, bool]]:
        first, second = Starved(), Peer(session_present=True)
        peers = [first, second]
        client = new_client(flash)
        await client.connect(lambda: peers.pop(0))
        first.inbox += codec.encode_publish("cmd/a", b"open", 1, 7)
        got = []
        await until(lambda: client.client.connects == 2)
        second.inbox += codec.encode_publish("cmd/a", b"open", 1, 7, dup=True)  # the broker's redelivery
        async for _topic, payload, _qos, _retain, dup in client.messages():
            got.append((payload, dup))
            break
        await client.close()
        return got

    assert asyncio.run(run()) == [(b"open", True)]


def test_publish_waits_for_a_free_slot_without_blocking_the_loop(flash: NorPartition) -> None:
    async def run() -> None:
        peer = Peer()
        client = AsyncClient("aio", RingJournal(flash, 512), idle_ms=2, version=codec.V311, keepalive=0, max_messages=2)
        await client.connect(lambda: peer)
        await client.publish(b"t/x", b"1", 1)
        await client.publish(b"t/x", b"2", 1)
        third = asyncio.create_task(client.publish(b"t/x", b"3", 1))
        await asyncio.sleep(0.05)
        assert not third.done(), "a third message needs a free slot"
        first = peer.of_type(codec.PUBLISH)[0].pid
        peer.ack(codec.PUBACK, first)
        await asyncio.wait_for(third, 5)
        await until(lambda: len(peer.of_type(codec.PUBLISH)) == 3)
        await client.close()
        assert peer.of_type(codec.DISCONNECT), "close() ends with DISCONNECT"

    asyncio.run(run())


class AckingPeer(Peer):
    """A peer that acknowledges every QoS 1 PUBLISH as soon as it is sent."""

    def send(self, buf: bytearray, start: int, end: int) -> int:
        before = len(self.sent)
        n = super().send(buf, start, end)
        for packet in self.sent[before:]:
            if packet.type == codec.PUBLISH:
                self.ack(codec.PUBACK, packet.pid)
        return n


class TendedRing(RingJournal):
    """The ring journal, counting its idle-time work."""

    tended = 0

    def tend(self) -> None:
        self.tended += 1
        super().tend()


def test_an_idle_connection_task_opens_and_erases_the_ring_ahead_of_publish() -> None:
    """The connection task does the ring's idle-time work (RingJournal.tend) when nothing is in flight, so an
    `await publish()` programs its record and nothing else: no sector erase (45 ms with an ESP32's flash cache
    off, every task stopped), no header or META snapshot of a sector opened on its path."""
    flash = NorPartition(6)

    async def run() -> tuple[int, int]:
        journal = TendedRing(flash, 512)
        client = AsyncClient("aio", journal, idle_ms=1, version=codec.V311, keepalive=0)
        await client.connect(AckingPeer)
        erases = most_programs = 0
        for n in range(300):  # 200-byte messages: about 19 to a sector, the 6-sector ring wraps twice
            tended = journal.tended
            await until(lambda t=tended: journal.tended > t)  # the application idles, as a sensor between readings
            before, programs = flash.erases, flash.ops - flash.erases
            await client.publish(b"sensors/aio/t", b"%05d" % n + b"x" * 195, 1)
            erases += flash.erases - before
            most_programs = max(most_programs, flash.ops - flash.erases - programs)
            await client.wait_idle()
        await client.close()
        return erases, most_programs

    erases, most_programs = asyncio.run(run())
    assert flash.erases >= 10 and (erases, most_programs) == (0, 1), (flash.erases, erases, most_programs)
