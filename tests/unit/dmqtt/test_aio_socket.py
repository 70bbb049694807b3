"""The asyncio face (dmqtt.aio) over a real socket on CPython's asyncio: its tasks wait on the socket (the event
loop's reader and writer, as MicroPython's poll registration does on a board) instead of polling it. An idle
connection leaves the loop asleep; an acknowledgement wakes it at once; a packet the socket cannot take whole
waits for the socket to drain; the keep-alive runs from a timer, and a missing PINGRESP ends the connection."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest

from dmqtt import codec_host as codec
from dmqtt.aio import AsyncClient
from dmqtt.journal_ring import RingJournal
from tests.unit.nor import NorPartition

pytestmark = pytest.mark.usefixtures("micropython_time")


class SocketTransport:
    """The client's end of a socket pair, with the interface of dmqtt.transport.TCPTransport (selectable too)."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.selectable = sock

    def send(self, buf: bytearray, start: int, end: int) -> int:
        try:
            return self.selectable.send(memoryview(buf)[start:end])
        except BlockingIOError:
            return 0

    def readinto(self, buf: bytearray | memoryview) -> int | None:
        try:
            return self.selectable.recv_into(buf)
        except BlockingIOError:
            return None

    def wait(self, timeout_ms: int, writable: bool = False) -> bool:
        import select

        r, w, _ = select.select([] if writable else [self.selectable], [self.selectable] if writable else [], [], 0)
        return bool(r or w)

    def close(self) -> None:
        self.selectable.close()


