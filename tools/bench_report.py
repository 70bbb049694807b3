"""What a figure's tool hands the report: the values its Markdown template names, and its goals.

Each tool of `make bench` has `report(fig, figures) -> Section` beside its `figure(quick)`, and its template beside
it (tools/bench_clients.md for tools/bench_clients.py). tools/benchmarks.py fills the templates and gathers every
goal into the table that opens BENCHMARKS.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Goal:
    """One goal of a figure: what is held (`text`), the bound (`target`), what this run gave (`measured`), and
    whether it holds (None: nothing to judge)."""

    figure: str
    text: str
    target: str
    measured: str
    ok: bool | None

    def row(self) -> list[str]:
        return [self.text, self.target, self.measured, verdict(self.ok)]


@dataclass
class Section:
    """A figure's part of the report: `values` for its template's `{{name}}` placeholders, and its goals."""

    values: dict[str, str] = field(default_factory=dict)
    goals: list[Goal] = field(default_factory=list)


def table(head: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "**missed**")


def goal_table(goals: list[Goal], head: tuple[str, ...] = ("goal", "", "measured", "")) -> str:
    """A figure's own goal table, in the figure's columns."""
    return table(list(head), [g.row() for g in goals])
