"""Command-line mistakes end with exit 2 and a message that says what a right value looks like: no traceback,
and nothing created (no flash file for a board that never starts)."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--heap", "lots"], "argument --heap: 'lots' is not a size: give bytes, or a number with k or M"),
        (["--heap", "10q"], "argument --heap: '10q' is not a size"),
        (["--flash-size", "0"], "argument --flash-size: '0' is not a size"),
    ],
)
def test_a_size_that_is_not_one_is_refused_before_anything_runs(tmp_path: Path, args: list[str], message: str) -> None:
    vboard_refuses(tmp_path, args, message)


def vboard_refuses(folder: Path, args: list[str], message: str) -> None:
    """`host-bridge vboard --flash b.flash ARGS`, run in `folder`, ends with exit 2 and `message`, no traceback,
    and no flash file."""
    flash = folder / "b.flash"
    run = subprocess.run(
        [sys.executable, "-m", "host_bridge", "vboard", "--flash", str(flash), *args],
        capture_output=True,
        text=True,
        cwd=folder,
        timeout=60,
    )
    assert run.returncode == 2 and message in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and not flash.exists()


@pytest.mark.parametrize(
    ("config", "args", "message"),
    [
        ('{"client_id": "b", "broker": "127.0.0.1:1", "publish": {"qso": 2}}', [], "c.json: unknown key publish.qso"),
        ('{"client_id": "b",\n "broker": "127.0.0.1:1"\n "publish": {}}', [], "c.json:3:2: not valid JSON"),
        ('{"client_id": "b", "broker": "localhost"}', [], "c.json: broker must be host:port, got 'localhost'"),
        ('{"client_id": "b", "publish": {"qos": 3}}', [], "c.json: broker must be host:port"),
        (
            '{"client_id": "b", "broker": "127.0.0.1:1"}',
            ["--wait", "0"],
            "broker 127.0.0.1:1 unreachable (Connection refused): is it running (host-bridge broker starts one), "
            "and is the broker in",
        ),
        ('{"client_id": "b", "broker": "127.0.0.1:1"}', ["--wait", "soon"], "'soon' is not a number of seconds"),
    ],
)
def test_vboard_checks_the_config_and_the_broker_before_creating_a_flash_file(
    tmp_path: Path, config: str, args: list[str], message: str
) -> None:
    (tmp_path / "c.json").write_text(config)
    vboard_refuses(tmp_path, ["--config", "c.json", *args], message)


def test_every_subcommand_has_a_help_that_shows_its_defaults() -> None:
    from host_bridge.cli import COMMANDS, build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(commands.choices) == set(COMMANDS)
    parsers = list(commands.choices.items())
    for name, sub in parsers:
        text = sub.format_help()
        assert text.startswith(f"usage: host-bridge {name}"), name
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):  # host-bridge pipeline JOB
                parsers += [(f"{name} {job}", nested) for job, nested in action.choices.items()]
            if action.option_strings and action.default not in (None, False, [], argparse.SUPPRESS):
                assert "default" in (sub._get_formatter()._get_help_string(action) or ""), (name, action.dest)
            # A --no-X flag stored as False shows "(default: True)" under its own name: say both spellings.
            assert not isinstance(action, argparse._StoreFalseAction), (name, action.option_strings)
    run = subprocess.run([sys.executable, "-m", "host_bridge", "--help"], capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0 and all(name in run.stdout for name in COMMANDS)


class FakePort:
    def __init__(self, device: str, vid: int | None, description: str = "USB serial") -> None:
        self.device, self.vid, self.description = device, vid, description


@pytest.mark.parametrize(
    ("ports", "expected"),
    [
        ([FakePort("/dev/ttyUSB0", 0x10C4), FakePort("/dev/ttyS0", None)], "/dev/ttyUSB0"),  # a DevKitC's CP2102
        ([FakePort("/dev/ttyACM0", 0x303A), FakePort("/dev/ttyACM1", 0x2341)], "/dev/ttyACM0"),  # not an Arduino's
        ([], "no board found on USB: plug one in, or give --port PATH"),
        (
            [FakePort("/dev/ttyUSB0", 0x1A86), FakePort("/dev/ttyUSB1", 0x0403)],
            "2 boards found (/dev/ttyUSB0 (WCH), /dev/ttyUSB1 (FTDI)): choose one with --port PATH",
        ),
    ],
)
def test_port_auto_finds_the_one_board_plugged_in(
    monkeypatch: pytest.MonkeyPatch, ports: list[FakePort], expected: str
) -> None:
    from serial.tools import list_ports

    from host_bridge.boards.realboard import DeployError, find_port

    monkeypatch.setattr(list_ports, "comports", lambda: ports)
    assert find_port("/dev/ttyUSB7") == "/dev/ttyUSB7"  # a port given is used as it is
    if expected.startswith("/dev/"):
        assert find_port("auto") == expected
    else:
        with pytest.raises(DeployError, match=re.escape(expected)):
            find_port("auto")


@pytest.mark.parametrize(
    ("topic", "message"),
    [("a/#/b", "'#' must be a whole last level [MQTT-4.7.1-2]"), ("a/b+", "'+' must be a whole level [MQTT-4.7.1-3]")],
)
def test_record_refuses_a_topic_filter_the_broker_would_close_on(tmp_path: Path, topic: str, message: str) -> None:
    out = tmp_path / "rec"
    run = subprocess.run(
        [sys.executable, "-m", "host_bridge", "record", "--broker", "127.0.0.1:1", "--out", str(out), "--topic", topic],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert run.returncode == 2 and f"--topic {topic}: {message}" in run.stderr, run.stderr
    assert not out.exists() and "Traceback" not in run.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--confirm-topic", "confirm/+/{dev}"], "--confirm-topic confirm/+/{dev}: "),
        (["--topic", "$share/g/sensors/#"], "--confirm needs every message of a board in one recorder"),
    ],
)
def test_record_refuses_a_confirmation_it_could_not_keep(tmp_path: Path, extra: list[str], message: str) -> None:
    out = tmp_path / "rec"
    run = subprocess.run(
        [sys.executable, "-m", "host_bridge", "record", "--broker", "127.0.0.1:1", "--out", str(out), "--confirm",
         *extra],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    )  # fmt: skip
    assert run.returncode == 2 and message in run.stderr, run.stderr
    assert not out.exists() and "Traceback" not in run.stderr


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('broker = "127.0.0.1:1883"\nbaud = "fast"\n', "baud = 'fast': expected `int`, got `str`"),
        ("broker = 1883\n", "broker = 1883: expected `str | null`, got `int`"),
        ('broker = "127.0.0.1:1883"\ntls = true\n', "tls = True: expected `object | null`, got `bool`"),
        ('broker = "127.0.0.1:1883"\nbaud = 0\n', "baud = 0: expected `int` >= 1"),
        (
            'broker = "127.0.0.1:1883"\n[[boards]]\nport = "/dev/ttyUSB0"\n',
            "unknown key boards (known: broker, baud, allow, stats_every, log_format, wait, strict_ports, metrics, "
            "health_after, identify, tls, board)",
        ),
        (
            'broker = "127.0.0.1:1883"\n[[board]]\nprot = "/dev/ttyUSB0"\n',
            "unknown key board[1].prot (known: port, name, baud, client_id)",
        ),
        ('broker = "127.0.0.1:1883"\n[[board]]\nname = "a"\n', "board[1]: object missing required field `port`"),
        ('broker = "127.0.0.1:1883"\nstats_every = -1\n', "stats_every = -1: expected `float` >= 0"),
        ('broker = "127.0.0.1:1883"\nlog_format = "xml"\n', "log_format = 'xml': expected one of"),
    ],
)
def test_run_checks_its_toml_against_the_schema(tmp_path: Path, toml: str, message: str) -> None:
    config = tmp_path / "bridge.toml"
    config.write_text(toml)
    run = subprocess.run(
        [sys.executable, "-m", "host_bridge", "run", "--config", str(config)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert run.returncode == 2 and f"{config}: {message}" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--baud", "0"], "argument --baud: 0 is not a baud rate: give a positive number"),
        (["--baud", "fast"], "argument --baud: 'fast' is not a whole number"),
        (["--stats-every", "-5"], "argument --stats-every: '-5' is not a number of seconds (0 or more)"),
    ],
)
def test_run_refuses_a_bad_number_in_its_arguments(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from host_bridge.cli import build_parser

    with pytest.raises(SystemExit) as exited:
        build_parser("run").parse_args(["run", "--broker", "127.0.0.1:1", *args])
    assert exited.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--strict-ports", "--port", "/dev/ttyNOPE0"], "/dev/ttyNOPE0 does not exist (--strict-ports)"),
        (["--port", "/dev/ttyNOPE1", "--metrics", "nowhere"], "--metrics 'nowhere' is not HOST:PORT"),
    ],
)
def test_run_refuses_a_bad_option_before_serving(args: list[str], message: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "host_bridge", "run", "--broker", "127.0.0.1:1", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert run.returncode == 2 and message in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def test_a_virtual_board_stopped_by_its_config_says_how_to_run_it_again(tmp_path: Path) -> None:
    """The board's own words say "reset the board"; `host-bridge vboard` adds what that means for a virtual one."""
    (tmp_path / "c.json").write_text('{"client_id": "b", "broker": "127.0.0.1:1", "tls": {"ca": "missing.pem"}}')
    run = subprocess.run(
        [sys.executable, "-m", "host_bridge", "vboard", "--flash", "b.flash", "--config", "c.json", "--no-serial"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert run.returncode == 3 and "config error: tls.ca: cannot read /flash/missing.pem" in run.stdout, run
    assert (
        "vboard: the board stopped on its config: fix c.json (or the files it names), then run host-bridge "
        "vboard again" in run.stderr
    )