class BrokerEnd:
    """The broker's end, driven by the test from the event loop: decodes what the client sent, answers."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.decoder = codec.PacketDecoder(codec.V311, 1 << 20)
        self.packets: list[codec.Packet] = []

    async def read(self, until: int, limit_s: float = 5.0) -> list[codec.Packet]:
        """Read until `until` packets have come in all."""
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + limit_s
        while len(self.packets) < until:
            assert time.monotonic() < deadline, f"{len(self.packets)} packets of {until}"
            try:
                data = await asyncio.wait_for(loop.sock_recv(self.sock, 65536), 0.2)
            except TimeoutError:
                continue
            assert data, "the client closed"
            self.packets += list(self.decoder.packets(data))
        return self.packets

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def new_client(**options: object) -> AsyncClient:
    return AsyncClient("aio-sock", RingJournal(NorPartition(8), 512), version=codec.V311, **options)  # type: ignore[arg-type]


async def connected(client: AsyncClient, pair: tuple[socket.socket, socket.socket]) -> BrokerEnd:
    broker = BrokerEnd(pair[1])
    task = asyncio.create_task(client.connect(lambda: SocketTransport(pair[0])))
    await broker.read(1)
    assert broker.packets[0].type == codec.CONNECT
    broker.send(codec.encode_connack(False, 0, codec.V311))
    await asyncio.wait_for(task, 5)
    return broker


def test_an_idle_connection_sleeps_and_an_acknowledgement_wakes_it_at_once(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    async def run() -> tuple[int, float, int]:
        client = new_client(keepalive=60)
        broker = await connected(client, pair)
        await asyncio.sleep(0.1)  # the subscriptions' round and the first reads are over
        before = client.wakes
        await asyncio.sleep(0.5)
        idle_wakes = client.wakes - before
        pid = await client.publish("t/a", b"x", 1)
        packets = await broker.read(2)
        assert packets[1].type == codec.PUBLISH and packets[1].pid == pid
        start = time.monotonic()
        broker.send(codec.encode_ack(codec.PUBACK, pid, 0, codec.V311))
        await asyncio.wait_for(client.wait_idle(), 5)
        latency = time.monotonic() - start
        await client.close()
        return idle_wakes, latency, client.client.published

    idle_wakes, latency, published = asyncio.run(run())
    assert idle_wakes == 0  # a polling connection task (idle_ms 20) wakes 25 times in half a second
    assert published == 1
    assert latency < 1.0  # (a bound for a loaded machine: the wait_for above fails anything stuck)


def test_a_packet_the_socket_cannot_take_whole_goes_once_it_drains(pair: tuple[socket.socket, socket.socket]) -> None:
    pair[0].setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    pair[1].setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)

    async def run() -> tuple[list[codec.Packet], int]:
        client = new_client(keepalive=0, max_packet=1024)
        broker = await connected(client, pair)

        # QoS 0 messages of 900 bytes, the broker not reading: the socket fills, publish() waits without
        # blocking the loop (this coroutine's sleeps still run), and every message goes once the broker reads.
        async def send_all() -> None:
            for i in range(60):
                await client.publish("t/z", bytes([i]) * 900, 0)

        sender = asyncio.create_task(send_all())
        ticks = 0
        while not sender.done() and ticks < 20:
            await asyncio.sleep(0.01)
            ticks += 1
        assert not sender.done(), "the socket took everything: the test needs a fuller buffer"
        packets = await broker.read(1 + 60)
        await asyncio.wait_for(sender, 5)
        await client.close()
        return packets, ticks

    packets, ticks = asyncio.run(run())
    assert ticks == 20  # the loop kept running while the writer waited
    payloads = [bytes(p.payload) for p in packets if p.type == codec.PUBLISH]
    assert sorted(payloads) == sorted(bytes([i]) * 900 for i in range(60))


def test_the_keepalive_runs_from_a_timer_and_a_missing_pingresp_ends_the_connection(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    async def run() -> tuple[list[int], float, str]:
        client = new_client(keepalive=1)
        reasons: list[str] = []
        told = client.client.on_disconnect
        assert told is not None
        client.client.on_disconnect = lambda code, reason: (reasons.append(reason), told(code, reason))  # type: ignore[func-returns-value]
        broker = await connected(client, pair)
        start = time.monotonic()
        await broker.read(2, limit_s=3)  # PINGREQ after 3/4 of the keep-alive, with nothing else sent
        ping_after = time.monotonic() - start
        await asyncio.wait_for(client.down.wait(), 3)  # no PINGRESP within the keep-alive: the connection ends
        types = [p.type for p in broker.packets]
        task = client._task
        client._task = None  # (the test's broker does not take the reconnection: stop the task here)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        await client.close()
        return types, ping_after, reasons[0]

    types, ping_after, error = asyncio.run(run())
    assert types == [codec.CONNECT, codec.PINGREQ]
    assert 0.6 < ping_after < 2.0
    assert "PINGRESP" in error


def test_an_idle_confirming_client_sends_again_what_stays_unconfirmed(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """Confirmation's upkeep runs from the connection task's timer: with nothing arriving on the socket, a message
    acknowledged and never confirmed goes again after timeout_s."""

    async def run() -> list[codec.Packet]:
        client = AsyncClient(
            "aio-sock", RingJournal(NorPartition(8), 512), confirm_topic="confirm/aio-sock", epoch=1, timeout_s=0.3,
            version=codec.V311, keepalive=0,
        )  # fmt: skip
        broker = BrokerEnd(pair[1])
        task = asyncio.create_task(client.connect(lambda: SocketTransport(pair[0])))
        await broker.read(1)
        broker.send(codec.encode_connack(False, 0, codec.V311))
        subscribe = (await broker.read(2))[1]
        assert subscribe.type == codec.SUBSCRIBE and subscribe.topics[0][0] == "confirm/aio-sock"
        broker.send(codec.encode_suback(subscribe.pid, [0], codec.V311))
        await asyncio.wait_for(task, 5)
        pid = await client.publish("sensors/a", b"reading 0", 1)
        await broker.read(3)
        broker.send(codec.encode_ack(codec.PUBACK, pid, 0, codec.V311))
        packets = await broker.read(4, limit_s=5)  # sent again, with no input to wake the reader
        await client.close()
        return packets

    packets = asyncio.run(run())
    again = [p for p in packets if p.type == codec.PUBLISH]
    assert [bytes(p.payload) for p in again] == [b"reading 0", b"reading 0"]


def test_a_connection_without_a_session_subscribes_again_and_reads_its_suback() -> None:
    """The subscriptions are sent again on a connection that finds no session, and their SUBACK is read by the
    connection's reader (before, nothing read while the connection task waited for it: 10 s, then a reconnect)."""
    pairs = [socket.socketpair() for _ in range(2)]
    sockets = iter(pairs)

    async def run() -> tuple[list[codec.Packet], float]:
        client = new_client(keepalive=0)
        broker = BrokerEnd(pairs[0][1])
        task = asyncio.create_task(client.connect(lambda: SocketTransport(next(sockets)[0])))
        await broker.read(1)
        broker.send(codec.encode_connack(False, 0, codec.V311))
        await asyncio.wait_for(task, 5)
        sub = asyncio.create_task(client.subscribe("cmd/x", 1))
        subscribe = (await broker.read(2))[1]
        broker.send(codec.encode_suback(subscribe.pid, [1], codec.V311))
        assert await asyncio.wait_for(sub, 5) == 1
        client.up.clear()
        pairs[0][1].close()  # the broker goes, and comes back without the session
        again = BrokerEnd(pairs[1][1])
        await again.read(1)
        again.send(codec.encode_connack(False, 0, codec.V311))
        resubscribe = (await again.read(2))[1]
        start = time.monotonic()
        again.send(codec.encode_suback(resubscribe.pid, [1], codec.V311))
        await asyncio.wait_for(client.up.wait(), 5)
        took = time.monotonic() - start
        await client.close()
        return again.packets, took

    try:
        packets, took = asyncio.run(run())
    finally:
        for a, b in pairs:
            a.close()
            b.close()
    assert [p.type for p in packets[:2]] == [codec.CONNECT, codec.SUBSCRIBE]
    assert packets[1].topics[0][0] == "cmd/x"
    assert took < 8.0  # read at once, not after the SUBACK timeout (10 s): a margin for a loaded host
