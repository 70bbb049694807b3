"""The service side of the bridge and the recorder (host_bridge.systemd, tools/systemd/): the notify protocol
against a socket that stands in for systemd's (a path and an abstract name, as sd_notify(3) has them), the
watchdog's interval from the environment, and the unit files: verified by systemd-analyze where it is installed,
and their command lines parsed by host-bridge's own parser."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from host_bridge import systemd
from host_bridge.cli import build_parser
from tests.conftest import REPO

UNITS = sorted((REPO / "tools" / "systemd").glob("*.service"))


@pytest.fixture
def systemd_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = tmp_path / "notify"
    sock.bind(str(path))
    sock.settimeout(5)
    monkeypatch.setenv("NOTIFY_SOCKET", str(path))
    yield sock
    sock.close()


def test_notify_sends_the_fields_as_one_datagram(systemd_socket: socket.socket) -> None:
    assert systemd.notify("READY=1", "STATUS=serving 3 boards")
    assert systemd_socket.recv(4096) == b"READY=1\nSTATUS=serving 3 boards"


def test_notify_reaches_an_abstract_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"dmqtt-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5)
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        assert systemd.notify("STOPPING=1")
        assert sock.recv(4096) == b"STOPPING=1"


def test_without_systemd_nothing_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert not systemd.notify("READY=1")


def test_the_watchdog_pets_at_half_the_units_interval(
    systemd_socket: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WATCHDOG_USEC", "200000")  # WatchdogSec=0.2
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    dog = systemd.Watchdog()
    assert dog.interval == pytest.approx(0.1)
    dog.pet()
    assert systemd_socket.recv(4096) == b"WATCHDOG=1"
    dog.pet()  # not due yet: nothing sent
    systemd_socket.settimeout(0.02)
    with pytest.raises(TimeoutError):
        systemd_socket.recv(4096)
    assert 0 < (dog.wait_s() or 0) <= 0.1


def test_the_watchdog_is_off_for_another_process_or_without_an_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WATCHDOG_USEC", "200000")
    monkeypatch.setenv("WATCHDOG_PID", "1")
    assert systemd.Watchdog().wait_s() is None
    monkeypatch.delenv("WATCHDOG_USEC")
    monkeypatch.delenv("WATCHDOG_PID")
    assert systemd.Watchdog().wait_s() is None


def exec_start(unit: Path) -> list[str]:
    line = next(ln for ln in unit.read_text().splitlines() if ln.startswith("ExecStart="))
    return shlex.split(line.removeprefix("ExecStart="))


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_each_unit_runs_a_command_host_bridge_takes_and_speaks_the_notify_protocol(unit: Path) -> None:
    text = unit.read_text()
    assert "Type=notify" in text and "WatchdogSec=" in text and "ExecReload=/bin/kill -HUP $MAINPID" in text
    argv = exec_start(unit)
    assert Path(argv[0]).name == "host-bridge"
    args = build_parser().parse_args(argv[1:])  # exits 2 on an option the command does not have
    assert args.command in ("run", "record")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_systemd_analyze_verifies_each_unit(unit: Path, tmp_path: Path) -> None:
    # verify wants the program to exist: the unit as installed, with this checkout's host-bridge in its place.
    program = Path(sys.executable).with_name("host-bridge")
    copy = tmp_path / unit.name
    copy.write_text(unit.read_text().replace("/opt/dmqtt/venv/bin/host-bridge", str(program)))
    run = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert unit.name not in run.stderr, run.stderr  # (warnings about the unit itself)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_each_unit_is_rated_3_or_better_by_systemd_analyze_security(unit: Path) -> None:
    run = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", "--no-pager", str(unit)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    level = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", run.stdout)
    assert level is not None, run.stdout + run.stderr
    assert float(level[1]) <= 3.0, run.stdout
    settings = dict(ln.split("=", 1) for ln in unit.read_text().splitlines() if "=" in ln and not ln.startswith("#"))
    # A dedicated user, nothing of the system writable, no capability.
    assert settings["User"] == "dmqtt" and settings["ProtectSystem"] == "strict" and settings["PrivateTmp"] == "yes"
    assert settings["CapabilityBoundingSet"] == "" and "ReadWritePaths" not in settings


def test_the_bridge_reaches_serial_ports_only_and_the_recorder_writes_its_state_directory_only() -> None:
    import tomllib

    bridge = (REPO / "tools" / "systemd" / "dmqtt-bridge.service").read_text()
    assert "DevicePolicy=closed\n" in bridge and "SupplementaryGroups=dialout\n" in bridge
    allowed = re.findall(r"^DeviceAllow=(\S+) rw$", bridge, re.M)
    assert sorted(allowed) == ["char-pts", "char-ttyACM", "char-ttyUSB"], allowed
    recorder = (REPO / "tools" / "systemd" / "dmqtt-recorder.service").read_text()
    assert "PrivateDevices=yes\n" in recorder and "StateDirectory=dmqtt\n" in recorder
    out = tomllib.loads((REPO / "tools" / "systemd" / "recorder.toml").read_text())["out"]
    assert Path(out).is_relative_to("/var/lib/dmqtt"), out  # the store where the unit lets it write


def test_the_example_bridge_toml_is_one_the_bridge_takes() -> None:
    import tomllib

    from host_bridge.bridge.config import load

    path = REPO / "tools" / "systemd" / "bridge.toml"
    conf = load(path, tomllib.loads(path.read_text()))
    assert conf.metrics and conf.stats_every > 0 and any("*" in b.port for b in conf.board)


def test_the_example_recorder_toml_is_one_the_recorder_takes_and_its_unit_reads_it() -> None:
    from host_bridge.recorder.config import read

    conf = read(REPO / "tools" / "systemd" / "recorder.toml")
    assert conf.broker and conf.out and conf.confirm and conf.metrics and conf.mqtt_version == "5"
    unit = (REPO / "tools" / "systemd" / "dmqtt-recorder.service").read_text()
    assert "host-bridge record --config /etc/dmqtt/recorder.toml\n" in unit, unit


def test_a_recorder_reload_accounts_for_every_setting_of_its_file() -> None:
    """Each key of recorder.toml is either applied by a reload or named as needing a restart: a key added to the
    schema and forgotten by reload() would change nothing and say nothing."""
    from host_bridge.recorder import recorder
    from host_bridge.recorder.config import RecorderConfig

    handled = {*recorder._LIVE, *recorder._RESTART}
    assert not set(recorder._LIVE) & set(recorder._RESTART)
    # (wait: how long a start waits; [tls] is the cafile, certfile and keyfile options)
    assert set(RecorderConfig.__struct_fields__) - {"wait"} == handled - {"cafile", "certfile", "keyfile"}
