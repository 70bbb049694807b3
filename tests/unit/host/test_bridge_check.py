"""`host-bridge run --check`: a bridge's configuration checked without opening a port or connecting, exit 0 with
what it would serve, or 2 saying what is wrong (before a restart or a SIGHUP)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def check(tmp_path: Path, toml: str, *args: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "bridge.toml"
    config.write_text(toml)
    return subprocess.run(
        [sys.executable, "-m", "host_bridge", "run", "--config", str(config), "--check", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )


def test_a_good_configuration_says_what_it_would_serve_and_touches_nothing(tmp_path: Path) -> None:
    """A port that does not exist and a broker nobody listens on: a check opens neither, so both pass."""
    port = tmp_path / "ttyUSB9"
    result = check(
        tmp_path,
        f'broker = "127.0.0.1:1"\nstats_every = 60\n[[board]]\nname = "shed"\nport = "{port}"\n',
        "--port",
        "/dev/serial/by-id/usb-*",
    )
    assert result.returncode == 0, result.stderr
    assert f"configuration OK: boards shed={port}, usb-*=/dev/serial/by-id/usb-*; broker 127.0.0.1:1" in result.stdout
    assert "counters every 60 s" in result.stdout and not port.exists()


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('broker = "127.0.0.1:1"\nstats_evry = 5\n', "unknown key stats_evry"),
        ('broker = "localhost"\n', "localhost"),
        ('broker = "127.0.0.1:1"\n[tls]\ncafile = "/nonexistent/ca.pem"\n', "[tls]:"),
        ('broker = "127.0.0.1:1"\nmetrics = "nowhere"\n', "nowhere"),
        ("", "no broker"),
    ],
)
def test_a_bad_configuration_exits_2_saying_what_is_wrong(tmp_path: Path, toml: str, message: str) -> None:
    result = check(tmp_path, toml)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
