"""The recorder's store: payload parsing, the write-ahead log, Parquet commits, and recovery after the process
dies at each step of a commit (a real SIGKILL-like exit in a child process, not a simulated one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dmqtt_telemetry.format import parse_payload
from host_bridge.recorder.store import RecorderError, StoreWriteError, TelemetryStore
from tests.conftest import REPO
from tests.integration.recorder_proc import read_rows

GOOD = b'{"dev": "d1", "boot": 3, "seq": 7, "t": 1234, "reading": 21, "pad": "xx"}'


def test_parse_payload_fields_and_errors() -> None:
    assert parse_payload(GOOD) == {
        "dev": "d1", "boot": 3, "seq": 7, "t": 1234, "reading": 21.0, "parse_error": None, "values": None
    }  # fmt: skip
    # A board's other numeric keys, typed (booleans and text left out); none for what is no JSON object.
    extra = parse_payload(b'{"dev":"d","boot":1,"seq":0,"t":0,"reading":1,"battery":3.9,"rssi":-71,"ok":true,"fw":"2"}')
    assert extra["values"] == {"battery": 3.9, "rssi": -71.0} and parse_payload(b"[1]")["values"] is None
    assert parse_payload(b"\xff\xfe")["parse_error"] == "payload is not UTF-8"
    assert parse_payload(b"{oops")["parse_error"].startswith("payload is not JSON")
    assert parse_payload(b"[1]")["parse_error"] == "payload is JSON list, not an object"
    partial = parse_payload(b'{"dev": "d", "boot": 1, "seq": true, "t": "x"}')
    assert partial["dev"] == "d" and partial["boot"] == 1 and partial["seq"] is None
    assert partial["parse_error"] == "seq is bool; t is str; no reading"
    assert parse_payload(b'{"dev":"d","boot":1,"seq":-1,"t":0,"reading":1}')["parse_error"] == "seq is negative"


def add(store: TelemetryStore, n: int, start: int = 0, qos: int = 1) -> None:
    for i in range(start, start + n):
        payload = json.dumps({"dev": "d", "boot": 1, "seq": i, "t": i, "reading": 1.0}).encode()
        store.add(
            1_790_000_000_000_000 + i, "sensors/d/telemetry", qos, False, False, (i % 65535) + 1 if qos else 0, payload
        )


def test_commit_writes_parquet_by_date_and_nothing_else_visible(tmp_path: Path) -> None:
    store = TelemetryStore(tmp_path)
    add(store, 10)
    store.add(1_790_100_000_000_000, "sensors/x", 0, False, True, 0, b"raw \x00 bytes")  # the next UTC day
    store.sync()
    files = store.commit()
    store.close()
    assert [f.parent.name for f in files] == ["date=2026-09-21", "date=2026-09-22"]
    rows = read_rows(tmp_path)
    assert [r["seq"] for r in rows] == [*range(10), None]
    assert rows[-1]["payload"] == b"raw \x00 bytes" and rows[-1]["retain"] and rows[-1]["parse_error"]
    assert [r["arrival"] for r in rows] == list(range(11))
    assert not list(tmp_path.rglob(".*.tmp"))


def test_second_recorder_on_the_same_folder_is_refused(tmp_path: Path) -> None:
    store = TelemetryStore(tmp_path)
    try:
        with pytest.raises(RecorderError, match="another recorder is writing"):
            TelemetryStore(tmp_path)
    finally:
        store.close()


def test_redelivery_of_a_stored_message_is_marked(tmp_path: Path) -> None:
    store = TelemetryStore(tmp_path)
    first = store.add(1, "s/t", 2, False, False, 9, b"A")
    again = store.add(2, "s/t", 2, True, False, 9, b"A")  # DUP, same id and content: stored before
    other = store.add(3, "s/t", 2, True, False, 9, b"B")  # DUP but other content: a new message under id 9
    fresh = store.add(4, "s/t", 2, False, False, 9, b"B")  # DUP 0: never a redelivery
    assert [first.recorder_dup, again.recorder_dup, other.recorder_dup, fresh.recorder_dup] == [
        False,
        True,
        False,
        False,
    ]
    assert store.release(9) and not store.release(9)
    store.close()


CRASHER = textwrap.dedent(
    """
    import os, sys, json
    sys.path.insert(0, {repo!r})
    import host_bridge.recorder.store as ts
    point = sys.argv[2]
    store = ts.TelemetryStore(ts.Path(sys.argv[1]))
    for i in range(50):
        store.add(1_790_000_000_000_000 + i, "sensors/d", 2, False, False, i + 1,
                  json.dumps({{"dev": "d", "boot": 1, "seq": i, "t": i, "reading": 1.0}}).encode())
    if point == "torn":
        store.sync()
        store._wal.write(b'{{"m": {{"received_at_us": 1, "arri')  # power lost mid-append
        store._wal.flush()
        os._exit(9)
    store.sync()  # acknowledged from here on
    if point == "after-sync":
        os._exit(9)
    real_replace, real_parquet, real_new = os.replace, ts.write_parquet, store._new_generation
    def parquet(deliveries, path):
        real_parquet(deliveries, path)
        if point == "after-temp-file":
            os._exit(9)
    def replace(a, b):
        if point == "before-rename":
            os._exit(9)
        real_replace(a, b)
    def new_generation():
        if point == "after-rename":
            os._exit(9)
        real_new()
    ts.write_parquet, ts.os.replace, store._new_generation = parquet, replace, new_generation
    store.commit()
    os._exit(0 if point == "none" else 3)
    """
)


@pytest.mark.parametrize("point", ["torn", "after-sync", "after-temp-file", "before-rename", "after-rename", "none"])
def test_a_crash_anywhere_in_a_commit_loses_nothing_and_writes_nothing_twice(tmp_path: Path, point: str) -> None:
    script = tmp_path / "crash.py"
    script.write_text(CRASHER.format(repo=str(REPO)))
    out = tmp_path / "rec"
    run = subprocess.run([sys.executable, str(script), str(out), point], capture_output=True, text=True, timeout=60)
    assert run.returncode == (0 if point == "none" else 9), run.stderr
    store = TelemetryStore(out)  # the next recorder start
    recovered = store.recovered
    add(store, 5, start=50, qos=2)
    store.sync()
    store.commit()
    store.close()
    rows = read_rows(out)
    assert [r["seq"] for r in rows] == list(range(55)), point  # each once, in arrival order
    assert [r["arrival"] for r in rows] == list(range(55))
    assert not any(r["recorder_dup"] for r in rows)
    assert not list(out.rglob(".*.tmp"))
    # What the first process logged but had not committed is written by the second one at start.
    assert recovered == (50 if point in ("torn", "after-sync", "after-temp-file") else 0)
    log = (out / "_recorder" / "wal.log").read_bytes().split(b"\n")
    assert json.loads(log[0])["qos2_unreleased"] == list(range(1, 56))  # no PUBREL yet: the ids are still held
    assert os.path.getsize(out / "_recorder" / "wal.log") < 4096  # a fresh generation after each commit


def test_a_removed_log_never_lets_a_commit_replace_an_existing_file(tmp_path: Path) -> None:
    store = TelemetryStore(tmp_path)
    add(store, 3)
    store.sync()
    first = store.commit()
    store.close()
    (tmp_path / "_recorder" / "wal.log").unlink()  # a user "starting afresh" in the same folder
    store = TelemetryStore(tmp_path)
    add(store, 2, start=3)
    store.sync()
    second = store.commit()
    store.close()
    assert first[0] != second[0] and first[0].exists()
    rows = read_rows(tmp_path)
    assert [(r["seq"], r["arrival"]) for r in rows] == [(i, i) for i in range(5)]  # arrival order carries on


def test_a_commit_that_cannot_start_the_next_log_takes_nothing_more_and_loses_nothing(tmp_path: Path) -> None:
    """The commit record ends its generation. When the next generation's log cannot be written (a full disk), the
    store stops: a delivery logged after the record would be read by a restart as part of that commit."""
    store = TelemetryStore(tmp_path)
    add(store, 3)
    store.sync()
    blocker = tmp_path / "_recorder" / "wal.log.tmp"
    blocker.mkdir()  # the next generation's log cannot be created
    with pytest.raises(StoreWriteError):
        store.commit()
    with pytest.raises(StoreWriteError):
        add(store, 1, start=3)  # so it is never acknowledged: the broker sends it again
    blocker.rmdir()
    store.reload()
    add(store, 2, start=3)
    store.sync()
    store.commit()
    store.close()
    rows = read_rows(tmp_path)
    assert [(r["seq"], r["arrival"], r["recorder_dup"]) for r in rows] == [(i, i, False) for i in range(5)]


def test_deliveries_logged_after_a_commit_record_are_recovered_into_files_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recorder before 0.12.0 went on logging (and acknowledging) after a commit whose next generation it could not
    start. A restart commits what followed the commit record, in files that replace none of the committed ones."""
    store = TelemetryStore(tmp_path)
    add(store, 3)
    store.sync()
    monkeypatch.setattr(store, "_new_generation", lambda: None)  # its log stays the one the commit record ends
    first = store.commit()
    add(store, 2, start=3)
    store.sync()  # acknowledged
    store.close()
    monkeypatch.undo()
    store = TelemetryStore(tmp_path)
    assert store.recovered == 2
    store.close()
    rows = read_rows(tmp_path)
    assert [(r["seq"], r["arrival"], r["recorder_dup"]) for r in rows] == [(i, i, False) for i in range(5)]
    files = sorted(tmp_path.glob("date=*/part-*.parquet"))
    assert len(files) == 2 and files[0] == first[0]
