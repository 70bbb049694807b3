"""The recorder's store in DuckDB, with the rules every reader must apply made once: `telemetry_views(con,
folder, ...)` creates two views on a DuckDB connection (docs/telemetry-parquet.md, "Reading the store"):

- `deliveries`: every row the recorders committed, once. A folder holds a row twice only in the instant between
  a compaction's rename and its removal of the files it replaced; each row is kept once by `arrival` (unique in
  a folder). Files of every earlier format are read, a column a file predates as null. A `folder` column says
  which recorder's folder a row came from (several recorders on one shared subscription).
- `messages`: each board message once, as the Spark audit counts them (dmqtt_pipeline.audit.messages): the rows
  that can judge a board (the payload parsed, dev, boot and seq present and in range) and are not the recorder's
  own re-stores, the first arrival of every (dev, boot, seq).

DuckDB hands TIMESTAMP WITH TIME ZONE columns to Python through pytz; the [pipeline] extra installs both."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dmqtt_telemetry.format import PARTITION_COLUMN
from dmqtt_telemetry.promises import BOOT_MAX, SEQ_MAX

if TYPE_CHECKING:
    import duckdb


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def telemetry_views(con: duckdb.DuckDBPyConnection, *folders: str | Path) -> None:
    """The views `deliveries` and `messages` over the recorders' folders (each a recorder's --out)."""
    if not folders:
        raise ValueError("give at least one recorder's folder")
    reads = " UNION ALL BY NAME ".join(
        f"SELECT {_quoted(str(folder))} AS folder, * FROM read_parquet("
        f"{_quoted(str(Path(folder) / f'{PARTITION_COLUMN}=*' / 'part-*.parquet'))}, "
        "hive_partitioning = true, union_by_name = true)"
        for folder in folders
    )
    con.execute(
        f"""CREATE OR REPLACE VIEW deliveries AS
        SELECT * FROM ({reads}) QUALIFY row_number() OVER (PARTITION BY folder, arrival ORDER BY arrival) = 1"""
    )
    con.execute(
        f"""CREATE OR REPLACE VIEW messages AS
        SELECT * FROM deliveries
        WHERE parse_error IS NULL AND dev IS NOT NULL AND boot IS NOT NULL AND seq IS NOT NULL
          AND seq BETWEEN 0 AND {SEQ_MAX} AND boot BETWEEN 0 AND {BOOT_MAX} AND NOT recorder_dup
        QUALIFY row_number() OVER (PARTITION BY dev, boot, seq ORDER BY folder, arrival) = 1"""
    )
