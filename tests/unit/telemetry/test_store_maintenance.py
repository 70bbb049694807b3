"""Keeping the recorder's store small for years (TelemetryStore.maintain): a closed day's files compacted into one,
days past the retention dropped, and the process killed at each step of either (a real exit in a child process):
a restart finishes the step, and every row is there once, in arrival order, none lost or doubled."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dmqtt_telemetry import format as telemetry
from host_bridge.recorder.store import TelemetryStore
from tests.conftest import REPO
from tests.integration.recorder_proc import read_rows

DAY_US = 86_400_000_000
# The received_at of fill()'s day 0 (the partition date=2026-11-20, from UTC midnight); day N is N days on.
NOV20_US = 1_795_132_800_000_000


def fill(store: TelemetryStore, day: int, commits: int, per: int, start: int) -> int:
    """`commits` commits of `per` deliveries received on 2026-11-(20 + day); -> the next seq."""
    seq = start
    for _ in range(commits):
        for _ in range(per):
            payload = json.dumps({"dev": "d", "boot": 1, "seq": seq, "t": seq, "reading": 1.0}).encode()
            store.add(NOV20_US + day * DAY_US + seq, "sensors/d/telemetry", 1, False, False, seq % 65535 + 1, payload)
            seq += 1
        store.sync()
        store.commit()
    return seq


def files(out: Path, date: str) -> list[str]:
    return sorted(p.name for p in telemetry.partition_dir(out, date).glob("*"))


def test_a_closed_day_is_compacted_into_one_file_and_old_days_are_dropped(tmp_path: Path) -> None:
    store = TelemetryStore(tmp_path)
    seq = fill(store, 0, 3, 4, 0)  # the partition date=2026-11-20: three files
    seq = fill(store, 1, 3, 4, seq)  # date=2026-11-21: three files
    seq = fill(store, 2, 2, 4, seq)  # date=2026-11-22, "today" below: two files, left as they are
    before = read_rows(tmp_path)
    done = store.maintain("2026-11-22", max_days=5)
    assert done == {"dropped": 0, "compacted": 6}, done
    assert len(files(tmp_path, "2026-11-20")) == 1 and len(files(tmp_path, "2026-11-21")) == 1
    assert len(files(tmp_path, "2026-11-22")) == 2
    assert read_rows(tmp_path) == before  # the same rows, in the same order
    assert store.maintain("2026-11-22") == {"dropped": 0, "compacted": 0}  # nothing left to do
    # Retention: two days kept before today, the first dropped; a commit after it numbers its files on.
    assert store.maintain("2026-11-22", retain_days=1) == {"dropped": 1, "compacted": 0}
    assert not telemetry.partition_dir(tmp_path, "2026-11-20").exists()
    fill(store, 2, 1, 4, seq)
    store.close()
    rows = read_rows(tmp_path)
    assert [r["seq"] for r in rows] == list(range(12, seq + 4)) and not any(r["recorder_dup"] for r in rows)
    assert sorted(r["arrival"] for r in rows) == [r["arrival"] for r in rows]


CRASHER = textwrap.dedent(
    """
    import json, os, sys
    sys.path.insert(0, {repo!r})
    sys.path.insert(0, {tests!r})
    import host_bridge.recorder.store as ts
    from test_store_maintenance import fill
    out, point = ts.Path(sys.argv[1]), sys.argv[2]
    store = ts.TelemetryStore(out)
    seq = fill(store, 0, 3, 4, 0)
    fill(store, 1, 1, 4, seq)
    real_write, real_replace, real_unlink, real_step = ts.write_batches, ts.os.replace, ts.Path.unlink, store._log_step
    def write_batches(batches, path):
        real_write(batches, path)
        if point == "after-temp-file":
            os._exit(9)
    def log_step(record):
        real_step(record)
        if point == "after-record":
            os._exit(9)
    def replace(a, b):
        real_replace(a, b)
        if point == "after-rename":
            os._exit(9)
    unlinked = []
    def unlink(self, missing_ok=False):
        real_unlink(self, missing_ok=missing_ok)
        unlinked.append(self)
        if point == "mid-delete" and len(unlinked) == 2:
            os._exit(9)
    ts.write_batches, ts.os.replace, ts.Path.unlink, store._log_step = write_batches, replace, unlink, log_step
    store.maintain("2026-11-21", retain_days=int(sys.argv[3]) if len(sys.argv) > 3 else None)
    os._exit(0 if point == "none" else 3)
    """
)


@pytest.mark.parametrize("point", ["after-temp-file", "after-record", "after-rename", "mid-delete", "none"])
def test_a_crash_anywhere_in_a_compaction_loses_nothing_and_keeps_nothing_twice(tmp_path: Path, point: str) -> None:
    script = tmp_path / "crash.py"
    script.write_text(CRASHER.format(repo=str(REPO), tests=str(Path(__file__).parent)))
    out = tmp_path / "rec"
    run = subprocess.run([sys.executable, str(script), str(out), point], capture_output=True, text=True, timeout=60)
    assert run.returncode == (0 if point == "none" else 9), run.stderr
    store = TelemetryStore(out)  # the next recorder start finishes what the log says was begun
    store.close()
    rows = read_rows(out)
    assert [r["seq"] for r in rows] == list(range(16)), point  # each once, in arrival order
    assert not list(out.rglob(".*.tmp"))
    begun = point != "after-temp-file"  # the record is the atomic point: before it, the day is as it was
    # What the start finished, for the recorder to say (event=maintenance_resumed).
    interrupted = begun and point != "none"
    assert store.resumed == (["compaction of date=2026-11-20 (3 files)"] if interrupted else []), store.resumed
    assert len(files(out, "2026-11-20")) == (1 if begun else 3), files(out, "2026-11-20")
    assert len(files(out, "2026-11-21")) == 1


@pytest.mark.parametrize("point", ["after-record", "mid-delete", "none"])
def test_a_crash_anywhere_in_a_retention_drop_finishes_it(tmp_path: Path, point: str) -> None:
    script = tmp_path / "crash.py"
    script.write_text(CRASHER.format(repo=str(REPO), tests=str(Path(__file__).parent)))
    out = tmp_path / "rec"
    run = subprocess.run(
        [sys.executable, str(script), str(out), point, "0"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == (0 if point == "none" else 9), run.stderr
    store = TelemetryStore(out)
    store.close()
    assert store.resumed == ([] if point == "none" else ["drop of 1 days (date=2026-11-20)"]), store.resumed
    assert not telemetry.partition_dir(out, "2026-11-20").exists()
    assert [r["seq"] for r in read_rows(out)] == list(range(12, 16))


def test_a_day_larger_than_the_size_target_is_compacted_into_files_of_that_many_rows(tmp_path: Path) -> None:
    store = TelemetryStore(tmp_path)
    fill(store, 0, 4, 4, 0)  # 16 rows in 4 files
    before = read_rows(tmp_path)
    assert store.maintain("2026-11-22", rows_per_file=6) == {"dropped": 0, "compacted": 4}
    sizes = [len(read_rows_of(f)) for f in sorted(telemetry.partition_dir(tmp_path, "2026-11-20").glob("*.parquet"))]
    assert sizes == [6, 6, 4], sizes
    assert store.maintain("2026-11-22", rows_per_file=6)["compacted"] == 0  # as few files as its rows need
    store.close()
    assert read_rows(tmp_path) == before


def read_rows_of(path: Path) -> list[dict[str, object]]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def test_a_compaction_streams_older_files_into_the_current_schema_a_row_group_per_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files written before a column existed (here without `resent` and `repaired`) are compacted with it null,
    every row once in arrival order; the compacted file is written a batch at a time, its small files' rows joined
    up to BATCH_ROWS (here 5; files of 3 rows make batches of 6), a row group each: what a compaction holds in
    memory (docs/telemetry-parquet.md)."""
    import pyarrow.parquet as pq

    import host_bridge.recorder.store as ts

    monkeypatch.setattr(ts, "BATCH_ROWS", 5)
    monkeypatch.setattr(ts, "_JOIN_EVERY", 2)
    store = TelemetryStore(tmp_path)
    seq = fill(store, 0, 4, 3, 0)
    older = sorted(telemetry.partition_dir(tmp_path, "2026-11-20").glob("*.parquet"))[:2]
    for path in older:  # as an earlier recorder wrote them
        table = pq.read_table(path)
        pq.write_table(table.drop_columns(["resent", "repaired"]), path)
    fill(store, 1, 1, 1, seq)
    before = [(r["seq"], r["arrival"]) for r in read_rows(tmp_path)]
    assert store.maintain("2026-11-21") == {"dropped": 0, "compacted": 4}
    store.close()
    (compacted,) = telemetry.partition_dir(tmp_path, "2026-11-20").glob("*.parquet")
    meta = pq.ParquetFile(compacted).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [6, 6]
    rows = read_rows(tmp_path)
    assert [(r["seq"], r["arrival"]) for r in rows] == before
    assert [r["resent"] for r in rows[:6]] == [None] * 6 and pq.read_schema(compacted) == telemetry.arrow_schema()


def test_retention_by_size_drops_the_oldest_days_until_the_days_fit_and_never_today(tmp_path: Path) -> None:
    store = TelemetryStore(tmp_path)
    seq = 0
    for day in range(4):  # four days, the last one "today"
        seq = fill(store, day, 2, 3, seq)
    size = {d: sum(f.stat().st_size for f in telemetry.partition_dir(tmp_path, d).iterdir())
            for d in ("2026-11-20", "2026-11-21", "2026-11-22", "2026-11-23")}  # fmt: skip
    # Room for the two newest days: the two oldest go, in one step.
    limit = size["2026-11-22"] + size["2026-11-23"] + 1
    assert store.maintain("2026-11-23", max_days=0, retain_bytes=limit) == {"dropped": 2, "compacted": 0}
    assert not telemetry.partition_dir(tmp_path, "2026-11-21").exists()
    assert telemetry.partition_dir(tmp_path, "2026-11-22").exists()
    # A limit below today's own size: every closed day goes, today stays.
    assert store.maintain("2026-11-23", max_days=0, retain_bytes=1) == {"dropped": 1, "compacted": 0}
    store.close()
    assert [r["seq"] for r in read_rows(tmp_path)] == list(range(18, 24))
