"""The Spark jobs on hand-built recorder folders whose right answers are worked out by hand."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import DateType

from dmqtt_pipeline import audit, rollup
from dmqtt_pipeline.audit import NO_DEVICE, Expectation
from dmqtt_pipeline.jobs import run_job
from dmqtt_pipeline.spark import PipelineError, copy_to_hadoop, read_telemetry
from dmqtt_pipeline.stream import stream_audit
from dmqtt_telemetry.format import spark_schema
from tests.conftest import REPO
from tests.pipeline.datasets import T0, Msg, write_dataset

T0_NAIVE = T0.replace(tzinfo=None)  # Spark hands timestamps back naive, in the session's time zone (UTC)


def mixed_dataset(out: Path) -> None:
    """a: QoS 1, seq 0..9, seq 3 delivered again (allowed at QoS 1).
    b: QoS 2, arrives 0 1 3 2 5 5: seq 4 lost, seq 5 twice, seq 2 after 3 (one late arrival).
    c: QoS 0, boot 2, seq 0..4. Plus one payload that is not JSON."""
    msgs = [Msg("a", 1, s, s * 1000, reading=float(s)) for s in range(10)]
    msgs.append(Msg("a", 1, 3, 11000))
    msgs += [Msg("b", 1, s, 100 * i, qos=2) for i, s in enumerate([0, 1, 3, 2, 5, 5])]
    msgs += [Msg("c", 2, s, s * 100, qos=0) for s in range(5)]
    write_dataset(out, msgs, raw=[(50, b"not json")], commit_every=7)


def boots_by_key(result: audit.AuditResult) -> dict[tuple[str, int], dict[str, Any]]:
    return {(b["dev"], b["boot"]): b for b in result.boots}


def test_audit_counts_gaps_duplicates_and_reordering_exactly(tmp_path: Path, spark: SparkSession) -> None:
    mixed_dataset(tmp_path / "rec")
    result, _ = audit.audit(read_telemetry(spark, str(tmp_path / "rec")))
    boots = boots_by_key(result)
    a, b, c = boots[("a", 1)], boots[("b", 1)], boots[("c", 2)]
    assert (a["received"], a["distinct"], a["highest_seq"], a["lost"], a["duplicates"], a["out_of_order"]) == (
        11,
        10,
        9,
        0,
        1,
        0,
    )
    assert (b["received"], b["distinct"], b["highest_seq"], b["lost"], b["duplicates"], b["out_of_order"]) == (
        6,
        5,
        5,
        1,
        1,
        1,
    )
    assert b["missing_ranges"] == [[4, 4]] and a["missing_ranges"] == []
    assert (c["qos"], c["received"], c["lost"]) == (0, 5, 0)
    assert (result.rows, result.parse_errors, result.recorder_duplicates) == (23, 1, 0)
    v = result.verdicts
    assert v[0].ok and v[1].ok and not v[2].ok and not result.ok
    assert v[1].duplicates == 1  # QoS 1 may deliver twice: reported, not judged
    assert v[2].problems == ["b boot 1: 1 lost (seq 4)", "b boot 1: 1 delivered twice"]


def test_hostile_telemetry_is_quarantined_and_an_absurd_seq_costs_nothing(tmp_path: Path, spark: SparkSession) -> None:
    """One device claims seq 2,000,000,000 (the old gap computation allocated one entry per missing number and
    died of OutOfMemoryError), others send a negative or float seq, a string boot, a list as dev, a seq past
    what a board can number. The audit finishes: exact counts in ranges, the absurd claim labelled, the bad
    rows quarantined per device with their reason, and an honest device's verdict unaffected."""
    msgs = [Msg("honest", 1, s, s * 10, qos=1) for s in range(5)]
    msgs += [Msg("liar", 1, s, 100 + s, qos=1) for s in (0, 1, 2_000_000_000)]
    msgs += [Msg("gappy", 1, s, 200 + s, qos=2) for s in (0, 3, 4, 9)]
    raw = [
        (300, b'{"dev": "neg", "boot": 1, "seq": -5, "t": 1, "reading": 1.0}'),
        (301, b'{"dev": "flt", "boot": 1, "seq": 1.5, "t": 1, "reading": 1.0}'),
        (302, b'{"dev": "strboot", "boot": "one", "seq": 1, "t": 1, "reading": 1.0}'),
        (303, b'{"dev": ["a", "list"], "boot": 1, "seq": 1, "t": 1, "reading": 1.0}'),
        (304, b'{"dev": "huge", "boot": 1, "seq": 1099511627776, "t": 1, "reading": 1.0}'),
    ]
    write_dataset(tmp_path / "rec", msgs, raw=raw)
    outcome = run_job(spark, "audit", str(tmp_path / "rec"), str(tmp_path / "out"))
    result = outcome.audit
    assert result is not None and outcome.exit_code == 1
    boots = boots_by_key(result)
    liar, gappy, honest = boots[("liar", 1)], boots[("gappy", 1)], boots[("honest", 1)]
    assert (liar["lost"], liar["absurd_seq"], liar["missing_ranges"]) == (1_999_999_998, True, [[2, 1_999_999_999]])
    assert (gappy["lost"], gappy["absurd_seq"], gappy["missing_ranges"]) == (6, False, [[1, 2], [5, 8]])
    assert (honest["lost"], honest["absurd_seq"]) == (0, False)
    assert any(
        "liar boot 1: 1999999998 lost (seq 2-1999999999) [absurd seq 2000000000" in p
        for p in result.verdicts[1].problems
    )
    assert result.verdicts[2].problems == ["gappy boot 1: 6 lost (seq 1-2, 5-8)"]
    assert result.invalid == {
        "neg": {"seq is negative": 1},
        "flt": {"seq is float": 1},
        "strboot": {"boot is str": 1},
        NO_DEVICE: {"dev is list": 1},
        "huge": {"seq out of range 0..2147483646": 1},
    }
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["invalid_rows"] == 5 and summary["invalid"]["huge"] == {"seq out of range 0..2147483646": 1}
    quarantined = spark.read.parquet(str(tmp_path / "out" / "invalid")).select("reason").collect()
    assert len(quarantined) == 5


