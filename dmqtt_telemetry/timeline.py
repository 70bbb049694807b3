"""The bench's timeline: what a campaign did to the system while the boards published (power cuts, recorder,
broker and bridge kills) and the serial link's counters per board at the end. The data alone cannot show these
(a power cut and a reset look alike in the telemetry), so the campaigns (`host-bridge demo`, `chaos`) write them
down and the report (`host-bridge pipeline report --timeline FILE`) draws them over the deliveries.

The file is JSON Lines, one event a line, specified in docs/pipeline.md:
  {"at": "2026-11-25T05:41:07.123456Z", "event": "power-cut", "dev": "demo-q1"}
  {"at": "...", "event": "recorder-kill"}
  {"at": "...", "event": "link-counters", "dev": "demo-ser", "counters": {"retransmits": 3, ...}}
`dev` is present for the events of one board (power-cut, link-counters), absent for the system's."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BOARD_EVENTS = ("power-cut", "link-counters")
SYSTEM_EVENTS = ("recorder-kill", "broker-kill", "broker-restart", "bridge-kill", "disk-full")
EVENTS = BOARD_EVENTS + SYSTEM_EVENTS


class TimelineError(ValueError):
    """A timeline line that is not an event of this format."""


@dataclass(frozen=True)
class Event:
    at: datetime
    event: str
    dev: str | None = None
    counters: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        record: dict[str, Any] = {"at": self.at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "event": self.event}
        if self.dev is not None:
            record["dev"] = self.dev
        if self.counters:
            record["counters"] = self.counters
        return json.dumps(record, sort_keys=True)

    @classmethod
    def parse(cls, text: str, where: str = "timeline") -> Event:
        try:
            raw = json.loads(text)
            at = datetime.strptime(raw["at"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
            kind = raw["event"]
        except (ValueError, KeyError, TypeError) as exc:
            raise TimelineError(f"{where}: not a timeline event ({exc})") from None
        if kind not in EVENTS:
            raise TimelineError(f"{where}: unknown event {kind!r} (known: {', '.join(EVENTS)})")
        dev = raw.get("dev")
        if (kind in BOARD_EVENTS) != isinstance(dev, str):
            raise TimelineError(f"{where}: {kind} {'needs' if kind in BOARD_EVENTS else 'takes no'} dev")
        counters = raw.get("counters", {})
        if not isinstance(counters, dict) or not all(isinstance(v, int) for v in counters.values()):
            raise TimelineError(f"{where}: counters must map names to integers")
        return cls(at, kind, dev, counters)


class TimelineWriter:
    """Appends events as they happen, from any thread (boards run in threads of their own)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.write_text("")

    def note(self, event: str, dev: str | None = None, **counters: int) -> None:
        with self._lock, self.path.open("a") as f:  # the time taken under the lock: the file is in time order
            line = Event(datetime.now(UTC), event, dev, counters).line()
            Event.parse(line)  # the writer keeps the format it documents
            f.write(line + "\n")


def read(text: str, where: str = "timeline") -> list[Event]:
    """Every event of a timeline file's text, in file order; TimelineError naming the line of a bad one."""
    return [Event.parse(line, f"{where}:{n}") for n, line in enumerate(text.splitlines(), 1) if line.strip()]
