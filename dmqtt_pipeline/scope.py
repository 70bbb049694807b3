"""What a job looks at: a time range and a board filter (`--since`, `--until`, `--boards`), applied to the rows as
they are read. The range is on the recorder's clock (`received_at`, UTC), the start included and the end not; it
also prunes the store's date partitions, so a day's run reads that day's files. The board filter takes client ids
and shell patterns (`greenhouse-*`). The audit judges a boot that began before the range on what the range holds
(audit.boot_table: its gaps from its first seq in the range), never as lost for what lies outside it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dmqtt_pipeline.errors import PipelineError
from dmqtt_telemetry.format import PARTITION_COLUMN


def parse_time(text: str, option: str) -> datetime:
    """A UTC time from `2026-11-21` (its midnight) or `2026-11-21T06:30[:00]`; PipelineError otherwise."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise PipelineError(f"{option} {text!r} is not a time: give 2026-11-21 or 2026-11-21T06:30 (UTC)") from None
    if when.tzinfo is not None and when.utcoffset() != timedelta(0):
        raise PipelineError(f"{option} {text!r}: give the time in UTC (the store's clock), without an offset")
    return when.replace(tzinfo=UTC)


def _like(pattern: str) -> str:
    """A shell pattern (* and ?) as SQL LIKE's, its own % and _ taken literally."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%").replace("?", "_")


@dataclass(frozen=True)
class Scope:
    since: datetime | None = None
    until: datetime | None = None
    boards: tuple[str, ...] = ()

    @classmethod
    def parse(cls, since: str | None, until: str | None, boards: str | None) -> Scope:
        scope = cls(
            parse_time(since, "--since") if since else None,
            parse_time(until, "--until") if until else None,
            tuple(b.strip() for b in (boards or "").split(",") if b.strip()),
        )
        if scope.since and scope.until and scope.until <= scope.since:
            raise PipelineError(f"--until {until} is not after --since {since}: the range would hold nothing")
        return scope

    @property
    def whole(self) -> bool:
        return self.since is None and self.until is None and not self.boards

    @property
    def since_ms(self) -> float | None:
        """The range's start in ms since the epoch (the audit's clock offsets are in ms), None without one."""
        return None if self.since is None else self.since.timestamp() * 1000.0

    def apply(self, df: DataFrame) -> DataFrame:
        """The rows in scope: the range on `received_at` (and the date partitions it spans, so that the others are
        not read), the boards by `dev`."""
        kept: list[Column] = []
        dated = PARTITION_COLUMN in df.columns  # (not when --input is one date's folder)
        if self.since is not None:
            kept.append(F.col("received_at") >= self.since)
            if dated:
                kept.append(F.col(PARTITION_COLUMN) >= F.lit(self.since.date()))
        if self.until is not None:
            kept.append(F.col("received_at") < self.until)
            if dated:
                kept.append(F.col(PARTITION_COLUMN) <= F.lit(self.until.date()))
        if self.boards:
            match = F.lit(False)
            for pattern in self.boards:
                match = match | F.col("dev").like(_like(pattern))
            kept.append(match)
        for condition in kept:
            df = df.filter(condition)
        return df

    def describe(self) -> str:
        """The scope as the job's log and summary say it."""
        parts = []
        if self.since or self.until:
            start = self.since.isoformat(timespec="seconds") if self.since else "the start"
            end = self.until.isoformat(timespec="seconds") if self.until else "now"
            parts.append(f"received from {start} to {end} (UTC, end excluded)")
        if self.boards:
            parts.append(f"boards {','.join(self.boards)}")
        return "; ".join(parts) or "everything"
