"""The synthetic telemetry of figure 7 (tools/bench_pipeline.py) is written in the recorder's format, whatever
columns the format gains: a column it does not fill is null, as a recorder without that feature writes it."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from dmqtt_telemetry import format as telemetry
from tools.bench_pipeline import DEVICES, write_dataset


def test_the_benchmark_dataset_has_the_recorder_s_schema(tmp_path: Path) -> None:
    planted = write_dataset(tmp_path, 5 * DEVICES)
    files = sorted(tmp_path.rglob("*.parquet"))
    assert files
    tables = [pq.read_table(f) for f in files]
    assert all(t.schema.equals(telemetry.arrow_schema()) for t in tables)
    assert sum(t.num_rows for t in tables) == planted["rows"]
    repaired = tables[0].column("repaired")
    assert repaired.null_count == len(repaired)  # recorded without confirmation
