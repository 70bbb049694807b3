"""`make demo` end to end, at a smaller dose: virtual boards through power cuts, a noisy serial line, the
bridge and a recorder that gets SIGKILLed, to the audit's verdict (the Spark jobs run as a user runs them,
`host-bridge pipeline all`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from host_bridge.campaigns.demo import run_demo
from tests.conftest import REPO


def test_demo_from_virtual_boards_to_the_verdict(tmp_path: Path) -> None:
    result = run_demo(tmp_path / "demo", messages=60, cuts=2, seed=7)
    assert result.exit_code == 0
    assert result.recorder_kills == 1
    cuts = {r.spec.qos: r.cuts for r in result.runs}
    assert cuts == {0: 2, 1: 2, 2: 2}, cuts  # every cut wanted, on every board
    assert all(r.summary is not None and r.summary["total"] == 60 for r in result.runs)
    assert result.audit is not None and result.audit.ok
    verdicts = result.audit.verdicts
    assert (verdicts[1].messages, verdicts[1].lost) == (60, 0)
    assert (verdicts[2].messages, verdicts[2].lost, verdicts[2].duplicates) == (60, 0, 0)
    summary = json.loads((tmp_path / "demo" / "results" / "summary.json").read_text())
    assert summary["ok"] and {q["verdict"] for q in summary["qos"].values()} == {"PASS"}
    assert (tmp_path / "demo" / "results" / "report" / "index.html").exists()
    assert '"event": "connected"' in (tmp_path / "demo" / "logs" / "bridge.log").read_text()
    # Every process it started has ended: broker, both recorders, bridge, every boot of every board.
    assert len(result.pids) == 4 + sum(r.boots for r in result.runs)
    for pid in result.pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line or environment mentions `text` (a test's own temporary path)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if text.encode() in (entry / "cmdline").read_bytes() + (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            pass  # ended meanwhile, or not ours to read
    return found


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_demo_interrupted_leaves_no_process_behind(tmp_path: Path, sig: signal.Signals) -> None:
    """Ctrl-C (or SIGTERM) in the middle of the boards' runs: the demo stops everything it started, boards
    included (they run in sessions of their own, so the terminal's SIGINT never reaches them)."""
    out = tmp_path / "demo"
    # As from a terminal: Ctrl-C handled, even when this test runs in a background job (a shell starts those with
    # SIGINT ignored, which a child inherits, and then Python never installs its handler).
    as_from_a_terminal = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "sys.argv[0] = 'host-bridge'; runpy.run_module('host_bridge', run_name='__main__')"
    )
    demo = subprocess.Popen(
        [sys.executable, "-c", as_from_a_terminal, "demo", "--out", str(out), "--messages", "2000"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert demo.stdout is not None
    for line in demo.stdout:
        if b"[2/5]" in line:
            break
    time.sleep(1.5)
    assert len(processes_mentioning(str(out))) >= 4  # broker, recorder, bridge, boards
    demo.send_signal(sig)
    demo.communicate(timeout=60)
    assert demo.returncode == 130
    deadline = time.monotonic() + 5
    while processes_mentioning(str(out)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_mentioning(str(out)) == []
