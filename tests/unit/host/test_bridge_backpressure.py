"""The bridge under a broker that stops reading: what the broker's socket does not take waits in a bounded
queue, the board's link keeps being served (the bridge never blocks on the broker), back-pressure reaches the
board through the link's flow control, and once the broker reads again every byte arrives, in order."""

from __future__ import annotations

from dlink import frame
from dlink.link import Link
from host_bridge.bridge.relay import DOWN_QUEUE_MAX, BoardPort, BoardSession
from host_bridge.net import Destination
from tests.unit.dlink.test_link import Line


class StalledSocket:
    """A broker connection whose peer reads only while `reading` is set."""

    def __init__(self) -> None:
        self.reading = False
        self.received = bytearray()

    def send(self, data: bytes | bytearray) -> int:
        if not self.reading:
            raise BlockingIOError(11, "would block")
        self.received += data
        return len(data)

    def close(self) -> None:
        pass


def test_a_broker_that_stops_reading_never_blocks_the_bridge_and_loses_nothing() -> None:
    board, bridge_end = Link(1), Link(2)
    line = Line(board, bridge_end, baud=921600)
    line.run(100)
    session = BoardSession(BoardPort("b", "/dev/null"), Destination("127.0.0.1", 1883), frozenset())
    sock = StalledSocket()
    session._link, session._tcp = bridge_end, sock  # type: ignore[assignment]
    data = bytes(i * 7 % 251 for i in range(3 * DOWN_QUEUE_MAX))
    sent = 0
    buf = bytearray(4096)

    def step() -> None:
        nonlocal sent
        if sent < len(data) and board.can_send():
            sent += board.send(frame.MQTT, data[sent : sent + 512])
        line.step()
        session._downstream(buf)  # what the bridge's loop does each round; it must return at once

    for _ in range(20000):  # 20 s of line time with the broker not reading
        step()
    assert len(session._pending_down) >= DOWN_QUEUE_MAX and session.counters["broker_stalls"] == 1
    assert len(session._pending_down) < DOWN_QUEUE_MAX + len(buf)  # bounded: the rest waits in the link
    assert sent < len(data), "the board was not held back"
    assert bridge_end.up and board.up  # the link itself was served all along
    sock.reading = True
    for _ in range(20000):
        step()
        if sock.received == data:
            break
    assert bytes(sock.received) == data
    assert session._pending_down == bytearray()
