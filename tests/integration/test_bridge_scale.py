"""The bridge at the scale its figure measures (tools/bench_bridge_alone.py: 256 synthetic boards), in the ways a
test can hold without that many boards."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from host_bridge.bridge.relay import BoardPort, BoardSession
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.net import Destination
from tools.synthetic_boards import Fleet


def test_a_board_served_on_descriptors_past_1024_is_relayed(tmp_path: Path) -> None:
    """A bridge of 256 boards holds more than 1,024 descriptors (each port with pyserial's two pipes, each board's
    TCP connection): select() refuses those from 1024 on, and a board served on one lost its relay (found by the
    bridge's figure at 256 boards). The board here is served on descriptors past 1024."""
    ballast = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        with Mosquitto(tmp_path / "broker") as broker:
            fleet = Fleet(1, interval_ms=20, count=20, tag="fd")
            board = fleet.boards[0]
            destination = Destination.parse(broker.address)
            session = BoardSession(BoardPort(board.name, board.port), destination, frozenset({destination}))
            relay = threading.Thread(target=session.run)
            relay.start()
            try:
                assert fleet.run(60), f"{board.acked} of {board.count} acknowledged"
            finally:
                session.stop.set()
                relay.join(10)
                fleet.close()
        assert max(ballast) > 1024 and session.counters["connects"] == 1
    finally:
        for fd in ballast:
            os.close(fd)
