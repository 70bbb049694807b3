"""The bench's pytest plugin in someone else's test run (it loads into every pytest run of the environment): it
installs no signal handler unless a test uses the bench, and `pytest --fixtures` documents each of its fixtures."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

PLAIN = """
import signal

def test_no_handler_without_the_bench():
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL

def test_the_bench_installs_it(hil_config):
    assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL
"""


def pytest_in(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_plain_test_run_gets_no_signal_handler(tmp_path: Path) -> None:
    (tmp_path / "test_plain.py").write_text(PLAIN)
    run = pytest_in(tmp_path, "-q", "test_plain.py")  # in this order: the first test runs before the bench's
    assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout + run.stderr


def test_every_fixture_of_the_plugin_has_a_docstring(tmp_path: Path) -> None:
    (tmp_path / "test_plain.py").write_text(PLAIN)
    run = pytest_in(tmp_path, "--fixtures", "test_plain.py")
    section = run.stdout.split("fixtures defined from host_bridge.hil.plugin")[1].split("\n---")[0]
    names = re.findall(r"^(\w+)(?: \[[^\]]*\])? -- ", section, re.M)
    assert {"hil_config", "broker", "duts", "dut", "subscriber", "verdict", "bridge", "hil_log"} <= set(names)
    assert "no docstring available" not in section, section
