"""The virtual board's console port, as a real board's USB serial port: its REPL (friendly, raw and raw-paste,
Ctrl-C, soft reset) serves mpremote, so that `host-bridge deploy` installs onto a virtual board exactly as onto a
chip, .mpy files or a ROMFS image, and the board then runs from what was deployed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dmqtt
from dboard.console_host import summary as parse_summary
from host_bridge.boards.definition import SECTOR, BoardDefinition
from host_bridge.broker.mosquitto import Mosquitto
from tests.conftest import REPO

APPS = REPO / "tests" / "vboard_apps"


@contextmanager
def console_board(tmp_path: Path, *args: str) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """`host-bridge vboard --console --no-deploy` on a blank flash (a stock image, nothing deployed): the board
    sits at its REPL."""
    link = tmp_path / "ttyUSB0"
    board = subprocess.Popen(
        [sys.executable, "-m", "host_bridge", "vboard", "--flash", str(tmp_path / "b.flash"), "--no-serial"]
        + ["--no-deploy", "--console", str(link), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",  # the console carries the raw REPL's binary answers too
        cwd=REPO,
    )
    try:
        assert board.stdout is not None
        assert board.stdout.readline().startswith("console-port: ")
        yield board, link
    finally:
        if board.poll() is None:
            board.terminate()  # the CLI unwinds on SIGTERM and stops the board it started
        board.wait(30)


def mpremote(link: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mpremote", "connect", str(link), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def deploy(link: Path, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "host_bridge", "deploy", "--port", str(link), "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
    )


def output(board: subprocess.Popen[str]) -> str:
    out, _ = board.communicate(timeout=120)
    return out


def config_file(tmp_path: Path, broker: Mosquitto, dev: str) -> Path:
    path = tmp_path / "board.json"
    path.write_text(
        json.dumps(
            {"client_id": dev, "broker": broker.address, "mqtt_version": "5", "publish": {"qos": 2, "count": 20}}
        )
    )
    return path


def test_the_repl_answers_mpremote_and_ctrl_c_stops_a_running_program(tmp_path: Path) -> None:
    with console_board(tmp_path) as (board, link):
        # exec and eval through the raw REPL (mpremote soft-resets the board into it first).
        result = mpremote(link, "exec", "import machine; print('cause', machine.reset_cause())", "+", "eval", "6*7")
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == ["cause", "5", "42"]  # the soft reset is one (SOFT_RESET)
        errors = mpremote(link, "resume", "exec", "raise ValueError('from the board')")
        assert errors.returncode == 1 and "ValueError: from the board" in errors.stdout + errors.stderr
    with console_board(tmp_path) as (board, link):
        # A program that never ends (the console app's "forever" mode) is stopped by Ctrl-C, as on a chip.
        mpremote(link, "resume", "fs", "cp", str(APPS / "console" / "main.py"), ":main.py")
        (tmp_path / "forever.json").write_text(json.dumps({"client_id": "x", "forever": True}))
        mpremote(link, "resume", "fs", "cp", str(tmp_path / "forever.json"), ":config.json", "+", "reset")
        assert board.stdout is not None
        time.sleep(1.0)
        with open(link, "r+b", buffering=0) as port:
            port.write(b"\x03")
            deadline = time.monotonic() + 10
            seen = b""
            while b">>> " not in seen and time.monotonic() < deadline:
                time.sleep(0.05)
                seen += port.read(4096) or b""
        assert b"KeyboardInterrupt" in seen and seen.rstrip().endswith(b">>>"), seen[-300:]


def test_deploy_installs_onto_a_virtual_board_which_then_runs_from_it(tmp_path: Path, broker: Mosquitto) -> None:
    with console_board(tmp_path) as (board, link):
        result = deploy(link, config_file(tmp_path, broker, "deployed-1"))
        assert result.returncode == 0, result.stdout + result.stderr
        out = output(board)  # deploy ended with a reset: the board runs main.py from its filesystem and ends
    summary = parse_summary(out)
    assert summary is not None and (summary["sent"], summary["total"]) == (20, 20), out[-2000:]
    assert 32 * 1024 <= summary["heap_min"] < 48 * 1024, summary  # the code is in the heap: deployed
    # The version it runs, in its boot line and its summary: the one this host has.
    assert summary["version"] == dmqtt.__version__ and f"in flight, dmqtt {dmqtt.__version__}" in out, out[-2000:]
    # The files are on the board's filesystem: booted again (without the runner installing anything), it
    # runs the same firmware and finds its run complete.
    again = subprocess.run(
        [sys.executable, "-m", "host_bridge", "vboard", "--flash", str(tmp_path / "b.flash"), "--no-serial"]
        + ["--no-deploy"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    second = parse_summary(again.stdout)
    assert again.returncode == 0 and second is not None and (second["boot"], second["sent"]) == (2, 0), again.stdout


def test_deploy_romfs_writes_the_image_and_the_board_runs_it_from_flash(tmp_path: Path, broker: Mosquitto) -> None:
    with console_board(tmp_path) as (board, link):
        # Left by an earlier .mpy deploy, in each package's folder: they must not shadow the image's modules.
        for package, module in (("dmqtt", "client"), ("dboard", "console")):
            mpremote(link, "resume", "fs", "mkdir", f":{package}")
            mpremote(link, "resume", "fs", "cp", str(APPS / "console" / "main.py"), f":{package}/{module}.mpy")
        result = deploy(link, config_file(tmp_path, broker, "romfs-1"), "--romfs")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "ROMFS image deployed" in result.stdout
        out = output(board)
    summary = parse_summary(out)
    assert summary is not None and summary["total"] == 20, out[-2000:]
    assert summary["heap_min"] > 56 * 1024, summary  # the code runs from the image: more than deployed leaves
    sim = BoardDefinition.load("sim")
    romfs = next(p for p in sim.data_partitions(sim.flash_size) if p.label == "romfs")
    with open(tmp_path / "b.flash", "rb") as flash:
        flash.seek(romfs.offset)
        assert flash.read(3) == b"\xd2\xcd\x31"  # a ROMFS header: mpremote romfs deploy wrote it through rom_ioctl
        flash.seek(romfs.offset + romfs.size - SECTOR)
        assert flash.read(SECTOR) == b"\xff" * SECTOR  # written where the image is, nowhere else


def test_deploy_romfs_to_an_image_without_romfs_says_what_to_do(tmp_path: Path, broker: Mosquitto) -> None:
    with console_board(tmp_path, "--board", "esp32-devkitc") as (board, link):
        refused = deploy(link, config_file(tmp_path, broker, "noromfs-1"), "--romfs")
        assert refused.returncode == 2
        assert "no ROMFS partition" in refused.stderr and "make firmware" in refused.stderr
        assert "--fallback-mpy" in refused.stderr
        fallback = deploy(link, config_file(tmp_path, broker, "noromfs-1"), "--romfs", "--fallback-mpy")
        assert fallback.returncode == 0, fallback.stdout + fallback.stderr
        assert "deploying .mpy files instead" in fallback.stdout
        out = output(board)
    summary = parse_summary(out)
    assert summary is not None and summary["total"] == 20, out[-2000:]
