"""The virtual board's own events, on which a test schedules its disturbances (a power cut, an access point
outage) instead of on host seconds: the board acts at the event itself (host_bridge/vboard/shims/vboard_state.py),
so a loaded host makes the run slower, never the disturbance land elsewhere. docs/virtual-board.md lists them."""

from __future__ import annotations

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
