"""Jobs bounded in time and by board (issue 66): `--since`, `--until`, `--boards`. A boot that began before the
range is judged on what the range holds, never as lost for what came before it; a boot that began inside it is
judged from seq 0; a gap inside the range is lost all the same. The compaction guard holds for a date's folder
given as --input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from dmqtt_pipeline import audit
from dmqtt_pipeline.errors import PipelineError
from dmqtt_pipeline.jobs import run_job
from dmqtt_pipeline.scope import Scope
from dmqtt_pipeline.spark import read_telemetry
from tests.pipeline.datasets import Msg, write_dataset

HOUR_MS = 3_600_000


def two_days(out: Path) -> None:
    """From T0 (2026-11-22 10:00 UTC): board "straddle" sends one message an hour, seq 0..19 (0..13 on the 22nd,
    14..19 on the 23rd), seq 16 lost; board "late" boots at 01:00 on the 23rd and loses its seq 0 and 1; board
    "other" sends 0..4 on the 23rd."""
    msgs = [Msg("straddle", 1, s, s * HOUR_MS) for s in range(20) if s != 16]
    booted = 15 * HOUR_MS  # 01:00 on the second day
    msgs += [Msg("late", 1, s, booted + s * 60_000, t=s * 60_000) for s in range(2, 6)]
    msgs += [Msg("other", 1, s, booted + s * 60_000, t=s * 60_000) for s in range(5)]
    write_dataset(out, sorted(msgs, key=lambda m: m.at_ms), commit_every=7)


def judged(spark: SparkSession, rec: Path, scope: Scope) -> dict[str, dict[str, object]]:
    result, _ = audit.audit(scope.apply(read_telemetry(spark, str(rec))), None, scope.since_ms)
    return {b["dev"]: b for b in result.boots}


def test_a_boot_that_straddles_the_range_is_judged_on_what_it_holds(tmp_path: Path, spark: SparkSession) -> None:
    two_days(tmp_path)
    whole = judged(spark, tmp_path, Scope())
    assert (whole["straddle"]["lost"], whole["late"]["lost"]) == (1, 2)
    day2 = judged(spark, tmp_path, Scope.parse("2026-11-23", None, None))
    assert day2["straddle"]["judged_from_seq"] == 14 and day2["straddle"]["lost"] == 1  # seq 16, in the range
    assert day2["straddle"]["missing_ranges"] == [[16, 16]]
    assert day2["late"]["judged_from_seq"] == 0 and day2["late"]["lost"] == 2  # it booted inside: from seq 0
    # Until 03:00: seq 17 on lies after the range, so seq 16's gap is not below anything the range holds.
    early = judged(spark, tmp_path, Scope.parse("2026-11-23", "2026-11-23T03:00", None))
    assert early["straddle"]["received"] == 2 and early["straddle"]["lost"] == 0
    assert set(judged(spark, tmp_path, Scope.parse(None, None, "strad*,oth?r"))) == {"straddle", "other"}


def test_the_jobs_take_the_scope_and_say_it(tmp_path: Path, spark: SparkSession) -> None:
    two_days(tmp_path / "rec")
    scope = Scope.parse("2026-11-23", None, "straddle")
    outcome = run_job(spark, "all", str(tmp_path / "rec"), str(tmp_path / "out"), scope=scope)
    assert outcome.exit_code == 1  # seq 16 lost at QoS 1
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["scope"].startswith("received from 2026-11-23T00:00:00+00:00 to now") and summary["rows"] == 5
    minutes = pq.read_table(tmp_path / "out" / "rollup" / "minute").to_pylist()
    assert {m["dev"] for m in minutes} == {"straddle"} and sum(m["count"] for m in minutes) == 5
    with pytest.raises(PipelineError, match="holds no rows"):
        later = Scope.parse("2027-01-01", None, None)
        run_job(spark, "audit", str(tmp_path / "rec"), str(tmp_path / "none"), scope=later)
    with pytest.raises(PipelineError, match="is not after"):
        Scope.parse("2026-11-23", "2026-11-22", None)
    with pytest.raises(PipelineError, match="is not a time"):
        Scope.parse("yesterday", None, None)


def test_the_compaction_guard_holds_for_a_dates_folder_as_input(tmp_path: Path, spark: SparkSession) -> None:
    """A date's folder given as --input, between a compaction's rename and its removals: the recorder's log above
    it says so, and each row is read once."""
    rec = tmp_path / "rec"
    write_dataset(rec, [Msg("c", 1, s, s * 10, qos=2) for s in range(20)])
    first = sorted(rec.rglob("part-*.parquet"))[0]
    shutil.copy(first, first.with_name("part-9999999999-0.parquet"))  # the compacted copy, the old file still there
    day = first.parent
    step = {"compact": {"into": [f"{day.name}/part-9999999999-0.parquet"], "from": [str(first.relative_to(rec))]}}
    header = json.dumps({"wal": 1, "generation": 7, "next_arrival": 20})
    (rec / "_recorder" / "wal.log").write_text(header + "\n" + json.dumps(step, separators=(",", ":")) + "\n")
    assert read_telemetry(spark, str(day)).count() == 20


def test_a_daily_rollup_adds_its_day_and_keeps_the_others(tmp_path: Path, spark: SparkSession) -> None:
    """Rollups are written per date: the 22nd's run, then the 23rd's, leave both days; the 23rd's again replaces
    only the 23rd."""
    two_days(tmp_path / "rec")
    out = str(tmp_path / "out")
    for since, until in (("2026-11-22", "2026-11-23"), ("2026-11-23", "2026-11-24"), ("2026-11-23", "2026-11-24")):
        assert (
            run_job(spark, "rollup", str(tmp_path / "rec"), out, scope=Scope.parse(since, until, None)).exit_code == 0
        )
    days = sorted(p.name for p in (tmp_path / "out" / "hour").glob("date=*"))
    assert days == ["date=2026-11-22", "date=2026-11-23"]
    hours = pq.read_table(tmp_path / "out" / "hour").to_pylist()
    assert sum(h["count"] for h in hours) == 19 + 4 + 5  # every message once, the 23rd's not twice


def test_a_daily_audit_carries_its_state_and_counts_late_arrivals_apart(tmp_path: Path, spark: SparkSession) -> None:
    """Board "refill" loses seq 3 on the 22nd; its board sends it again on the 23rd, with seq 6 to 8. The 22nd's
    run writes the state; the 23rd's reads only its day and the state: "refill" is judged from seq 6, its seq 3 is
    late (no loss, no duplicate) and the state's gap closes; "straddle" loses its seq 16 there. Without the state,
    the 23rd alone would judge "refill" from seq 3 and count 4 and 5 lost."""
    rec, state = tmp_path / "rec", tmp_path / "state.json"
    msgs = [Msg("straddle", 1, s, s * HOUR_MS) for s in range(20) if s != 16]
    msgs += [Msg("refill", 1, s, s * HOUR_MS + 1) for s in range(6) if s != 3]
    msgs += [Msg("refill", 1, 3, 15 * HOUR_MS, t=3 * HOUR_MS + 1)]  # sent again, on the 23rd
    msgs += [Msg("refill", 1, s, (10 + s) * HOUR_MS + 1, t=s * HOUR_MS + 1) for s in (6, 7, 8)]
    write_dataset(rec, sorted(msgs, key=lambda m: m.at_ms), commit_every=5)

    day1 = run_job(spark, "audit", str(rec), str(tmp_path / "a1"), scope=Scope.parse(None, "2026-11-23", None),
                   state=state)  # fmt: skip
    assert day1.audit is not None and {b["dev"]: b["lost"] for b in day1.audit.boots} == {"straddle": 0, "refill": 1}
    kept = {b["dev"]: b for b in json.loads(state.read_text())["boots"]}
    assert kept["refill"]["missing_ranges"] == [[3, 3]] and kept["refill"]["highest_seq"] == 5

    day2 = run_job(spark, "audit", str(rec), str(tmp_path / "a2"), state=state)  # --since: where day 1 ended
    assert day2.audit is not None
    boots = {b["dev"]: b for b in day2.audit.boots}
    assert (boots["refill"]["lost"], boots["refill"]["late"], boots["refill"]["duplicates"]) == (0, 1, 0)
    assert boots["refill"]["judged_from_seq"] == 6 and boots["straddle"]["lost"] == 1
    kept = {b["dev"]: b for b in json.loads(state.read_text())["boots"]}
    assert kept["refill"]["missing_ranges"] == [] and kept["refill"]["missing"] == 0
    assert kept["straddle"]["missing_ranges"] == [[16, 16]] and kept["straddle"]["highest_seq"] == 19

    alone = judged(spark, rec, Scope.parse("2026-11-23", None, None))
    assert alone["refill"]["lost"] == 2  # what the state is for
    with pytest.raises(PipelineError, match="before the end of the range"):
        run_job(spark, "audit", str(rec), str(tmp_path / "a3"), scope=Scope.parse("2026-11-22", None, None),
                state=state)  # fmt: skip
