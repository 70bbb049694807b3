"""The batch jobs as functions of a Spark session, shared by the CLI and `make demo` (which runs them all in
one session: a JVM starts once)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from pyspark.sql import SparkSession

from dmqtt_pipeline import audit, report, rollup
from dmqtt_pipeline.audit import AuditResult, Expectation
from dmqtt_pipeline.scope import Scope
from dmqtt_pipeline.spark import PipelineError, publish_files, read_telemetry
from dmqtt_pipeline.state import AuditState
from dmqtt_telemetry.timeline import Event


@dataclass
class JobOutcome:
    exit_code: int  # 0, or 1 when the audit found a broken promise
    audit: AuditResult | None = None
    report_path: str | None = None


def run_job(
    spark: SparkSession,
    job: str,
    input_path: str,
    out: str,
    expect: dict[str, Expectation] | None = None,
    events: list[Event] | None = None,
    damaged: list[str] | None = None,
    scope: Scope | None = None,
    state: Path | None = None,
) -> JobOutcome:
    """audit | rollup | report | all. `all` puts the audit in OUT, the rollups in OUT/rollup, the report in
    OUT/report; the single jobs put theirs in OUT. `state`: the audit's state file (dmqtt_pipeline.state), read
    before and written after: its range's end is the default start of this one."""
    out = out.rstrip("/")
    scope = scope or Scope()
    carried = AuditState.load(state) if state is not None else None
    if carried is not None and carried.until is not None:
        ended = datetime.fromisoformat(carried.until)
        if scope.since is None:
            scope = replace(scope, since=ended)
        elif scope.since < ended:
            raise PipelineError(
                f"--since {scope.since.isoformat()} is before the end of the range --state {state} holds "
                f"({carried.until}): its boots would be judged twice; start there or later"
            )
    df = scope.apply(read_telemetry(spark, input_path, frozenset(damaged or ()))).cache()
    if not scope.whole and df.isEmpty():
        raise PipelineError(f"input {input_path} holds no rows {scope.describe()}")
    outcome = JobOutcome(0)
    result = None
    if job in ("audit", "report", "all"):
        print(f"[pipeline] audit of {input_path}: {scope.describe()}", flush=True)
        floors = carried.floors(spark) if carried is not None else None
        result, boots = audit.audit(df, expect, scope.since_ms, floors)
        result.damaged_files = list(damaged or ())
        result.scope = scope.describe()
        outcome.audit = result
        if job != "report":
            audit.write(spark, result, boots, input_path, out, df)
            print(audit.format_boots(result), audit.format_table(result), sep="\n\n", flush=True)
            print(f"[pipeline] audit written to {out}/summary.json and {out}/boots/", flush=True)
            outcome.exit_code = 0 if result.ok else 1
            if carried is not None and state is not None:
                carried.update(result.boots, scope.until)
                carried.save(state)
                print(f"[pipeline] audit state written to {state} ({len(carried.boots)} boots)", flush=True)
        boots.unpersist()  # else a later audit of the same input in this session is served from it, stale
    if job in ("rollup", "report", "all"):
        print("[pipeline] rollup per minute and per hour", flush=True)
        tables = rollup.rollup(df)
        base = out if job == "rollup" else f"{out}/rollup"
        counts = rollup.write(tables, base)
        print(
            f"[pipeline] rollup written to {base}/minute ({counts['minute']} windows) "
            f"and {base}/hour ({counts['hour']} windows)",
            flush=True,
        )
        if result is not None:
            target = out if job == "report" else f"{out}/report"
            print("[pipeline] report", flush=True)
            publish_files(spark, report.build(df, result, tables["minute"], input_path, counts, events), target)
            outcome.report_path = f"{target}/index.html"
            print(f"[pipeline] report: {outcome.report_path}", flush=True)
    df.unpersist()
    return outcome
