"""`python -m dmqtt_pipeline audit`: did every QoS level keep its promise?

Per device and boot: messages received, highest seq, gaps (lost), duplicates, out-of-order arrivals and
latency percentiles; then a verdict per QoS level. QoS 0 may lose (reported, never a failure), QoS 1 must not
lose, QoS 2 must neither lose nor duplicate. The board numbers its messages 0, 1, 2 ... within each boot, so
a missing number is a lost message and a number seen twice is a duplicate: the promises and their counting
rules are dmqtt_telemetry.promises, shared with the HIL bench. What the recorder itself stored
twice (recorder_dup) and payloads it could not parse are counted apart and judge nobody.

Board clocks are not synchronised with the recorder's: `t` is milliseconds since the board booted. Per boot the
clock offset is estimated as the smallest (received_at - t) over its messages, i.e. the fastest delivery of the
boot is taken as zero latency; latency percentiles are delays beyond that fastest delivery."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from dmqtt_pipeline.spark import PipelineError, publish_files
from dmqtt_telemetry.promises import (
    BOOT_MAX,
    PROMISES,
    RANGES_LISTED,
    SEQ_MAX,
    SUMMARY_FILE,
    Expectation,
    QosVerdict,
    Witness,
    absurd,
    duplicates,
    judge,
    lost,
)

__all__ = [
    "PROMISES",
    "Expectation",
    "QosVerdict",
    "judge",
    "audit",
    "boot_table",
    "load_expectations",
    "load_acceptances",
]

CLOCK_NOTE = (
    "board clocks are not synchronised: per boot, the offset between the board's t and received_at is taken "
    "from the fastest delivery, so latencies are delays beyond that boot's fastest delivery"
)


def load_expectations(text: str) -> dict[str, Expectation]:
    """--expect: JSON {"dev": messages} or {"dev": {"messages": N, "qos": Q, "boot": B, "sent": S}} (boot and
    sent: the summary's last boot and what it accepted in it; each key but messages optional)."""
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("not an object")
        result = {}
        for dev, value in raw.items():
            entry = value if isinstance(value, dict) else {"messages": value}
            final = (int(entry["boot"]), int(entry["sent"])) if "boot" in entry and "sent" in entry else None
            result[str(dev)] = Expectation(
                int(entry["messages"]), None if entry.get("qos") is None else int(entry["qos"]), final=final
            )
        return result
    except (ValueError, KeyError, TypeError) as exc:
        raise PipelineError(
            f'--expect must be JSON {{"dev": messages}} or {{"dev": {{"messages": N, "qos": Q}}}} ({exc})'
        ) from None


def load_acceptances(text: str, expect: dict[str, Expectation] | None) -> dict[str, Expectation]:
    """--accepted: JSON Lines, one {"dev", "boot", "seq"} per `accepted` line a board's console printed (the
    witness, docs/pipeline.md), added to the expectations (a device with no --expect entry is judged by its
    witness alone)."""
    seqs: dict[str, dict[int, list[int]]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            seqs.setdefault(str(row["dev"]), {}).setdefault(int(row["boot"]), []).append(int(row["seq"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise PipelineError(f'--accepted line {number}: not {{"dev", "boot", "seq"}} ({exc})') from None
    result = dict(expect or {})
    for dev, boots in seqs.items():
        known = result.get(dev) or Expectation(None)
        result[dev] = Expectation(known.messages, known.qos, Witness(boots), known.final)
    return result


def invalid_reason() -> Column:
    """Why a row cannot judge a board (null when it can): the payload did not parse, or a field is missing or
    out of the range a board can produce (dmqtt_telemetry.promises). The recorder's own re-stores are not invalid:
    they are counted apart."""
    return (
        F.when(F.col("parse_error").isNotNull(), F.col("parse_error"))
        .when(F.col("dev").isNull(), F.lit("no dev"))
        .when(F.col("boot").isNull(), F.lit("no boot"))
        .when(F.col("seq").isNull(), F.lit("no seq"))
        .when((F.col("seq") < 0) | (F.col("seq") > SEQ_MAX), F.lit(f"seq out of range 0..{SEQ_MAX}"))
        .when((F.col("boot") < 0) | (F.col("boot") > BOOT_MAX), F.lit(f"boot out of range 0..{BOOT_MAX}"))
    )


def usable(df: DataFrame) -> DataFrame:
    """The deliveries that judge the boards: valid, and not the recorder's own re-stores."""
    return df.filter(invalid_reason().isNull() & ~F.col("recorder_dup"))


def by_boot(df: DataFrame) -> DataFrame:
    """usable(df) hash-partitioned by (dev, boot). Every window and aggregate that follows groups within one
    (dev, boot), and Spark accepts this partitioning for (dev, boot, seq) too: one shuffle serves them all."""
    return usable(df).repartition("dev", "boot")


def offset_ms() -> Column:
    """received_at - t in ms: when the recorder got a delivery less the board's clock then. A boot's smallest is
    its clock offset, and a delivery's latency is how far it lies above that (the module docstring)."""
    return F.unix_micros("received_at") / 1000.0 - F.col("t")


def invalid_rows(df: DataFrame) -> DataFrame:
    """The quarantined rows, each with its `reason`."""
    return df.withColumn("reason", invalid_reason()).filter(F.col("reason").isNotNull())


def messages(df: DataFrame) -> DataFrame:
    """Each message once: the usable rows, keeping the first arrival of every (dev, boot, seq)."""
    first = Window.partitionBy("dev", "boot", "seq").orderBy("arrival")
    return by_boot(df).withColumn("n", F.row_number().over(first)).filter(F.col("n") == 1).drop("n")


def first_deliveries(df: DataFrame) -> DataFrame:
    """messages(df) with the boot's `clock_offset_ms` and each message's `latency_ms`, as boot_table measures
    them (the report plots them one by one)."""
    per_boot = Window.partitionBy("dev", "boot")
    return (
        messages(df)
        .withColumn("clock_offset_ms", F.min(offset_ms()).over(per_boot))
        .withColumn("latency_ms", offset_ms() - F.col("clock_offset_ms"))
    )


def boot_table(df: DataFrame, since_ms: float | None = None, floors: DataFrame | None = None) -> DataFrame:
    """The per (dev, boot) audit as a DataFrame (see the module docstring for each measure). With `since_ms`, the
    start of the range the rows were read from (scope.Scope): a boot that began before it (its clock offset, the
    recorder's time of its seq 0, lies before) is judged from its first seq in the range (`judged_from_seq`), as
    what came before lies outside; a boot that began inside is judged from seq 0. `floors` (dev, boot,
    state_floor), from the last run's state (dmqtt_pipeline.state): a boot it holds is judged from the seq above
    its last high mark instead, and the seqs below that arriving now are `late` (`late_seqs`): they fill gaps an
    earlier run counted, and are neither lost nor duplicates here.

    One shuffle (by_boot), two sorts and one aggregate, whatever the size: a first pass in (seq, arrival) order
    marks each seq's first delivery and the gaps before it (a repeated seq follows its first delivery, so it is
    neither a new seq nor a gap); a second in arrival order finds first deliveries that came after a higher seq
    (the highest seq seen before a row is the same over all deliveries as over first deliveries, since every
    delivery comes after its seq's first). Latencies are first deliveries' (received_at - t) less the boot's
    smallest, taken after the percentiles: a percentile moves with a constant shift."""
    by_seq = Window.partitionBy("dev", "boot").orderBy("seq", "arrival")
    before = Window.partitionBy("dev", "boot").orderBy("arrival").rowsBetween(Window.unboundedPreceding, -1)
    whole_boot = Window.partitionBy("dev", "boot")
    previous_seq = F.lag("seq").over(by_seq)
    floor = F.lit(0).cast("long")
    if since_ms is not None:
        floor = F.when(F.min("offset_ms").over(whole_boot) < since_ms, F.min("seq").over(whole_boot)).otherwise(floor)
    source = by_boot(df)
    if floors is not None:
        source = source.join(F.broadcast(floors), ["dev", "boot"], "left")
        floor = F.coalesce(F.col("state_floor"), floor)
    rows = (
        source.select(
            "dev",
            "boot",
            "seq",
            "qos",
            "received_at",
            "arrival",
            "repaired",
            offset_ms().alias("offset_ms"),
            *(["state_floor"] if floors is not None else []),
        )
        .withColumn("floor", floor)
        .withColumn("is_first", F.coalesce(previous_seq != F.col("seq"), F.lit(True)))
        # (a gap starts at the floor at the lowest: below it, seqs are an earlier run's)
        .withColumn("gap_first", F.greatest(F.coalesce(previous_seq + 1, F.col("floor")), F.col("floor")))
        .withColumn("is_gap", F.col("gap_first") <= F.col("seq") - 1)
        .withColumn(
            "gaps_so_far", F.sum(F.col("is_gap").cast("int")).over(by_seq.rowsBetween(Window.unboundedPreceding, 0))
        )
        .withColumn(
            "out_of_order", F.col("is_first") & F.coalesce(F.col("seq") < F.max("seq").over(before), F.lit(False))
        )
    )
    first_offset = F.when(F.col("is_first"), F.col("offset_ms"))
    listed_gap = F.col("is_gap") & (F.col("gaps_so_far") <= RANGES_LISTED)
    per_boot = rows.groupBy("dev", "boot").agg(
        F.count(F.lit(1)).alias("received"),
        F.max("seq").alias("highest_seq"),
        F.max("floor").alias("judged_from_seq"),
        F.max("qos").alias("qos"),
        F.min("qos").alias("qos_min"),
        F.min("received_at").alias("first_received_at"),
        F.max("received_at").alias("last_received_at"),
        F.sum(F.col("is_first").cast("int")).alias("distinct"),  # first deliveries: one per distinct seq
        F.sum((F.col("is_first") & (F.col("seq") >= F.col("floor"))).cast("int")).alias("judged"),
        F.sort_array(F.collect_list(F.when(F.col("is_first") & (F.col("seq") < F.col("floor")), F.col("seq")))).alias(
            "late_seqs"
        ),
        F.sum(F.col("out_of_order").cast("int")).alias("out_of_order"),
        F.sum((F.col("is_first") & F.coalesce(F.col("repaired"), F.lit(False))).cast("int")).alias("repaired"),
        F.min(first_offset).alias("clock_offset_ms"),
        F.percentile(first_offset, F.array(F.lit(0.5), F.lit(0.9), F.lit(0.99))).alias("offsets"),
        F.max(first_offset).alias("offset_max"),
        # collect_list drops the nulls: only the first RANGES_LISTED gaps are kept, however many a boot has
        F.collect_list(F.when(listed_gap, F.array("gap_first", F.col("seq") - 1))).alias("gaps"),
    )
    offset = F.col("clock_offset_ms")
    # (a boot whose rows here all lie below its floor judges nothing: no loss)
    judged_lost = F.greatest(F.lit(0), lost(F.col("highest_seq") - F.col("judged_from_seq"), F.col("judged")))
    return per_boot.select(
        "dev",
        "boot",
        "received",
        "highest_seq",
        "qos",
        "first_received_at",
        "last_received_at",
        "distinct",
        "out_of_order",
        "repaired",
        "clock_offset_ms",
        (F.col("offset_max") - offset).alias("latency_max_ms"),
        "judged_from_seq",
        F.size("late_seqs").alias("late"),
        "late_seqs",
        F.array_sort("gaps").alias("missing_ranges"),
        judged_lost.alias("lost"),
        duplicates(F.col("received"), F.col("distinct")).alias("duplicates"),
        absurd(judged_lost, F.col("judged")).alias("absurd_seq"),
        (F.col("qos") != F.col("qos_min")).alias("mixed_qos"),
        (F.col("offsets")[0] - offset).alias("latency_p50_ms"),
        (F.col("offsets")[1] - offset).alias("latency_p90_ms"),
        (F.col("offsets")[2] - offset).alias("latency_p99_ms"),
        F.timestamp_micros((offset * 1000).cast("long")).alias("boot_started_at"),
    ).orderBy("dev", "boot")


@dataclass
class AuditResult:
    boots: list[dict[str, Any]]
    verdicts: dict[int, QosVerdict]
    rows: int
    parse_errors: int
    recorder_duplicates: int
    expectations: list[dict[str, Any]]
    streaming: bool = False  # the streaming audit measures neither order nor latency
    invalid: dict[str, dict[str, int]] = field(default_factory=dict)  # quarantined rows: device -> reason -> count
    # Copies marked by their boards as sent again on purpose (the `resent` column: end-to-end confirmation's
    # repair), and QoS 2 copies the recorder had stored already that came without the mark nor the broker's DUP
    # (a board's or a broker's repeat, not a repair; counted only where the recorder's connection carries marks).
    resent: int = 0
    unmarked_copies: int = 0
    # Data files left out as no readable Parquet (--quarantine-damaged): a storage fault, apart from delivery;
    # the messages they held may show as lost above.
    damaged_files: list[str] = field(default_factory=list)
    scope: str = "everything"  # the rows judged (dmqtt_pipeline.scope: a range, boards)

    @property
    def invalid_rows(self) -> int:
        return sum(sum(reasons.values()) for reasons in self.invalid.values())

    @property
    def repaired(self) -> int:
        """Messages stored only after a board sent them again from its journal (end-to-end confirmation)."""
        return sum(b.get("repaired") or 0 for b in self.boots)

    @property
    def ok(self) -> bool:
        return all(v.ok for v in self.verdicts.values())

    def summary_json(self, input_path: str, **extra: str) -> bytes:
        """The JSON summary file (summary.json, stream-summary.json): every value plain JSON."""
        summary = {**self.summary(input_path), **extra}
        summary["boots"] = [{k: _jsonable(v) for k, v in b.items()} for b in self.boots]
        return json.dumps(summary, indent=2).encode()

    def summary(self, input_path: str) -> dict[str, Any]:
        return {
            "input": input_path,
            "scope": self.scope,
            "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "ok": self.ok,
            "rows": self.rows,
            "parse_errors": self.parse_errors,
            "recorder_duplicates": self.recorder_duplicates,
            "repaired": self.repaired,
            "resent": self.resent,
            "unmarked_copies": self.unmarked_copies,
            "invalid_rows": self.invalid_rows,
            "invalid": self.invalid,
            "damaged_files": self.damaged_files,
            "clock": CLOCK_NOTE,
            "qos": {str(q): v.as_dict() for q, v in sorted(self.verdicts.items())},
            "expected": self.expectations,
            "boots": self.boots,
        }


def audit(
    df: DataFrame,
    expect: dict[str, Expectation] | None = None,
    since_ms: float | None = None,
    floors: DataFrame | None = None,
) -> tuple[AuditResult, DataFrame]:
    """The audit of the rows of `df`; `since_ms`: the start of the range they were read from, `floors`: the last
    run's state's (boot_table)."""
    boots_df = boot_table(df, since_ms, floors).cache()
    boots = [row.asDict() for row in boots_df.collect()]
    verdicts, checks = judge(boots, expect)
    counts = df.agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.col("parse_error").isNotNull().cast("int")).alias("parse_errors"),
        F.sum(F.col("recorder_dup").cast("int")).alias("recorder_duplicates"),
        F.sum(F.coalesce(F.col("resent"), F.lit(False)).cast("int")).alias("resent"),
        F.sum(
            (F.col("recorder_dup") & ~F.col("dup") & (F.col("qos") == 2) & (F.col("resent") == F.lit(False))).cast(
                "int"
            )
        ).alias("unmarked_copies"),
    ).first()
    assert counts is not None
    result = AuditResult(
        boots, verdicts, counts["rows"], counts["parse_errors"] or 0, counts["recorder_duplicates"] or 0, checks
    )
    result.resent = counts["resent"] or 0
    result.unmarked_copies = counts["unmarked_copies"] or 0
    result.invalid = quarantine_counts(df)
    return result, boots_df


NO_DEVICE = "(no dev)"


def quarantine_counts(df: DataFrame) -> dict[str, dict[str, int]]:
    """Quarantined rows per device and reason (reasons cut to their kind: "seq is float", not each value)."""
    rows = (
        invalid_rows(df.filter(~F.col("recorder_dup")))
        .groupBy(F.coalesce(F.col("dev"), F.lit(NO_DEVICE)).alias("dev"), "reason")
        .count()
        .collect()
    )
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        out.setdefault(row["dev"], {})[row["reason"]] = row["count"]
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float):
        return round(value, 3)
    return value


def format_table(result: AuditResult) -> str:
    lines = [
        f"{'QoS':<4}{'promise':<29}{'devices':>8}{'boots':>7}{'messages':>10}"
        f"{'lost':>7}{'dup':>6}{'late':>6}{'p99 ms':>9}  verdict",
    ]
    for q, v in sorted(result.verdicts.items()):
        late, p99 = ("-", "-") if result.streaming else (str(v.out_of_order), f"{v.latency_p99_ms:.1f}")
        lines.append(
            f"{q:<4}{PROMISES[q]:<29}{len(v.devices):>8}{v.boots:>7}{v.messages:>10}{v.lost:>7}{v.duplicates:>6}"
            f"{late:>6}{p99:>9}  {'PASS' if v.ok else 'FAIL'}"
        )
        lines += [f"      {p}" for p in v.problems[:10]]
    lines.append(
        f"rows {result.rows}, unparsable payloads {result.parse_errors}, "
        f"recorder re-stores {result.recorder_duplicates}, repaired {result.repaired} (a broker lost them, "
        f"the boards gave them back), copies marked resent {result.resent}, QoS 2 copies without the mark "
        f"{result.unmarked_copies}, "
        f"quarantined rows {result.invalid_rows} (counted apart; they judge nobody)"
    )
    worst = sorted(result.invalid.items(), key=lambda kv: -sum(kv[1].values()))[:5]
    for dev, reasons in worst:
        listed = "; ".join(f"{reason}: {n}" for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:3])
        lines.append(f"      quarantined from {dev}: {listed}")
    if result.damaged_files:
        lines.append(
            f"damaged data files left out: {len(result.damaged_files)} (a storage fault, not delivery; the messages "
            "they held count as lost above): " + ", ".join(result.damaged_files[:3])
        )
    lines.append("late arrivals and latency: the batch audit's" if result.streaming else f"latency: {CLOCK_NOTE}")
    return "\n".join(lines)


CONSOLE_BOOTS = 20  # device-boots printed at most; every one is in OUT/boots and summary.json


def format_boots(result: AuditResult, limit: int = CONSOLE_BOOTS) -> str:
    """The per device-boot table for the console, bounded for a fleet: all of them when there are at most
    `limit`, else the `limit` worst (most lost, then duplicated, then out of order) and a line of totals."""
    boots = result.boots
    shown = boots
    if len(boots) > limit:
        worst = sorted(boots, key=lambda b: (-b["lost"], -b["duplicates"], -b["out_of_order"], b["dev"], b["boot"]))
        shown = worst[:limit]
    lines = []
    if shown is not boots:
        lines.append(f"the {limit} worst of {len(boots)} device-boots (all of them: OUT/boots, summary.json)")
    lines.append(
        f"{'device':<28}{'boot':>5}{'QoS':>4}{'received':>9}{'highest':>8}"
        f"{'lost':>6}{'dup':>5}{'late':>5}{'p50 ms':>8}{'p99 ms':>8}"
    )
    for b in shown:
        lines.append(
            f"{b['dev']:<28}{b['boot']:>5}{b['qos']:>4}{b['received']:>9}{b['highest_seq']:>8}{b['lost']:>6}"
            f"{b['duplicates']:>5}{b['out_of_order']:>5}"
            f"{b['latency_p50_ms'] or 0:>8.1f}{b['latency_p99_ms'] or 0:>8.1f}"
        )
    if shown is not boots:
        lines.append(
            f"{'all ' + str(len(boots)) + ' device-boots':<37}{sum(b['received'] for b in boots):>9}{'':>8}"
            f"{sum(b['lost'] for b in boots):>6}{sum(b['duplicates'] for b in boots):>5}"
            f"{sum(b['out_of_order'] for b in boots):>5}"
        )
    return "\n".join(lines)


def write(
    spark: SparkSession,
    result: AuditResult,
    boots_df: DataFrame,
    input_path: str,
    out: str,
    df: DataFrame | None = None,
) -> None:
    """OUT/boots (Parquet, one row per device and boot), OUT/invalid (the quarantined rows with their reason,
    when there are any) and OUT/summary.json."""
    boots_df.coalesce(1).write.mode("overwrite").parquet(f"{out.rstrip('/')}/boots")
    if df is not None and result.invalid_rows:
        invalid_rows(df.filter(~F.col("recorder_dup"))).write.mode("overwrite").parquet(f"{out.rstrip('/')}/invalid")
    publish_files(spark, {SUMMARY_FILE: result.summary_json(input_path)}, out)
