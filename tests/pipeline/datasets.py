"""Hand-built recorder folders with known gaps, duplicates and reordering, written through the recorder's own
store so that the jobs read exactly what a recorder writes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dmqtt_telemetry import format as telemetry
from host_bridge.recorder.store import TelemetryStore

T0 = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Msg:
    """One delivery: board seq and `t` (ms since boot), received `at_ms` after T0."""

    dev: str
    boot: int
    seq: int
    at_ms: int
    qos: int = 1
    t: int | None = None  # defaults to at_ms: a board booted at T0, delivered at once
    reading: float = 20.0
    dup: bool = False
    packet_id: int = 0

    def payload(self) -> bytes:
        t = self.at_ms if self.t is None else self.t
        return telemetry.payload(self.dev, self.boot, self.seq, t, self.reading)


def write_dataset(out: Path, messages: list[Msg], raw: Sequence[tuple[int, bytes]] = (), commit_every: int = 0) -> None:
    """Deliveries in list order (their arrival order), plus raw payloads (at_ms, bytes) after them."""
    store = TelemetryStore(out)
    base_us = int(T0.timestamp() * 1_000_000)
    pid = 0
    try:
        for i, m in enumerate(messages):
            pid = m.packet_id or (pid % 65535) + 1
            store.add(
                base_us + m.at_ms * 1000,
                f"sensors/{m.dev}/telemetry",
                m.qos,
                m.dup,
                False,
                pid if m.qos else 0,
                m.payload(),
            )
            if commit_every and (i + 1) % commit_every == 0:
                store.sync()
                store.commit()
        for at_ms, payload in raw:
            store.add(base_us + at_ms * 1000, "sensors/odd/telemetry", 0, False, False, 0, payload)
        store.sync()
        store.commit()
    finally:
        store.close()
