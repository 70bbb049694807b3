"""`make demo` end to end, at a smaller dose: virtual boards through power cuts, a noisy serial line, the
bridge and a recorder that gets SIGKILLed, to the audit's verdict (with the test session's SparkSession)."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession

from host_bridge.demo import run_demo


def test_demo_from_virtual_boards_to_the_verdict(tmp_path: Path, spark: SparkSession) -> None:
    result = run_demo(tmp_path / "demo", messages=60, cuts=2, seed=7, spark=spark)
    assert result.exit_code == 0
    assert result.recorder_kills == 1
    cuts = {r.spec.qos: r.cuts for r in result.runs}
    assert cuts[1] >= 1 and cuts[2] >= 1 and sum(cuts.values()) >= 3, cuts
    assert all(r.summary is not None and r.summary["total"] == 60 for r in result.runs)
    assert result.outcome is not None and result.outcome.audit is not None
    verdicts = result.outcome.audit.verdicts
    assert (verdicts[1].messages, verdicts[1].lost) == (60, 0)
    assert (verdicts[2].messages, verdicts[2].lost, verdicts[2].duplicates) == (60, 0, 0)
    summary = json.loads((tmp_path / "demo" / "results" / "summary.json").read_text())
    assert summary["ok"] and {q["verdict"] for q in summary["qos"].values()} == {"PASS"}
    assert (tmp_path / "demo" / "results" / "report" / "index.html").exists()
    assert "event=connected" in (tmp_path / "demo" / "logs" / "bridge.log").read_text()
