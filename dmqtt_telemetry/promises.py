"""The QoS promises, defined once: what "lost" and "duplicated" mean, and the verdict per QoS level. The Spark
audit (dmqtt_pipeline.audit) and the HIL bench's verdicts (host_bridge.hil.verdict) both judge with this module, so
that a bench run and the audit of the same traffic cannot disagree.

The board numbers the messages it accepts 0, 1, 2 ... within each boot (its `seq`), so per (device, boot):
- distinct: how many different seq numbers arrived;
- lost: seq numbers from 0 to the highest seen that never arrived (highest + 1 - distinct), plus, when the
  device's accepted total is known, the tail beyond the highest seq seen of any boot;
- duplicates: arrivals beyond the first of each seq number (received - distinct).
QoS 0 may lose (reported, never a failure); QoS 1 must not lose; QoS 2 must neither lose nor duplicate.

The counting rules are written as plain arithmetic so that they work on Python numbers and on Spark columns
alike (`lost(F.col("highest_seq"), F.col("distinct"))`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

PROMISES = {0: "may lose", 1: "nothing lost", 2: "nothing lost, nothing twice"}
RANGES_LISTED = 10  # ranges of missing seq numbers listed per boot (counts are always exact)
# What a board can number: its run's `count` is at most 2^31 - 1 messages, boots count up from 1. A row outside
# these bounds is quarantined as invalid, never counted.
SEQ_MAX = 2**31 - 2
BOOT_MAX = 2**31 - 1
# A boot whose gaps dwarf what arrived is labelled: more likely a device claiming an absurd seq than that many
# messages lost. It is still counted as lost (a broken promise), with the label beside it.
ABSURD_LOST = 100_000
ABSURD_RATIO = 100

N = TypeVar("N")


def lost(highest_seq: Any, distinct: Any) -> Any:
    """Accepted messages of a boot that never arrived, below the highest seq that did."""
    return highest_seq + 1 - distinct


def duplicates(received: Any, distinct: Any) -> Any:
    """Arrivals beyond the first of each seq number."""
    return received - distinct


def absurd(lost_count: Any, distinct: Any) -> Any:
    """Gaps too large for lost messages: a device's claim to label (works on Spark columns too)."""
    return (lost_count > ABSURD_LOST) & (lost_count > distinct * ABSURD_RATIO)


def missing_ranges(sorted_distinct: list[int], start: int = 0, limit: int = RANGES_LISTED) -> list[tuple[int, int]]:
    """The first `limit` gaps [first, last] below the highest seq, from sorted distinct seq numbers, counting from
    `start` (every seq below it is known to be there)."""
    ranges = []
    expected = start
    for seq in sorted_distinct:
        if seq > expected:
            ranges.append((expected, seq - 1))
            if len(ranges) == limit:
                break
        expected = seq + 1
    return ranges


def format_ranges(ranges: list[Any]) -> str:
    """[(4, 4), (6, 9)] -> "4, 6-9"."""
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


@dataclass(frozen=True)
class Delivery:
    """One arrival of one message, as a subscriber saw it."""

    dev: str
    boot: int
    seq: int
    qos: int


@dataclass(frozen=True)
class Witness:
    """What a board's console said it accepted, the moment publish() returned (dboard.console.ACCEPTED): per
    boot, the seq of each `accepted` line. Independent of the board's journal, which a power cut can take a record
    and its count from; a console can lose lines of its own (a real board's USB port that drops in a power cycle),
    which shows as a gap in a boot's seqs."""

    seqs: dict[int, list[int]]

    @classmethod
    def upto(cls, last: dict[int, int]) -> Witness:
        """Every seq from 0 to `last` per boot, as a board that lost no console line says it."""
        return cls({boot: list(range(top + 1)) for boot, top in last.items()})

    @property
    def last(self) -> dict[int, int]:
        return {boot: max(seqs) for boot, seqs in self.seqs.items() if seqs}

    def gaps(self, boot: int) -> list[tuple[int, int]]:
        """The seqs below the boot's last that no line names, as ranges."""
        return missing_ranges(sorted(set(self.seqs.get(boot, []))), limit=RANGES_LISTED)


@dataclass
class Expectation:
    """What a device is known to have accepted: catches a lost tail, which seq numbers alone cannot show.

    `messages`: its run's accepted total, from the board's summary (its journal's count; None when no summary
    came). `witness`: its console's `accepted` lines. `final`: the summary's (boot, accepted in that boot). Each
    boot's tail is judged against the larger of what the witness and the summary say it accepted, and the run's
    against its total; where they disagree (a summary that says more than the console shows, a gap in the
    console's seqs), the verdict says so, and never silently takes one for the other."""

    messages: int | None
    qos: int | None = None
    witness: Witness | None = None
    final: tuple[int, int] | None = None


