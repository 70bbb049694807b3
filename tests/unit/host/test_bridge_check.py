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
        f'broker = "127.0.0.1:1"\nstats_every = 60\nmetrics = "127.0.0.1:0"\n[[board]]\nname = "shed"\n'
        f'port = "{port}"\n',
        "--port",
        "/dev/serial/by-id/usb-*",
    )
    assert result.returncode == 0, result.stderr
    assert f"configuration OK: boards shed={port}, usb-*=/dev/serial/by-id/usb-*; broker 127.0.0.1:1" in result.stdout
    assert "counters every 60 s" in result.stdout and not port.exists()
    assert "metrics 127.0.0.1:0" in result.stdout  # (port 0: any free one, as the run takes it)


def test_identify_makes_each_named_port_expect_its_name_as_the_client_id(tmp_path: Path) -> None:
    """`identify = true` (or --identify): a named board's name is the client id its board must say; a board's own
    client_id key wins; a port given by its path alone (no NAME=) is not checked."""
    result = check(
        tmp_path,
        'broker = "127.0.0.1:1"\nidentify = true\n[[board]]\nname = "shed"\nport = "/dev/ttyUSB7"\n'
        '[[board]]\nname = "barn"\nport = "/dev/ttyUSB8"\nclient_id = "barn-esp32"\n',
        "--port", "loft=/dev/ttyUSB9", "--port", "/dev/ttyACM0",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (
        "boards shed=/dev/ttyUSB7 (client id shed), barn=/dev/ttyUSB8 (client id barn-esp32), "
        "loft=/dev/ttyUSB9 (client id loft), ttyACM0=/dev/ttyACM0;" in result.stdout
    ), result.stdout


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('broker = "127.0.0.1:1"\nstats_evry = 5\n', "unknown key stats_evry"),
        ('broker = "localhost"\n', "localhost"),
        ('broker = "127.0.0.1:1"\n[tls]\ncafile = "/nonexistent/ca.pem"\n', "[tls]:"),
        ('broker = "127.0.0.1:1"\nmetrics = "nowhere"\n', "nowhere"),
        ("", "no broker"),
        ('broker = "127.0.0.1:1"\n[[board]]\nport = "/dev/serial/by-id/usb-*"\nclient_id = "shed"\n', "a pattern"),
    ],
)
def test_a_bad_configuration_exits_2_saying_what_is_wrong(tmp_path: Path, toml: str, message: str) -> None:
    result = check(tmp_path, toml)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def record_check(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "host_bridge", "record", "--check", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )


def test_the_recorder_checks_its_options_without_connecting_or_writing(tmp_path: Path) -> None:
    """`host-bridge record --check`: a broker nobody listens on and an output folder not made yet pass (nothing is
    connected to or written); a bad topic, a missing CA or an output under a file do not."""
    out = tmp_path / "store" / "day"
    ok = record_check(
        tmp_path, "--broker", "127.0.0.1:1", "--out", str(out), "--topic", "sensors/+/telemetry",
        "--metrics", "127.0.0.1:0",
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert "configuration OK: broker 127.0.0.1:1; topics sensors/+/telemetry" in ok.stdout and not out.exists()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for args, message in (
        (["--topic", "sensors/#/x"], "--topic sensors/#/x"),
        (["--tls", "--cafile", "/nonexistent/ca.pem"], "--tls:"),
        (["--metrics", "nowhere"], "--metrics"),
    ):
        bad = record_check(tmp_path, "--broker", "127.0.0.1:1", "--out", str(out), *args)
        assert bad.returncode == 2 and message in bad.stderr, (args, bad.stderr)
    under_file = record_check(tmp_path, "--broker", "127.0.0.1:1", "--out", str(blocker / "x"))
    assert under_file.returncode == 2 and "is not a folder this user can write" in under_file.stderr


def test_the_recorder_takes_a_toml_file_and_the_command_line_wins_over_it(tmp_path: Path) -> None:
    """`host-bridge record --config FILE`: its keys are the options', the command line wins over them, [tls] turns
    TLS on; an unknown key, a wrong type or no broker anywhere is refused with the file and the key (exit 2)."""
    out = tmp_path / "store"
    config = tmp_path / "recorder.toml"
    config.write_text(
        f'broker = "127.0.0.1:1"\nout = "{out}"\ntopic = ["lab/#", "hall/+/t"]\nmetrics = "127.0.0.1:0"\n'
    )
    ok = record_check(tmp_path, "--config", str(config))
    assert ok.returncode == 0, ok.stderr
    assert f"configuration OK (from {config} and the command line): broker 127.0.0.1:1; topics lab/#,hall/+/t; " \
           f"out {out}; tls no" in ok.stdout, ok.stdout  # fmt: skip
    over = record_check(tmp_path, "--config", str(config), "--broker", "127.0.0.1:2", "--topic", "x/#")
    assert over.returncode == 0 and "broker 127.0.0.1:2; topics x/#;" in over.stdout, over.stdout
    tls = tmp_path / "tls.toml"
    tls.write_text(config.read_text() + '[tls]\ncafile = "/nonexistent/ca.pem"\n')
    refused = record_check(tmp_path, "--config", str(tls))
    assert refused.returncode == 2 and "--tls:" in refused.stderr, refused.stderr  # [tls] on, its CA checked
    for text, message in (
        ('brokr = "127.0.0.1:1"\n', "unknown key brokr"),
        (f'broker = "127.0.0.1:1"\nout = "{out}"\nkeepalive = "long"\n', "keepalive = 'long'"),
        (f'out = "{out}"\n', "no broker: give --broker HOST:PORT"),
    ):
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        result = record_check(tmp_path, "--config", str(bad))
        assert result.returncode == 2 and message in result.stderr, (text, result.stderr)
        assert "Traceback" not in result.stderr
