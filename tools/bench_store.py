"""Figure 17 of BENCHMARKS.md: the Spark audit over a week of the recorder's small files, against the same week
compacted by the recorder's own maintenance (TelemetryStore.maintain). The week is what a recorder's default
commits leave: a file per 30 s, 2,880 a day (--quick: 288), four boards each publishing every 10 s. The files are
written by the recorder's own writer (host_bridge.recorder.store.write_parquet); the copy is compacted a day at a
time, timed; then the audit runs on local[2] over each folder, in one Spark session, alternately, the least of
two runs each (a warm-up first).

    python tools/bench_store.py [--quick]           (part of make bench: --only store)
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_pipeline import spark_audit
from bench_report import Section, table

from dmqtt_telemetry import format as telemetry
from host_bridge.recorder.store import ReceivedPublish, TelemetryStore, write_parquet

DAYS = 7
BOARDS = 4
EVERY_S = 10  # each board publishes every 10 s
COMMIT_S = 30  # the recorder's default --flush-seconds
NOV1_US = 1_793_491_200_000_000  # received_at of the week's first row: the partition date=2026-11-01, UTC midnight


def write_week(out: Path, commits_per_day: int) -> int:
    """A week of committed files, as a recorder leaves them (its log aside); -> rows written."""
    arrival = 0
    per_commit = BOARDS * (86_400 // EVERY_S) // commits_per_day
    seq = dict.fromkeys(range(BOARDS), 0)
    generation = 0
    for day in range(DAYS):
        date = f"2026-11-{day + 1:02d}"
        telemetry.partition_dir(out, date).mkdir(parents=True)
        for commit in range(commits_per_day):
            rows = []
            at = NOV1_US + day * 86_400_000_000 + commit * (86_400_000_000 // commits_per_day)
            for i in range(per_commit):
                board = i % BOARDS
                payload = telemetry.payload(f"dev-{board}", 1, seq[board], seq[board] * 10_000, 20.0)
                rows.append(ReceivedPublish(at + i, arrival, f"sensors/dev-{board}/telemetry", 1, False, False,
                                            arrival % 65535 + 1, False, payload, None, None))  # fmt: skip
                seq[board] += 1
                arrival += 1
            generation += 1
            write_parquet(rows, telemetry.part_file(out, date, generation, 0))
    return arrival


def folder_mb(out: Path) -> float:
    return sum(f.stat().st_size for f in telemetry.committed_files(out)) / 1e6


def figure(quick: bool = False) -> dict[str, Any]:
    commits_per_day = 288 if quick else 86_400 // COMMIT_S
    work = Path(tempfile.mkdtemp(prefix="dmqtt-bench-store-"))
    try:
        small, compacted = work / "small", work / "compacted"
        began = time.monotonic()
        rows = write_week(small, commits_per_day)
        print(f"[store] {rows} rows in {DAYS * commits_per_day} files, {time.monotonic() - began:.0f} s", flush=True)
        shutil.copytree(small, compacted)
        store = TelemetryStore(compacted)
        began = time.monotonic()
        while store.maintain("2026-11-08")["compacted"]:  # a day a pass, as the recorder does
            pass
        compact_s = time.monotonic() - began
        store.close()
        spark_audit(compacted, "local[2]")  # warm-up: the session starts, the JVM compiles the audit's code
        runs: dict[str, list[float]] = {"small": [], "compacted": []}
        for _ in range(2):
            for name, folder in (("small", small), ("compacted", compacted)):
                seconds, lost, duplicates = spark_audit(folder, "local[2]")
                assert lost == 0 and duplicates == 0, (name, lost, duplicates)
                runs[name].append(seconds)
        return {
            "days": DAYS,
            "rows": rows,
            "files": {
                "small": len(telemetry.committed_files(small)),
                "compacted": len(telemetry.committed_files(compacted)),
            },
            "mb": {"small": round(folder_mb(small), 1), "compacted": round(folder_mb(compacted), 1)},
            "audit_s": {name: round(min(seconds), 2) for name, seconds in runs.items()},
            "runs_s": runs,
            "compact_s_per_day": round(compact_s / DAYS, 2),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- the report (tools/bench_store.md) --------------------------------------------------------------------------


def report(fig: dict[str, Any], figures: dict[str, Any]) -> Section:
    rows = [
        [name, fig["files"][name], f"{fig['mb'][name]:.1f}", f"{fig['audit_s'][name]:.1f}"]
        for name in ("small", "compacted")
    ]
    ratio = fig["audit_s"]["small"] / fig["audit_s"]["compacted"]
    return Section(
        {
            "table": table(["the week's folder", "files", "MB", "audit (s)"], rows),
            "rows": f"{fig['rows']:,}",
            "ratio": f"{ratio:.1f}",
            "compact_s": f"{fig['compact_s_per_day']:.1f}",
        }
    )


def main() -> int:
    print(json.dumps(figure("--quick" in sys.argv), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