def test_qos0_loss_is_reported_but_never_fails(tmp_path: Path, spark: SparkSession) -> None:
    write_dataset(tmp_path / "rec", [Msg("z", 1, s, s, qos=0) for s in (0, 1, 5)])
    result, _ = audit.audit(read_telemetry(spark, str(tmp_path / "rec")))
    assert result.verdicts[0].lost == 3 and result.verdicts[0].ok and result.ok


def test_latency_percentiles_and_clock_offset(tmp_path: Path, spark: SparkSession) -> None:
    # The board's clock: t = 1000 * seq. Delivery delays 5, 10, 20, 5, 100 ms: the fastest (5 ms) is taken as
    # zero, so latencies are 0, 5, 15, 0, 95. Exact percentiles interpolate linearly: p50 5 (rank 2 of
    # 0 0 5 15 95), p90 15 + 0.6 * 80 = 63, p99 15 + 0.96 * 80 = 91.8.
    delays = [5, 10, 20, 5, 100]
    write_dataset(tmp_path / "rec", [Msg("L", 1, s, 1000 * s + d, t=1000 * s) for s, d in enumerate(delays)])
    result, _ = audit.audit(read_telemetry(spark, str(tmp_path / "rec")))
    boot = result.boots[0]
    assert boot["latency_p50_ms"] == pytest.approx(5)
    assert boot["latency_p90_ms"] == pytest.approx(63)
    assert boot["latency_p99_ms"] == pytest.approx(91.8)
    assert boot["latency_max_ms"] == pytest.approx(95)
    assert boot["boot_started_at"] == T0_NAIVE + timedelta(milliseconds=5)  # the board booted at T0, seen 5 ms late


def test_recorder_restores_judge_nobody(tmp_path: Path, spark: SparkSession) -> None:
    # The broker redelivers (DUP 1, same id and content) what the recorder already stored: marked, not counted.
    msgs = [Msg("q2", 1, s, s * 10, qos=2, packet_id=s + 1) for s in range(4)]
    msgs.append(Msg("q2", 1, 2, 100, qos=2, t=20, packet_id=3, dup=True))  # seq 2 was t=20
    write_dataset(tmp_path / "rec", msgs)
    result, _ = audit.audit(read_telemetry(spark, str(tmp_path / "rec")))
    assert result.recorder_duplicates == 1 and result.verdicts[2].duplicates == 0 and result.ok