def boot_rows(deliveries: Iterable[Delivery]) -> list[dict[str, Any]]:
    """The per (dev, boot) counts that judge() reads, from individual deliveries (the bench's subscriber). The
    Spark audit computes the same columns (and latency, which this does not) in dmqtt_pipeline.audit.boot_table."""
    seqs: dict[tuple[str, int], list[int]] = defaultdict(list)
    qos: dict[tuple[str, int], list[int]] = defaultdict(list)
    for d in deliveries:
        seqs[(d.dev, d.boot)].append(d.seq)
        qos[(d.dev, d.boot)].append(d.qos)
    rows = []
    for (dev, boot), got in sorted(seqs.items()):
        distinct = sorted(set(got))
        highest = distinct[-1]
        rows.append(
            {
                "dev": dev,
                "boot": boot,
                "qos": max(qos[(dev, boot)]),
                "mixed_qos": max(qos[(dev, boot)]) != min(qos[(dev, boot)]),
                "received": len(got),
                "highest_seq": highest,
                "distinct": len(distinct),
                "lost": lost(highest, len(distinct)),
                "duplicates": duplicates(len(got), len(distinct)),
                "missing_ranges": missing_ranges(distinct),
                "absurd_seq": absurd(lost(highest, len(distinct)), len(distinct)),
                "out_of_order": 0,
                "repaired": 0,
                "latency_p99_ms": None,
            }
        )
    return rows


@dataclass
class QosVerdict:
    qos: int
    devices: set[str] = field(default_factory=set)
    boots: int = 0
    messages: int = 0
    lost: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    latency_p99_ms: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.qos == 0 or (self.lost == 0 and (self.qos == 1 or self.duplicates == 0))

    def as_dict(self) -> dict[str, Any]:
        return {
            "qos": self.qos,
            "promise": PROMISES[self.qos],
            "devices": len(self.devices),
            "boots": self.boots,
            "messages": self.messages,
            "lost": self.lost,
            "duplicates": self.duplicates,
            "out_of_order": self.out_of_order,
            "latency_p99_ms_worst_boot": round(self.latency_p99_ms, 1),
            "verdict": "PASS" if self.ok else "FAIL",
            "problems": self.problems,
        }


def judge(
    boots: list[dict[str, Any]], expect: dict[str, Expectation] | None
) -> tuple[dict[int, QosVerdict], list[dict[str, Any]]]:
    """Verdicts per QoS from the per-boot rows, plus the devices' expected totals when given."""
    verdicts: dict[int, QosVerdict] = {}
    dev_qos: dict[str, int] = {}
    dev_span: dict[str, int] = {}
    highest: dict[tuple[str, int], int] = {}
    for b in boots:
        v = verdicts.setdefault(b["qos"], QosVerdict(b["qos"]))
        v.devices.add(b["dev"])
        v.boots += 1
        v.messages += b["distinct"]
        v.lost += b["lost"]
        v.duplicates += b["duplicates"]
        v.out_of_order += b["out_of_order"]
        v.latency_p99_ms = max(v.latency_p99_ms, b["latency_p99_ms"] or 0.0)
        where = f"{b['dev']} boot {b['boot']}"
        if b["lost"] and b["qos"]:
            ranges = b["missing_ranges"]
            more = " ..." if b["lost"] > sum(last - first + 1 for first, last in ranges) else ""
            label = (
                f" [absurd seq {b['highest_seq']}: a device's claim, not that many messages]"
                if b.get("absurd_seq")
                else ""
            )
            v.problems.append(f"{where}: {b['lost']} lost (seq {format_ranges(ranges)}{more}){label}")
        if b["duplicates"] and b["qos"] == 2:
            v.problems.append(f"{where}: {b['duplicates']} delivered twice")
        if b["mixed_qos"]:
            v.problems.append(f"{where}: published at more than one QoS; judged at QoS {b['qos']}")
        dev_qos[b["dev"]] = max(dev_qos.get(b["dev"], 0), b["qos"])
        dev_span[b["dev"]] = dev_span.get(b["dev"], 0) + b["highest_seq"] + 1
        highest[(b["dev"], b["boot"])] = b["highest_seq"]
    checks = []
    for dev, want in sorted((expect or {}).items()):
        qos = want.qos if want.qos is not None else dev_qos.get(dev)
        seen = dev_span.get(dev, 0)
        if qos is None:
            qos = 1  # a device of which nothing arrived, of unknown QoS: judged as a promise to deliver
        v = verdicts.setdefault(qos, QosVerdict(qos))
        v.devices.add(dev)
        last, witnessed = expected_last(dev, want, v.problems if qos else [])
        tails = [(boot, highest.get((dev, boot), -1) + 1, top - highest.get((dev, boot), -1))
                 for boot, top in sorted(last.items()) if top > highest.get((dev, boot), -1)]  # fmt: skip
        for boot, first, n in tails:
            v.problems.append(
                f"{dev} boot {boot}: {n} accepted and never arrived (seq {format_ranges([(first, first + n - 1)])}:"
                f" the board said it accepted them)"
            )
        tail = sum(n for _, _, n in tails)
        by_total = max(want.messages - seen, 0) if want.messages is not None else 0
        if by_total > tail:
            v.problems.append(
                f"{dev}: accepted {want.messages}, what arrived accounts for {seen} (highest seq + 1 over its "
                f"boots): {by_total - tail} lost after the last message seen of a boot"
            )
            tail = by_total
        checks.append(
            {"dev": dev, "qos": qos, "expected": want.messages, "witnessed": witnessed, "accounted": seen,
             "lost_tail": tail}
        )  # fmt: skip
        v.lost += tail
    return verdicts, checks


