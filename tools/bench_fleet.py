"""Figure 19 of BENCHMARKS.md: the pipeline on a fleet's store, end to end. 1,000 boards publishing once a minute
for 30 hours (1.8M rows; --quick: 100 boards), written as the recorder leaves them: a file per 30 s, the first day
compacted by the recorder's own maintenance, the last six hours still in their small files. Payloads vary (the
reading, a battery voltage and an RSSI); one message in 1,000 is lost.

Each job runs in a process of its own, as a user runs it:
- the Spark audit (`host-bridge pipeline audit`'s code on local[2]): the session's start timed apart from the
  audit (read, judge, write);
- the same per-boot counts in DuckDB (2 threads) over the same files, through dmqtt_telemetry.query's views;
- the daily incremental audit (`--state`): the last day alone after the first, against the whole store;
- the report: its time, and the driver JVM's peak resident memory (VmHWM).
From the per-row costs measured, a projection for 10,000 boards at one message a minute over a year.

    python tools/bench_fleet.py [--quick]          (part of make bench: --only fleet)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from bench_report import Goal, Section, goal_table, table
from figure_cli import print_figure

from dmqtt_telemetry import format as telemetry
from host_bridge.recorder.store import ReceivedPublish, TelemetryStore, write_parquet

BOARDS = 1000
HOURS = 30
COMMIT_S = 30
DAY1 = "2026-11-20"
T0_US = int(datetime(2026, 11, 20, tzinfo=UTC).timestamp()) * 1_000_000
GOALS = {"audit_over_duckdb": 3.0, "report_driver_mb": 500}
YEAR_BOARDS = 10_000

# One job in a fresh process: the session's start and the job timed apart, the driver JVM's peak memory read.
JOB = r"""
import json, sys, time
from pathlib import Path
started = time.monotonic()
from dmqtt_pipeline.spark import session
spark = session("local[2]", quick_jvm=False)
ready = time.monotonic()
from dmqtt_pipeline.jobs import run_job
from dmqtt_pipeline.scope import Scope
import resource
job, store, out, state, until = sys.argv[1:6]
scope = Scope.parse(None, until or None, None)
run_job(spark, job, store, out, scope=scope, state=Path(state) if state else None)
done = time.monotonic()
pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
jvm = next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmHWM"))
python = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"session_s": ready - started, "job_s": done - ready, "driver_mb": python / 1024,
                  "jvm_mb": jvm / 1024}))
spark.stop()
"""

DUCKDB = r"""
import json, sys, time
started = time.monotonic()
import duckdb
from dmqtt_telemetry.query import telemetry_views
con = duckdb.connect()
con.execute("SET threads = 2")
telemetry_views(con, sys.argv[1])
rows = con.sql('''SELECT dev, boot, count(*) AS distinct_seqs, max(seq) AS highest_seq,
                         max(seq) + 1 - count(*) AS lost FROM messages GROUP BY dev, boot''').fetchall()
