"""dmqtt_telemetry.query's DuckDB views apply the store's rules once: `deliveries` keeps each row of a folder once
(a compaction caught between its rename and its removals holds rows twice) across every format, and `messages`
keeps each board message once, leaving out the recorder's re-stores and payloads that cannot judge a board. Two
recorders' folders (a shared subscription) read as one, each row saying its folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb

from dmqtt_telemetry import format as telemetry
from dmqtt_telemetry.query import telemetry_views
from tests.pipeline.datasets import Msg, write_dataset
from tests.unit.telemetry.test_store_formats import PER_FILE, write_store


def test_the_views_apply_the_dedup_rule_and_count_messages_as_the_audit_does(tmp_path: Path) -> None:
    a, b = tmp_path / "rec-a", tmp_path / "rec-b"
    msgs = [Msg("d1", 1, s, s * 10) for s in range(10)]
    msgs.append(Msg("d1", 1, 3, 200, dup=True, packet_id=4))  # a broker's redelivery: a second row, one message
    write_dataset(a, msgs, raw=[(300, b"not json")], commit_every=4)
    first = telemetry.committed_files(a)[0]
    shutil.copy(first, first.with_name("part-9999999999-0.parquet"))  # a compaction between rename and removal
    write_store(b)  # formats 1, 2 and 3: board old-1
    con = duckdb.connect()
    telemetry_views(con, a, b)
    per_folder = dict(con.sql("SELECT folder, count(*) FROM deliveries GROUP BY folder").fetchall())
    assert per_folder == {str(a): 12, str(b): 4 * PER_FILE}  # the copied file's rows once
    counted = dict(con.sql("SELECT dev, count(*) FROM messages GROUP BY dev").fetchall())
    assert counted == {"d1": 10, "old-1": 4 * PER_FILE}  # the redelivery and the bad payload left out
    nulls = con.sql("SELECT count(*) FROM deliveries WHERE folder = ? AND resent IS NULL", params=[str(b)])
    assert nulls.fetchall() == [(2 * PER_FILE,)]  # formats 1 and 2 predate the column