def test_many_gaps_list_the_first_ranges_and_count_all(tmp_path: Path, spark: SparkSession) -> None:
    """Every odd seq of 0..40 lost, seq 2 and 4 delivered twice, seq 4 arriving after 6 and 40 before 38: the
    copies are neither gaps nor late arrivals, the first RANGES_LISTED ranges are listed in order, and the
    counts cover all twenty gaps."""
    seqs = [0, 2, 2, 6, 4, 4, 8, *range(10, 38, 2), 40, 38]
    write_dataset(tmp_path / "rec", [Msg("holes", 1, s, i * 10, qos=1, t=s * 10) for i, s in enumerate(seqs)])
    result, _ = audit.audit(read_telemetry(spark, str(tmp_path / "rec")))
    holes = boots_by_key(result)[("holes", 1)]
    assert (holes["received"], holes["distinct"], holes["lost"], holes["duplicates"]) == (23, 21, 20, 2)
    assert holes["missing_ranges"] == [[s, s] for s in range(1, 20, 2)]
    assert holes["out_of_order"] == 2  # seq 4 after 6, seq 38 after 40; the repeated 4 is no first delivery
    assert result.verdicts[1].lost == 20 and not result.ok


def test_a_second_audit_in_one_session_sees_rows_written_since(tmp_path: Path, spark: SparkSession) -> None:
    """run_job caches the audit's per-boot table; a later job on the same input must not be served that cache."""
    write_dataset(tmp_path / "rec", [Msg("grow", 1, s, s) for s in range(3)])
    first = run_job(spark, "audit", str(tmp_path / "rec"), str(tmp_path / "out1")).audit
    write_dataset(tmp_path / "rec", [Msg("grow", 1, s, s) for s in range(3, 8)])
    second = run_job(spark, "audit", str(tmp_path / "rec"), str(tmp_path / "out2")).audit
    assert first is not None and second is not None
    assert (first.boots[0]["received"], second.boots[0]["received"]) == (3, 8)


def test_expected_totals_catch_a_lost_tail_and_a_silent_device(tmp_path: Path, spark: SparkSession) -> None:
    write_dataset(tmp_path / "rec", [Msg("t1", 1, s, s) for s in range(5)])
    expect = {"t1": Expectation(7), "ghost": Expectation(3, qos=2)}
    result, _ = audit.audit(read_telemetry(spark, str(tmp_path / "rec")), expect)
    assert result.verdicts[1].lost == 2 and not result.verdicts[1].ok
    assert result.verdicts[2].lost == 3 and "ghost" in result.verdicts[2].devices
    assert {e["dev"]: e["lost_tail"] for e in result.expectations} == {"ghost": 3, "t1": 2}


def test_expectations_file_format() -> None:
    assert audit.load_expectations('{"a": 5, "b": {"messages": 2, "qos": 2}}') == {
        "a": Expectation(5),
        "b": Expectation(2, 2),
    }
    with pytest.raises(PipelineError, match="--expect"):
        audit.load_expectations("[1, 2]")


def test_rollup_windows_match_hand_computed_values(tmp_path: Path, spark: SparkSession) -> None:
    # dev a: 10:00:10 -> 1.0, 10:00:50 -> 3.0, 10:01:05 -> 5.0, and seq 0 again at 10:01:30 (deduplicated:
    # it must not land in the 10:01 window). dev b: 11:15:00 -> 7.5 (another hour).
    msgs = [
        Msg("a", 1, 0, 10_000, reading=1.0),
        Msg("a", 1, 1, 50_000, reading=3.0),
        Msg("a", 1, 2, 65_000, reading=5.0),
        Msg("a", 1, 0, 90_000, reading=1.0),
        Msg("b", 1, 0, 75 * 60_000, reading=7.5),
    ]
    write_dataset(tmp_path / "rec", msgs)
    tables = rollup.rollup(read_telemetry(spark, str(tmp_path / "rec")))
    minute = [
        (r["dev"], r["window_start"], r["count"], r["min"], r["max"], r["mean"])
        for r in tables["minute"].orderBy("dev", "window_start").collect()
    ]
    hour = [
        (r["dev"], r["window_start"], r["window_end"], r["count"], r["min"], r["max"], r["mean"])
        for r in tables["hour"].orderBy("dev", "window_start").collect()
    ]
    m = timedelta(minutes=1)
    assert minute == [
        ("a", T0_NAIVE, 2, 1.0, 3.0, 2.0),
        ("a", T0_NAIVE + m, 1, 5.0, 5.0, 5.0),
        ("b", T0_NAIVE + 75 * m, 1, 7.5, 7.5, 7.5),
    ]
    assert hour == [
        ("a", T0_NAIVE, T0_NAIVE + 60 * m, 3, 1.0, 5.0, 3.0),
        ("b", T0_NAIVE + 60 * m, T0_NAIVE + 120 * m, 1, 7.5, 7.5, 7.5),
    ]
    counts = rollup.write(tables, str(tmp_path / "out"))
    assert counts == {"minute": 3, "hour": 2}
    assert pq.read_table(tmp_path / "out" / "hour").num_rows == 2