print(json.dumps({"s": time.monotonic() - started, "lost": sum(r[4] for r in rows), "boots": len(rows)}))
"""


def write_store(out: Path, boards: int) -> dict[str, int]:
    """The fleet's 30 hours as a recorder leaves them; the first day compacted. -> rows, lost."""
    rng = np.random.default_rng(19)
    per_commit_s = COMMIT_S
    arrival = lost = 0
    seqs = np.zeros(boards, dtype=np.int64)
    generation = 0
    for commit in range(HOURS * 3600 // per_commit_s):
        at0 = T0_US + commit * per_commit_s * 1_000_000
        # Each board sends at its own second of each minute: the boards of this 30 s slice.
        slot = commit % 2
        devs = np.arange(slot, boards, 2)
        rows = []
        for d in devs:
            seq = int(seqs[d])
            seqs[d] += 1
            if rng.random() < 0.001:
                lost += 1
                continue
            dev = f"fleet-{d:04d}"
            body = {"dev": dev, "boot": 1, "seq": seq, "t": seq * 60_000 + 5_000,
                    "reading": round(18 + 6 * rng.random(), 2), "battery": round(3.3 + rng.random() * 0.9, 3),
                    "rssi": int(-90 + rng.integers(0, 50))}  # fmt: skip
            at = at0 + int(d) * 29_000 // boards * 1000 + 40_000
            rows.append(ReceivedPublish(at, arrival, f"sensors/{dev}/telemetry", 1, False, False, arrival % 65535 + 1,
                                        False, json.dumps(body).encode(), None, None))  # fmt: skip
            arrival += 1
        generation += 1
        date = f"2026-11-{20 + commit * per_commit_s // 86_400}"
        telemetry.partition_dir(out, date).mkdir(parents=True, exist_ok=True)
        write_parquet(rows, telemetry.part_file(out, date, generation, 0))
    store = TelemetryStore(out)
    while store.maintain("2026-11-21")["compacted"]:
        pass
    store.close()
    return {"rows": arrival, "lost": lost}


def run(script: str, *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{args[:2]} failed ({done.returncode}): {done.stderr[-2000:]}")
    said: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return said


def figure(quick: bool = False) -> dict[str, Any]:
    boards = BOARDS // 10 if quick else BOARDS
    work = Path(tempfile.mkdtemp(prefix="dmqtt-bench-fleet-"))
    try:
        store = work / "store"
        began = time.monotonic()
        planted = write_store(store, boards)
        files = telemetry.committed_files(store)
        size = sum(f.stat().st_size for f in files)
        print(f"[fleet] {planted['rows']:,} rows, {len(files)} files, {time.monotonic() - began:.0f} s", flush=True)
        run(DUCKDB, str(store))  # warm the file cache for both engines alike
        duck = run(DUCKDB, str(store))
        whole = run(JOB, "audit", str(store), str(work / "audit"), "", "")
        day1 = run(JOB, "audit", str(store), str(work / "audit-day1"), str(work / "state.json"), "2026-11-21")
        # The daily run: from where the state's range ended, the open day's six hours.
        day2 = run(JOB, "audit", str(store), str(work / "audit-day2"), str(work / "state.json"), "")
        report = run(JOB, "report", str(store), str(work / "report"), "", "")
        summary = json.loads((work / "audit" / "summary.json").read_text())
        day2_rows = json.loads((work / "audit-day2" / "summary.json").read_text())["rows"]
        lost = summary["qos"]["1"]["lost"]
        return {
            "boards": boards,
            "rows": planted["rows"],
            "planted_lost": planted["lost"],
            "files": len(files),
            "store_bytes": size,
            "duckdb_s": round(duck["s"], 2),
            "duckdb_lost": duck["lost"],
            "spark_session_s": round(whole["session_s"], 1),
            "spark_audit_s": round(whole["job_s"], 1),
            "spark_lost": lost,
            "incremental_day2_s": round(day2["job_s"], 1),
            "first_run_s": round(day1["job_s"], 1),
            "report_s": round(report["job_s"], 1),
            "report_driver_mb": round(report["driver_mb"]),
            "report_jvm_mb": round(report["jvm_mb"]),
            "audit_jvm_mb": round(whole["jvm_mb"]),
            "day2_rows_share": round(day2_rows / planted["rows"], 3),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- the report (tools/bench_fleet.md) --------------------------------------------------------------------------


def report(fig: dict[str, Any], figures: dict[str, Any]) -> Section:
    ratio = fig["spark_audit_s"] / fig["duckdb_s"]
    rows = [
        ["DuckDB, the per-boot counts through dmqtt_telemetry.query's views", "-", f"{fig['duckdb_s']:.1f}",
         f"{fig['duckdb_lost']:,}"],
        ["Spark audit (local[2]): read, judge, write", f"{fig['spark_session_s']:.1f}", f"{fig['spark_audit_s']:.1f}",
         f"{fig['spark_lost']:,}"],
        ["Spark audit, the open day after the first run (--state)", "-", f"{fig['incremental_day2_s']:.1f}", "-"],
        ["Spark report", "-", f"{fig['report_s']:.1f}", "-"],
    ]  # fmt: skip
    per_row = fig["store_bytes"] / fig["rows"]
    year_rows = YEAR_BOARDS * 60 * 24 * 365
    scale = year_rows / fig["rows"]
    full = fig["boards"] == BOARDS
    goals = [
        Goal("19", "Spark audit against DuckDB, end to end, the session's start apart",
             f"<= {GOALS['audit_over_duckdb']:.0f}x", f"{ratio:.1f}x",
             ratio <= GOALS["audit_over_duckdb"] if full else None),
        Goal("19", "the daily audit (--state) against the whole store's, against its share of the rows",
             f"<= {2 * fig['day2_rows_share']:.2f}", f"{fig['incremental_day2_s'] / fig['spark_audit_s']:.2f}",
             fig["incremental_day2_s"] / fig["spark_audit_s"] <= 2 * fig["day2_rows_share"] if full else None),
        Goal("19", "the report's driver (Python), peak resident memory (MB)", f"< {GOALS['report_driver_mb']}",
             f"{fig['report_driver_mb']}", fig["report_driver_mb"] < GOALS["report_driver_mb"] if full else None),
    ]  # fmt: skip
    projection = [
        ["rows", f"{year_rows:,}"],
        ["store (compacted)", f"{per_row * year_rows / 1e9:,.0f} GB ({per_row:.1f} bytes a row)"],
        ["files (a million rows each, compacted)", f"{year_rows // 1_000_000:,}"],
        ["Spark audit of the whole year, at this run's rate on 2 cores",
         f"{fig['spark_audit_s'] * scale / 3600:,.0f} h"],
        ["DuckDB's counts of the whole year, at its rate", f"{fig['duckdb_s'] * scale / 3600:,.1f} h"],
        ["a day's incremental audit (a 365th of the year)", f"{fig['spark_audit_s'] * scale / 365 / 60:,.1f} min"],
    ]  # fmt: skip
    return Section(
        {
            "table": table(["job", "session start (s)", "job (s)", "lost found"], rows),
            "projection": table(["10,000 boards, a message a minute, a year", "projected"], projection),
            "goals_table": goal_table(goals),
            "boards": f"{fig['boards']:,}",
            "rows": f"{fig['rows']:,}",
            "files": f"{fig['files']:,}",
            "mb": f"{fig['store_bytes'] / 1e6:.0f}",
            "planted": f"{fig['planted_lost']:,}",
            "incremental_share": f"{fig['incremental_day2_s'] / fig['spark_audit_s']:.2f}",
            "report_jvm_mb": str(fig["report_jvm_mb"]),
            "day2_share": f"{fig['day2_rows_share']:.2f}",
        },
        goals,
    )


if __name__ == "__main__":
    print_figure(__doc__, figure)
