"""The virtual board's own events, on which a test schedules its disturbances (a power cut, an access point
outage) instead of on host seconds: the board acts at the event itself (host_bridge/vboard/shims/vboard_state.py),
so a loaded host makes the run slower, never the disturbance land elsewhere. docs/virtual-board.md lists them."""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass

from host_bridge.errors import VBoardError

# Each event, where the board acts on it.
BOARD_EVENTS = {
    "accepted": "right after the board prints an `accepted` line (publish() returned a QoS 1/2 message)",
    "journal": "right after a program of the journal's partition completes (a journal record written)",
    "wake": "as a wake from deep sleep begins, before boot.py",
    "join": "inside a WiFi join: the station has started it and not yet associated",
    "joined": "right after the station associates with the access point",
    "connect": "inside a TCP connect of the station (to the broker), before the access point relays it",
    "send": "inside an ESP-NOW send: the frame is about to go on the air",
}


def check_event(name: str) -> None:
    if name not in BOARD_EVENTS:
        raise VBoardError(f"no board event {name!r}: the events are {', '.join(BOARD_EVENTS)}")


@dataclass(frozen=True)
class EventSpec:
    """The nth `event` of a board's life (counted from 1)."""

    event: str
    n: int = 1

    @classmethod
    def parse(cls, text: str) -> EventSpec:
        """From EVENT or EVENT#N (`joined`, `accepted#40`, `join#5`)."""
        name, sep, count = text.partition("#")
        check_event(name)
        try:
            n = int(count) if sep else 1
        except ValueError:
            n = 0
        if n < 1:
            raise VBoardError(f"an event is EVENT or EVENT#N with N from 1 (e.g. accepted#40), not {text!r}")
        return cls(name, n)

    def __str__(self) -> str:
        return self.event if self.n == 1 else f"{self.event}#{self.n}"


class Hold:
    """A board waiting at an event (AccessPoint.hold_at) until release(): `reached` is set when it gets there."""

    def __init__(self, on: EventSpec) -> None:
        self.on = on
        self.reached = threading.Event()
        self._lock = threading.Lock()
        self._board: socket.socket | None = None
        self._released = False

    def reach(self, board: socket.socket) -> None:
        with self._lock:
            self._board = board
            self.reached.set()
            if self._released:
                self._answer()

    def release(self) -> None:
        """The board goes on (at once, if it has not reached the event yet, when it does)."""
        with self._lock:
            self._released = True
            if self._board is not None:
                self._answer()

    def _answer(self) -> None:
        assert self._board is not None
        with contextlib.suppress(OSError):
            self._board.sendall(b"\x00")
        with contextlib.suppress(OSError):
            self._board.close()
        self._board = None


def read_report(listener: socket.socket) -> tuple[socket.socket, str, str] | None:
    """A board's event report, accepted from `listener` (b"VBEV", length u8, "EVENT WHO", WHO the board's name or
    MAC, written whole at once by vboard_state.event): (the board's connection, EVENT, WHO), or None, the
    connection closed, for anything else."""
    conn, _ = listener.accept()
    conn.settimeout(10)
    data = b""
    with contextlib.suppress(OSError):
        while len(data) < 5 or len(data) < 5 + data[4]:
            chunk = conn.recv(260)
            if not chunk:
                break
            data += chunk
    if data[:4] != b"VBEV" or len(data) < 5 + data[4]:
        with contextlib.suppress(OSError):
            conn.close()
        return None
    name, _, who = data[5 : 5 + data[4]].decode(errors="replace").partition(" ")
    return conn, name, who


def answer_report(conn: socket.socket, hold: Hold | None) -> None:
    """The board that reported goes on: at once, or when `hold` is released."""
    if hold is not None:
        hold.reach(conn)
        return
    with contextlib.suppress(OSError):
        conn.sendall(b"\x00")
    with contextlib.suppress(OSError):
        conn.close()
