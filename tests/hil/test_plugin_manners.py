"""The bench's pytest plugin in someone else's test run (it loads into every pytest run of the environment): it
installs no signal handler unless a test uses the bench, `pytest --fixtures` documents each of its fixtures, its
options are read from an ini file too, and it shares a session with pytest-embedded (Espressif's plugin for the
same audience, installed beside it by `make venv` in .venv/neighbours, outside the suite's own environment)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

PLAIN = """
import signal

def test_no_handler_without_the_bench():
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL

def test_the_bench_installs_it(hil_config):
    assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL
"""


NEIGHBOURS = REPO / ".venv" / "neighbours"  # pytest-embedded and its dependencies (tests/hil/neighbours.txt)


def pytest_in(folder: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", *args],
        cwd=folder,
        env=env,
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
    assert {"hil_config", "hil_broker", "hil_duts", "hil_dut", "hil_subscriber", "hil_verdict", "hil_bridge", "hil_log",
            "hil_ap", "hil_fleet"} <= set(names)  # fmt: skip
    # Installing the package adds no generic name (`broker`, `dut`: pytest-embedded's) to another project's run.
    assert [name for name in names if not name.startswith("hil_")] == []
    assert "no docstring available" not in section, section


def test_the_plugins_markers_are_named_hil(tmp_path: Path) -> None:
    (tmp_path / "test_plain.py").write_text(PLAIN)
    markers = re.findall(r"^@pytest\.mark\.(\w+)", pytest_in(tmp_path, "--markers").stdout, re.M)
    assert {"hil_real", "hil_virtual", "hil_broker"} <= set(markers)
    assert "broker" not in markers


INI_OPTIONS = """
import pytest

def test_options(hil_config):
    spec = hil_config.duts[0]
    print("resolved", spec.port, spec.board, spec.link_port, hil_config.power_cmd, hil_config.cycles,
          hil_config.install)
"""


def test_every_option_is_an_ini_option_and_the_command_line_wins(tmp_path: Path) -> None:
    (tmp_path / "test_ini.py").write_text(INI_OPTIONS)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nhil_dut = /dev/ttyUSB0\nhil_board = esp32-devkitc\nhil_link_port = /dev/ttyUSB1\n"
        "hil_power_cmd = uhubctl -a cycle -p {port}\nhil_cycles = 3\nhil_install = romfs\n"
    )
    run = pytest_in(tmp_path, "-q", "-s", "test_ini.py")
    assert "resolved /dev/ttyUSB0 esp32-devkitc /dev/ttyUSB1 uhubctl -a cycle -p {port} 3 romfs" in run.stdout, (
        run.stdout + run.stderr
    )
    run = pytest_in(tmp_path, "-q", "-s", "test_ini.py", "--hil-dut", "sim", "--hil-board", "sim", "--hil-install",
                    "frozen")  # fmt: skip
    assert "resolved None sim /dev/ttyUSB1 uhubctl -a cycle -p {port} 3 frozen" in run.stdout, run.stdout + run.stderr
    (tmp_path / "pytest.ini").write_text("[pytest]\nhil_install = flashed\n")
    run = pytest_in(tmp_path, "-q", "test_ini.py")
    assert run.returncode == 4 and "hil_install = flashed: expected one of deployed, romfs, frozen" in run.stderr


BOTH = """
def test_pytest_embedded_owns_dut(dut):
    assert type(dut).__module__.startswith("pytest_embedded")
    dut.write("hello")
    dut.expect("hello")

def test_the_bench_boots_a_board_in_the_same_session(hil_dut):
    hil_dut.configure({"client_id": "neighbour", "broker": "127.0.0.1:1", "publish": {"qos": 1, "count": 1}})
    hil_dut.start()
    hil_dut.expect(r"boot 1: 0 in flight", timeout=30)
"""


def test_pytest_embedded_and_the_bench_share_one_session(tmp_path: Path) -> None:
    assert (NEIGHBOURS / "pytest_embedded").is_dir(), f"{NEIGHBOURS} lacks pytest-embedded: run make venv"
    (tmp_path / "test_both.py").write_text(BOTH)
    run = pytest_in(tmp_path, "-q", "test_both.py", env={**os.environ, "PYTHONPATH": str(NEIGHBOURS)})
    assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout + run.stderr
    # Both plugins were loaded by their entry points (none given with -p).
    version = pytest_in(tmp_path, "--version", "--version", env={**os.environ, "PYTHONPATH": str(NEIGHBOURS)})
    assert (
        "pytest-embedded-2.9.3" in version.stdout + version.stderr and "durable-mqtt" in version.stdout + version.stderr
    )