def expected_last(dev: str, want: Expectation, problems: list[str]) -> tuple[dict[int, int], int]:
    """Per boot, the last seq the device accepted: the larger of what its witness and its summary say; and how
    many messages that accounts for. Where the two disagree, or the console's own seqs have a gap, a `witness:`
    problem says so (it is not a loss in itself: what did not arrive is counted from the boots' seqs)."""
    last = dict(want.witness.last) if want.witness is not None else {}
    if want.witness is not None:
        for boot in sorted(want.witness.seqs):
            gaps = want.witness.gaps(boot)
            if gaps:
                problems.append(
                    f"witness: {dev} boot {boot}: no accepted line for seq {format_ranges(gaps)} (console lines lost)"
                )
    if want.final is not None and want.final[1] > 0:
        boot, count = want.final
        if count - 1 > last.get(boot, -1):
            if want.witness is not None:
                problems.append(
                    f"witness: {dev} boot {boot}: its summary says it accepted {count}, its console shows "
                    f"{last.get(boot, -1) + 1} (console lines lost)"
                )
            last[boot] = count - 1
    witnessed = sum(top + 1 for top in last.values())
    if want.witness is not None and want.messages is not None and want.messages > witnessed:
        problems.append(
            f"witness: {dev}: its summary's total is {want.messages}, its console accounts for {witnessed} "
            "(console lines lost)"
        )
    return last, witnessed


# -- a judged run, as the audit's summary.json records it --------------------------------------------------------

SUMMARY_FILE = "summary.json"  # written by the audit into its --out folder (docs/pipeline.md)


@dataclass(frozen=True)
class RecordedVerdict:
    """One QoS level's verdict as QosVerdict.as_dict() wrote it."""

    qos: int
    devices: int
    boots: int
    messages: int
    lost: int
    duplicates: int
    out_of_order: int
    ok: bool
    problems: list[str]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RecordedVerdict:
        return cls(
            int(d["qos"]),
            int(d["devices"]),
            int(d["boots"]),
            int(d["messages"]),
            int(d["lost"]),
            int(d["duplicates"]),
            int(d["out_of_order"]),
            d["verdict"] == "PASS",
            [str(p) for p in d["problems"]],
        )


@dataclass(frozen=True)
class AuditSummary:
    """What an audit concluded, read back from its summary.json: the overall verdict and each QoS level's."""

    ok: bool
    rows: int
    verdicts: dict[int, RecordedVerdict]
    folder: Path
    repaired: int = 0  # stored only after a board sent them again (end-to-end confirmation)
    resent: int = 0  # copies their boards marked as sent again on purpose
    unmarked_copies: int = 0  # QoS 2 copies of stored messages without the mark (nor the broker's DUP)

    @classmethod
    def read(cls, folder: Path) -> AuditSummary:
        """From `folder`/summary.json (a local folder: the audit's --out); ValueError when it is not one."""
        path = folder / SUMMARY_FILE
        try:
            summary = json.loads(path.read_text())
            verdicts = {int(q): RecordedVerdict.from_dict(v) for q, v in summary["qos"].items()}
            return cls(
                bool(summary["ok"]),
                int(summary["rows"]),
                verdicts,
                folder,
                int(summary.get("repaired", 0)),
                int(summary.get("resent", 0)),
                int(summary.get("unmarked_copies", 0)),
            )
        except (OSError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path} is not an audit summary: {exc}") from None

    @property
    def report(self) -> Path:
        """The report's page, when the jobs included it (`all`, `report`)."""
        return self.folder / "report" / "index.html"
