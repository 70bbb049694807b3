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


@dataclass
class Expectation:
    """What a device is known to have accepted: catches a lost tail, which seq numbers alone cannot show.

    `messages`: its run's accepted total (the board's summary). `last_accepted`: per boot, the last seq the board
    said it accepted, on its console, the moment publish() returned (dboard.console.ACCEPTED): a witness
    independent of the board's journal, which a power cut can take a record and its count from. When given, the
    tails are judged per boot from it, and the total is only reported."""

    messages: int
    qos: int | None = None
    last_accepted: dict[int, int] | None = None


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
        if want.last_accepted is not None:
            tails = witnessed_tails(dev, want.last_accepted, highest)
            tail = sum(n for _, _, n in tails)
            for boot, first, n in tails:
                v.problems.append(
                    f"{dev} boot {boot}: {n} accepted and never arrived (seq {format_ranges([(first, first + n - 1)])}:"
                    f" the board said it accepted them)"
                )
        else:
            tail = max(want.messages - seen, 0)  # accepted by the board, beyond every seq that arrived
            if tail:
                v.problems.append(
                    f"{dev}: accepted {want.messages}, what arrived accounts for {seen} (highest seq + 1 over its "
                    f"boots): {tail} lost after the last message seen of a boot"
                )
        checks.append({"dev": dev, "qos": qos, "expected": want.messages, "accounted": seen, "lost_tail": tail})
        v.lost += tail
    return verdicts, checks


def witnessed_tails(
    dev: str, last_accepted: dict[int, int], highest: dict[tuple[str, int], int]
) -> list[tuple[int, int, int]]:
    """Per boot the board said it accepted seq 0..last: what lies beyond the highest seq that arrived of that
    boot, as (boot, first seq missing, how many). The gaps below the highest are the boot rows' own count."""
    tails = []
    for boot, last in sorted(last_accepted.items()):
        top = highest.get((dev, boot), -1)
        if last > top:
            tails.append((boot, top + 1, last - top))
    return tails


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

    @classmethod
    def read(cls, folder: Path) -> AuditSummary:
        """From `folder`/summary.json (a local folder: the audit's --out); ValueError when it is not one."""
        path = folder / SUMMARY_FILE
        try:
            summary = json.loads(path.read_text())
            verdicts = {int(q): RecordedVerdict.from_dict(v) for q, v in summary["qos"].items()}
            return cls(bool(summary["ok"]), int(summary["rows"]), verdicts, folder, int(summary.get("repaired", 0)))
        except (OSError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path} is not an audit summary: {exc}") from None

    @property
    def report(self) -> Path:
        """The report's page, when the jobs included it (`all`, `report`)."""
        return self.folder / "report" / "index.html"
