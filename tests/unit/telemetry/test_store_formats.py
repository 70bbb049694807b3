"""A store written by each earlier format is still read, and kept: format 1 (0.1.0, without `repaired` and
`resent`), format 2 (0.3.0, `repaired` inserted before `dev`), format 3 (0.9.0, `resent` inserted too) and format 4
(0.15.0, `values` at the end), in one folder as a recorder upgraded three times leaves it. Each file's format is
told (from its metadata, or from its columns for files written before the number was), every reader takes the rows
with the columns a file predates as null, and a compaction rewrites them in the current format, its number in the
file."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dmqtt_telemetry import format as telemetry
from host_bridge.recorder.store import TelemetryStore

DAY = "2026-11-20"
T0_US = 1_795_132_800_000_000  # that day's UTC midnight
PER_FILE = 4


def rows_of(first: int) -> list[dict[str, object]]:
    """PER_FILE rows of board "old-1", seq and arrival from `first`, every column of the current format."""
    out = []
    for seq in range(first, first + PER_FILE):
        payload = json.dumps({"dev": "old-1", "boot": 1, "seq": seq, "t": seq * 1000, "reading": 20.5,
                              "battery": 3.9}).encode()  # fmt: skip
        row = telemetry.row(T0_US + seq, seq, "sensors/old-1/telemetry", 1, False, False, seq + 1, False, payload,
                            True, True)  # fmt: skip
        out.append(row)
    return out


def write_store(out: Path) -> None:
    """One file of each format, in the order an upgraded recorder wrote them (format 1 first); the earlier ones
    without the format number in their metadata, as those releases wrote them."""
    folder = telemetry.partition_dir(out, DAY)
    folder.mkdir(parents=True)
    for number in telemetry.FORMATS:
        schema = telemetry.arrow_schema(number)
        if number < telemetry.FORMAT:
            schema = schema.remove_metadata()
        rows = [{k: v for k, v in r.items() if k in schema.names} for r in rows_of((number - 1) * PER_FILE)]
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), telemetry.part_file(out, DAY, number, 0))


def formats(out: Path) -> list[int]:
    found = []
    for path in telemetry.committed_files(out):
        meta = pq.read_metadata(path)
        found.append(telemetry.file_format(meta.schema.names, meta.metadata))
    return found


def test_each_earlier_format_is_told_read_and_compacted_into_the_current_one(tmp_path: Path) -> None:
    write_store(tmp_path)
    assert formats(tmp_path) == [1, 2, 3, 4]
    rows = telemetry.read_committed(tmp_path)
    assert [r["seq"] for r in rows] == list(range(4 * PER_FILE))
    by_format = [rows[i * PER_FILE : (i + 1) * PER_FILE] for i in range(4)]
    assert [r["repaired"] for r in by_format[0]] == [None] * PER_FILE  # format 1 predates it
    assert all(r["repaired"] for r in by_format[1] + by_format[2] + by_format[3])
    assert [r["resent"] for r in by_format[0] + by_format[1]] == [None] * (2 * PER_FILE)  # formats 1 and 2
    assert all(r["resent"] for r in by_format[2] + by_format[3]) and all(r["dev"] == "old-1" for r in rows)
    assert [r["values"] for r in rows[: 3 * PER_FILE]] == [None] * (3 * PER_FILE)  # formats 1 to 3
    assert all(r["values"] == [("battery", 3.9)] for r in by_format[3])

    store = TelemetryStore(tmp_path)
    assert store.maintain("2026-11-21") == {"dropped": 0, "compacted": 4}
    store.close()
    assert formats(tmp_path) == [telemetry.FORMAT]
    (compacted,) = telemetry.committed_files(tmp_path)
    assert pq.read_metadata(compacted).metadata[telemetry.FORMAT_KEY.encode()] == str(telemetry.FORMAT).encode()
    assert telemetry.read_committed(tmp_path) == rows


def test_the_recorder_writes_the_current_format_and_each_format_adds_columns_only(tmp_path: Path) -> None:
    store = TelemetryStore(tmp_path)
    store.add(T0_US, "sensors/d/telemetry", 1, False, False, 1, telemetry.payload("d", 1, 0, 0, 1.0))
    store.sync()
    store.commit()
    store.close()
    assert formats(tmp_path) == [telemetry.FORMAT]
    names = [[name for name, _, _ in telemetry.format_fields(n)] for n in sorted(telemetry.FORMATS)]
    for before, after in zip(names, names[1:], strict=False):
        assert [n for n in after if n in before] == before  # nothing removed, nothing reordered