def test_all_jobs_write_summary_rollups_and_a_standalone_report(tmp_path: Path, spark: SparkSession) -> None:
    mixed_dataset(tmp_path / "rec")
    outcome = run_job(spark, "all", str(tmp_path / "rec"), str(tmp_path / "out"))
    assert outcome.exit_code == 1  # b broke the QoS 2 promise
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (
        summary["ok"] is False and summary["qos"]["2"]["verdict"] == "FAIL" and summary["qos"]["1"]["verdict"] == "PASS"
    )
    assert summary["qos"]["2"]["lost"] == 1 and summary["qos"]["2"]["duplicates"] == 1
    assert pq.read_table(tmp_path / "out" / "boots").num_rows == 3
    assert pq.read_table(tmp_path / "out" / "rollup" / "minute").num_rows > 0
    page = tmp_path / "out" / "report" / "index.html"
    text = page.read_text()
    for png in ("delivery.png", "latency.png", "readings.png"):
        assert f'src="{png}"' in text
        assert (page.parent / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "a promise was broken" in text and "b boot 1: 1 lost (seq 4)" in text
    assert "http" not in text  # readable offline: nothing fetched from anywhere


def test_rows_seen_twice_in_a_compaction_window_are_read_once(tmp_path: Path, spark: SparkSession) -> None:
    """Between a compaction's rename and its removal of the files it replaced, a folder holds those rows twice
    (host_bridge/recorder/store.py maintain()), with the step's record in the recorder's log: the jobs then read
    each row once, by arrival. Without such a record a second copy is not the recorder's and is not hidden."""
    rec = tmp_path / "rec"
    write_dataset(rec, [Msg("c", 1, s, s * 10, qos=2) for s in range(20)])
    first = sorted(rec.rglob("part-*.parquet"))[0]
    copied = len(pq.read_table(first))
    shutil.copy(first, first.with_name("part-9999999999-0.parquet"))  # the compacted copy, the old file still there
    assert read_telemetry(spark, str(rec)).count() == 20 + copied
    log = rec / "_recorder" / "wal.log"
    log.parent.mkdir(exist_ok=True)
    step = {"compact": {"into": ["date=x/part-9999999999-0.parquet"], "from": [str(first.relative_to(rec))]}}
    log.write_text(
        json.dumps({"wal": 1, "generation": 7, "next_arrival": 20})
        + "\n"
        + json.dumps(step, separators=(",", ":"))
        + "\n"
    )
    assert read_telemetry(spark, str(rec)).count() == 20


def test_input_errors_say_what_is_wrong(tmp_path: Path, spark: SparkSession) -> None:
    with pytest.raises(PipelineError, match="does not exist"):
        read_telemetry(spark, str(tmp_path / "nowhere"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(PipelineError, match="holds no telemetry rows"):
        read_telemetry(spark, str(tmp_path / "empty"))


def test_cli_exit_codes(tmp_path: Path) -> None:
    """The CLI as a bench runs it: exit 2 on bad input, said without a traceback and before a JVM starts (exit 1
    on a broken promise, with the summary written and no JVM chatter: tests/pipeline/test_cluster.py's local
    reference run)."""
    missing = subprocess.run(
        [
            sys.executable,
            "-m",
            "host_bridge",
            "pipeline",
            "rollup",
            "--input",
            str(tmp_path / "nope"),
            "--out",
            str(tmp_path / "o2"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert missing.returncode == 2 and "host-bridge pipeline rollup: input" in missing.stderr
    assert "does not exist" in missing.stderr and "Traceback" not in missing.stderr


def test_stream_audit_updates_verdicts_as_files_arrive(tmp_path: Path, spark: SparkSession) -> None:
    rec = tmp_path / "rec"
    # First: QoS 2 seq 0, 1, 3 (2 missing so far). Then seq 2 arrives, and seq 3 again (a duplicate).
    write_dataset(rec, [Msg("s", 1, s, s * 10, qos=2) for s in (0, 1, 3)], raw=[(5, b"junk")])
    updates: list[tuple[int, int]] = []
    more_written = threading.Event()

    def on_update(result: audit.AuditResult) -> None:
        v = result.verdicts[2]
        updates.append((v.lost, v.duplicates))
        if not more_written.is_set():
            write_dataset(rec, [Msg("s", 1, 2, 40, qos=2), Msg("s", 1, 3, 50, qos=2)])
            more_written.set()

    final = stream_audit(spark, str(rec), str(tmp_path / "out"), interval=0.5, until_idle=3, on_update=on_update)
    assert updates[0] == (1, 0)  # seq 2 not there yet
    assert updates[-1] == (0, 1) and not final.ok  # the gap filled, and seq 3 delivered twice
    assert (final.rows, final.parse_errors) == (6, 1) and final.streaming
    summary = json.loads((tmp_path / "out" / "stream-summary.json").read_text())
    assert summary["qos"]["2"]["duplicates"] == 1 and summary["mode"].startswith("stream")
    batch, _ = audit.audit(read_telemetry(spark, str(rec)))
    assert (batch.verdicts[2].lost, batch.verdicts[2].duplicates) == updates[-1]


def test_recorder_schema_is_the_spark_schema(tmp_path: Path, spark: SparkSession) -> None:
    """What Spark infers from the recorder's files is the schema the jobs impose (plus the date partition)."""
    write_dataset(tmp_path / "rec", [Msg("x", 1, 0, 0)])
    inferred = spark.read.parquet(str(tmp_path / "rec")).schema
    imposed = spark_schema()
    assert [(f.name, f.dataType) for f in inferred.fields] == [(f.name, f.dataType) for f in imposed.fields] + [
        ("date", DateType())
    ]
    row = read_telemetry(spark, str(tmp_path / "rec")).first()
    assert row is not None and (row["dev"], row["received_at"]) == ("x", T0_NAIVE)


def test_hadoop_uris_for_input_and_output(tmp_path: Path, spark: SparkSession) -> None:
    """file:// URIs go through Spark's Hadoop paths; the small files through the Hadoop FileSystem API as for
    hdfs:// or s3a://."""
    write_dataset(tmp_path / "rec", [Msg("u", 1, s, s) for s in range(3)])
    outcome = run_job(spark, "audit", f"file://{tmp_path / 'rec'}", f"file://{tmp_path / 'out'}")
    assert outcome.exit_code == 0 and json.loads((tmp_path / "out" / "summary.json").read_text())["ok"]
    copy_to_hadoop(spark, {"a.txt": b"alpha", "b.bin": b"\x00\x01"}, f"file://{tmp_path / 'copied'}")
    assert (tmp_path / "copied" / "a.txt").read_bytes() == b"alpha"
    assert (tmp_path / "copied" / "b.bin").read_bytes() == b"\x00\x01"


def test_a_store_of_every_earlier_format_is_audited_whole(tmp_path: Path, spark: SparkSession) -> None:
    """Files of formats 1 to 4 in one folder (tests/unit/telemetry/test_store_formats.py): Spark reads their
    rows with the columns a file predates as null, and the audit finds every message of the board once."""
    from tests.unit.telemetry.test_store_formats import PER_FILE, write_store

    write_store(tmp_path / "rec")
    df = read_telemetry(spark, str(tmp_path / "rec"))
    assert df.filter("resent IS NULL").count() == 2 * PER_FILE and df.filter("repaired IS NULL").count() == PER_FILE
    result, _ = audit.audit(df)
    qos1 = result.verdicts[1]
    assert qos1.messages == 4 * PER_FILE and qos1.lost == 0 and qos1.duplicates == 0 and result.ok
