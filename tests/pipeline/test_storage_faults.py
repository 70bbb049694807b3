"""Storage faults told apart from delivery (issue 66): a data file truncated to nothing, cut short, or overwritten
with other bytes is no Parquet. The audit neither skips it silently nor counts its messages lost: it ends with
exit 2 and one line naming the file and what to do, before a JVM starts (so no Java stack trace), or with
--quarantine-damaged judges the rest and lists the files apart from delivery in its summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from dmqtt_pipeline.jobs import run_job
from dmqtt_pipeline.spark import check_storage
from dmqtt_telemetry import format as telemetry
from tests.conftest import REPO
from tests.pipeline.datasets import Msg, write_dataset


def damaged_store(out: Path) -> list[Path]:
    """Board "sf" sends 0..9, committed in two files; three copies of the first file are then damaged the three
    ways (so every message is still in the good files, and a judge that read the damaged ones as lost is
    wrong). -> the damaged files."""
    write_dataset(out, [Msg("sf", 1, s, s * 10) for s in range(10)], commit_every=5)
    first = telemetry.committed_files(out)[0]
    data = first.read_bytes()
    damaged = [first.with_name(f"part-999999999{i}-0.parquet") for i in range(3)]
    damaged[0].write_bytes(b"")  # truncated to nothing
    damaged[1].write_bytes(data[: len(data) // 2])  # cut short
    damaged[2].write_bytes(os.urandom(len(data)))  # overwritten
    return damaged


def test_each_damaged_file_is_found_from_its_footer(tmp_path: Path) -> None:
    damaged = damaged_store(tmp_path)
    found = dict(telemetry.damaged_files(tmp_path))
    assert sorted(found) == sorted(damaged) and found[damaged[0]] == "empty (0 bytes)"


def test_the_audit_ends_with_exit_2_and_one_line_naming_the_file(tmp_path: Path) -> None:
    damaged = damaged_store(tmp_path / "rec")
    run = subprocess.run(
        [sys.executable, "-m", "dmqtt_pipeline", "audit", "--input", str(tmp_path / "rec"), "--out",
         str(tmp_path / "audit")],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert run.returncode == 2, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert f"storage fault, not a delivery loss: {damaged[0]} is no readable Parquet (empty (0 bytes))" in lines[0]
    assert "(and 2 more)" in lines[0] and "--quarantine-damaged" in lines[0]
    assert "starting Spark" not in run.stdout and not (tmp_path / "audit").exists()  # no JVM, nothing written


def test_quarantined_files_are_left_out_and_listed_apart_from_delivery(tmp_path: Path, spark: SparkSession) -> None:
    damaged = damaged_store(tmp_path / "rec")
    left_out = check_storage(str(tmp_path / "rec"), quarantine=True)
    assert sorted(left_out) == sorted(str(p) for p in damaged)
    outcome = run_job(spark, "audit", str(tmp_path / "rec"), str(tmp_path / "audit"), damaged=left_out)
    assert outcome.exit_code == 0  # every message of "sf" is in the good files: nothing lost
    summary = json.loads((tmp_path / "audit" / "summary.json").read_text())
    assert sorted(summary["damaged_files"]) == sorted(left_out) and summary["qos"]["1"]["lost"] == 0
    assert summary["rows"] == 10
