"""What a daily audit carries to the next day's (`audit --state FILE`): per boot its high mark (the highest seq an
audit has judged), the gaps still open below it, and the QoS; and the end of the range audited. The next run reads
its own range and this file, not the history: a boot the state holds is judged from the seq above its high mark
(audit.boot_table's `floors`), and a seq at or below it that arrives now fills an open gap (`late`), counted
neither lost nor a duplicate. The file is JSON (docs/pipeline.md, "The audit's state"), written whole and renamed
into place.

Gaps are kept as ranges, up to RANGES_KEPT a boot; `missing` counts them all. A late seq that falls in a gap
beyond the ranges kept still comes off the count only when the range holding it was kept."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from dmqtt_pipeline.errors import PipelineError

FORMAT = 1
RANGES_KEPT = 100


def _fill(ranges: list[list[int]], seqs: list[int]) -> tuple[list[list[int]], int]:
    """`ranges` ([first, last], sorted) without `seqs` -> (the ranges left, how many of `seqs` were in them)."""
    left: list[list[int]] = []
    filled = 0
    wanted = sorted(set(seqs))
    for first, last in ranges:
        inside = [s for s in wanted if first <= s <= last]
        filled += len(inside)
        start = first
        for s in inside:
            if start <= s - 1:
                left.append([start, s - 1])
            start = s + 1
        if start <= last:
            left.append([start, last])
    return left, filled


@dataclass
class AuditState:
    until: str | None = None  # the end of the last range audited (ISO, UTC), the next run's default --since
    boots: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> AuditState:
        """The state at `path`; an empty one when there is no file yet (the first run)."""
        if not path.exists():
            return cls()
        try:
            raw = json.loads(path.read_text())
            if raw.get("format") != FORMAT:
                raise ValueError(f"format {raw.get('format')!r}, not {FORMAT}")
            boots = {(b["dev"], int(b["boot"])): b for b in raw["boots"]}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise PipelineError(f"--state {path} is not an audit state this version reads ({exc})") from None
        return cls(raw.get("until"), boots)

    def floors(self, spark: SparkSession) -> DataFrame | None:
        """(dev, boot, state_floor): the seq each boot the state holds is judged from; None when it holds none."""
        if not self.boots:
            return None
        rows = [(dev, boot, b["highest_seq"] + 1) for (dev, boot), b in self.boots.items()]
        return spark.createDataFrame(rows, "dev string, boot long, state_floor long")

    def update(self, boots: list[dict[str, Any]], until: datetime | None) -> None:
        """The state after a run whose per-boot audit is `boots` (audit.AuditResult.boots) over a range ending at
        `until` (None: the run's last delivery)."""
        for b in boots:
            key = (b["dev"], int(b["boot"]))
            kept = self.boots.get(key, {"highest_seq": -1, "missing_ranges": [], "missing": 0})
            ranges, filled = _fill(kept["missing_ranges"], b.get("late_seqs") or [])
            ranges += [list(r) for r in b["missing_ranges"]]
            self.boots[key] = {
                "dev": b["dev"],
                "boot": int(b["boot"]),
                "qos": b["qos"],
                "highest_seq": max(kept["highest_seq"], b["highest_seq"]),
                "missing_ranges": sorted(ranges)[:RANGES_KEPT],
                "missing": max(0, kept["missing"] - filled) + b["lost"],
            }
        last = until or max((b["last_received_at"] for b in boots if b["last_received_at"]), default=None)
        if last is not None:
            self.until = (last if last.tzinfo else last.replace(tzinfo=UTC)).isoformat()  # (Spark's naive UTC)

    def save(self, path: Path) -> None:
        """Written whole under a temporary name, then renamed: a run that dies leaves the last state."""
        boots = [self.boots[k] for k in sorted(self.boots)]
        temp = path.with_name(f".{path.name}.tmp")
        temp.write_text(json.dumps({"format": FORMAT, "until": self.until, "boots": boots}, indent=1))
        os.replace(temp, path)
