"""Figure 18 of BENCHMARKS.md: the recorder's memory while its maintenance compacts a day. A day of 200 boards at one
message a minute (288,000 rows; --quick: 28,800) as the recorder's default commits leave it (a file per 30 s, 2,880
files), in a store whose day is closed. A real `host-bridge record` starts on it against Mosquitto, compacts the day
in its first maintenance pass, and its peak resident memory (VmHWM, from /proc) is read once it says `maintained`.
The baseline, in the same run: the same day read whole and sorted in memory (pyarrow's dataset to a table, sorted
by arrival, written), in a process of its own, its peak measured the same way. The goal (issue 64): the recorder
under 150 MB.

    python tools/bench_maintenance.py [--quick]          (part of make bench: --only maintenance)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_report import Goal, Section, table
from figure_cli import print_figure

from dmqtt_telemetry import format as telemetry
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.processes import ManagedProcess
from host_bridge.recorder.record_command import command
from host_bridge.recorder.store import BATCH_ROWS, ReceivedPublish, write_parquet

BOARDS = 200
EVERY_S = 60  # each board publishes once a minute
COMMIT_S = 30  # the recorder's default --flush-seconds
DAY_US = 86_400_000_000
DAY = "2026-11-01"
NOV1_US = 1_793_491_200_000_000  # that day's UTC midnight
GOAL_MB = 150

# The baseline: the day read whole and sorted in memory, on the same files, peak memory at exit.
WHOLE_DAY = """
import resource, sys
from pathlib import Path
import pyarrow.dataset as ds, pyarrow.parquet as pq
from dmqtt_telemetry import format as telemetry
files = sorted(telemetry.partition_dir(Path(sys.argv[1]), sys.argv[2]).glob("part-*.parquet"))
table = ds.dataset([str(f) for f in files], schema=telemetry.arrow_schema(), format="parquet").to_table()
pq.write_table(table.sort_by("arrival"), sys.argv[3], compression="zstd")
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def write_day(out: Path, boards: int) -> tuple[int, int]:
    """A closed day of committed files, as the recorder leaves them; -> (rows, files)."""
    commits = 86_400 // COMMIT_S
    per_commit = boards * COMMIT_S // EVERY_S
    folder = telemetry.partition_dir(out, DAY)
    folder.mkdir(parents=True)
    arrival = 0
    for commit in range(commits):
        at = NOV1_US + commit * (DAY_US // commits)
        rows = []
        for i in range(per_commit):
            board, seq = (arrival % boards), arrival // boards
            payload = telemetry.payload(f"dev-{board:03}", 1, seq, seq * 60_000, 20.0 + board / 10)
            rows.append(ReceivedPublish(at + i, arrival, f"sensors/dev-{board:03}/telemetry", 1, False, False,
                                        arrival % 65535 + 1, False, payload, None, None))  # fmt: skip
            arrival += 1
        write_parquet(rows, telemetry.part_file(out, DAY, commit + 1, 0))
    return arrival, commits


def peak_mb(pid: int) -> float:
    """A live process's peak resident memory (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for {pid}")


def recorder_peak(out: Path, broker: str, log: Path) -> tuple[float, float]:
    """A recorder started on the store: (its peak resident memory once it compacted the day, MB; seconds from its
    connection to the `maintained` line)."""
    recorder = ManagedProcess(command(broker, out, "--stats-every", "0"), log)
    try:
        recorder.wait_for("event=connected", timeout=120)
        began = time.monotonic()
        recorder.wait_for("event=maintained", timeout=1800)
        seconds = time.monotonic() - began
        assert recorder.process is not None
        after = peak_mb(recorder.process.pid)
    finally:
        recorder.stop()
    return after, seconds


def figure(quick: bool = False) -> dict[str, Any]:
    boards = BOARDS // 10 if quick else BOARDS
    work = Path(tempfile.mkdtemp(prefix="dmqtt-bench-maintenance-"))
    try:
        store = work / "store"
        began = time.monotonic()
        rows, files = write_day(store, boards)
        print(f"[maintenance] {rows} rows in {files} files, {time.monotonic() - began:.0f} s", flush=True)
        copy = work / "baseline-store"
        shutil.copytree(store, copy)
        baseline = subprocess.run(
            [sys.executable, "-c", WHOLE_DAY, str(copy), DAY, str(work / "whole-day.parquet")],
            capture_output=True, text=True, check=True, timeout=1800,
        )  # fmt: skip
        baseline_mb = int(baseline.stdout.split()[-1]) / 1024
        with Mosquitto(work / "broker") as broker:
            recorder_mb, seconds = recorder_peak(store, broker.address, work / "recorder.log")
        compacted = telemetry.committed_files(store)
        assert len(compacted) == 1 and telemetry.footer_rows(compacted) == rows, compacted
        return {
            "boards": boards,
            "rows": rows,
            "files": files,
            "recorder_peak_mb": round(recorder_mb, 1),
            "whole_day_peak_mb": round(baseline_mb, 1),
            "compact_s": round(seconds, 1),
            "batch_rows": BATCH_ROWS,
            "goal_mb": GOAL_MB,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- the report (tools/bench_maintenance.md) --------------------------------------------------------------------


def report(fig: dict[str, Any], figures: dict[str, Any]) -> Section:
    rows = [
        ["the recorder, compacting as it streams (host-bridge record)", f"{fig['recorder_peak_mb']:.0f}"],
        ["the day read whole and sorted in memory", f"{fig['whole_day_peak_mb']:.0f}"],
    ]
    ok = fig["recorder_peak_mb"] < fig["goal_mb"] if fig["boards"] == BOARDS else None
    goal = Goal("18", "the recorder's peak memory compacting a day of 200 boards (MB)", f"< {fig['goal_mb']}",
                f"{fig['recorder_peak_mb']:.0f}", ok)  # fmt: skip
    return Section(
        {
            "table": table(["what compacts the day", "peak resident memory (MB)"], rows),
            "rows": f"{fig['rows']:,}",
            "files": f"{fig['files']:,}",
            "boards": str(fig["boards"]),
            "ratio": f"{fig['whole_day_peak_mb'] / fig['recorder_peak_mb']:.1f}",
            "compact_s": f"{fig['compact_s']:.0f}",
            "batch_rows": f"{fig['batch_rows']:,}",
        },
        [goal],
    )


if __name__ == "__main__":
    print_figure(__doc__, figure)
