"""The real-board path, as far as a machine without a board goes: the partition table bytes, the esptool
command lines, and a deploy with mpremote to a MicroPython behind a pseudo-terminal."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from host_bridge.boards import partitions
from host_bridge.boards.firmware_build import MPY_ARCHS
from host_bridge.vboard import BoardDefinition
from host_bridge.vboard.runner import micropython_executable
from tests.conftest import REPO

DEVKIT = BoardDefinition.load("esp32-devkitc")


def test_partition_table_bytes() -> None:
    table = partitions.build(DEVKIT)
    assert len(table) == 0xC00
    # nvs: magic, type data (1), subtype nvs (2), offset 0x9000, size 0x6000, label, flags 0 (little-endian)
    assert table[:32] == bytes.fromhex("aa5001020090000000600000") + b"nvs".ljust(16, b"\0") + bytes(4)
    entries = len(DEVKIT.partitions) * 32
    assert table[entries : entries + 16] == b"\xeb\xeb" + b"\xff" * 14
    assert table[entries + 16 : entries + 32] == hashlib.md5(table[:entries]).digest()
    assert table[entries + 32 :] == b"\xff" * (0xC00 - entries - 32)
    assert partitions.parse(table) == list(DEVKIT.partitions)
    tampered = bytearray(table)
    tampered[0x60 + 4] ^= 1  # an offset changed after the MD5 was computed
    with pytest.raises(partitions.PartitionTableError):
        partitions.parse(bytes(tampered))


def test_flash_dry_run_prints_the_esptool_commands(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "host_bridge", "flash", "--port", "/dev/ttyUSB0", "--image", "mp.bin", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    commands = [line[2:] for line in result.stdout.splitlines() if line.startswith("$ ")]
    esptool = f"{sys.executable} -m esptool --chip esp32 --port /dev/ttyUSB0 --baud 460800"
    table = REPO / "build" / "partitions-esp32-devkitc.bin"
    # The image and the table only: the journal and the filesystem keep what they hold (an upgrade).
    assert commands == [f"{esptool} write-flash -z 0x1000 mp.bin", f"{esptool} write-flash 0x8000 {table}"]
    assert "keeping the journal (mqttlog)" in result.stdout
    assert partitions.parse(table.read_bytes())[-1].label == "mqttlog"
    erased = subprocess.run(
        [sys.executable, "-m", "host_bridge", "flash", "--port", "/dev/ttyUSB0", "--image", "mp.bin", "--dry-run"]
        + ["--erase-all"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    first = next(line[2:] for line in erased.stdout.splitlines() if line.startswith("$ "))
    assert first == f"{esptool} erase-flash" and "journal, boot counter" in erased.stdout


def test_flash_reports_a_missing_image_plainly() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "host_bridge", "flash", "--port", "/dev/ttyUSB0", "--image", "/nonexistent.bin"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "firmware image /nonexistent.bin does not exist" in result.stderr


def test_deploy_refuses_a_bad_config(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"client_id": "x", "broker": "nohost", "publish": {"qos": 1}}))
    result = subprocess.run(
        [sys.executable, "-m", "host_bridge", "deploy", "--port", "/dev/null", "--config", str(bad), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "broker must be host:port" in result.stderr


def test_deploy_with_mpremote_to_a_pty_backed_micropython(tmp_path: Path) -> None:
    board_fs = tmp_path / "board"
    board_fs.mkdir()
    tty = tmp_path / "tty"
    socat = subprocess.Popen(
        ["socat", f"PTY,link={tty},raw,echo=0", f"EXEC:{micropython_executable()},pty,raw,echo=0"],
        cwd=board_fs,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 10
        while not tty.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        config = tmp_path / "config.json"
        config.write_text(json.dumps({"client_id": "deployed", "broker": "127.0.0.1:1883", "publish": {"qos": 2}}))
        result = subprocess.run(
            [sys.executable, "-m", "host_bridge", "deploy", "--port", str(tty), "--config", str(config)]
            + ["--resume", "--no-reset"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
        )
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        os.killpg(socat.pid, signal.SIGTERM)
        socat.wait(10)
    deployed = sorted(str(p.relative_to(board_fs)) for p in board_fs.rglob("*") if p.is_file())
    assert "main.py" in deployed and "board_app.mpy" in deployed and "config.mpy" in deployed
    assert {"dmqtt/codec.mpy", "dmqtt/client.mpy", "dmqtt/journal.mpy", "dmqtt/session.mpy"} <= set(deployed)
    assert json.loads((board_fs / "config.json").read_text())["client_id"] == "deployed"
    assert (board_fs / "dmqtt" / "codec.mpy").read_bytes()[:1] == b"M"  # a MicroPython .mpy file


def test_deploy_puts_files_and_checks_secrets_without_showing_them(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "client_id": "t",
                "broker": "mqtt.example.net:8883",
                "username": "board",
                "tls": {"ca": "ca.pem", "cert": "board.pem"},
                "publish": {"qos": 1},
            }
        )
    )
    secrets = tmp_path / "secrets.json"
    secrets.write_text(
        json.dumps({"password": "s3cret-never-shown", "tls": {"key": "-----BEGIN PRIVATE KEY-----\nS3CRETKEY\n"}})
    )
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")

    def deploy(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "host_bridge",
                "deploy",
                "--port",
                "/dev/ttyACM0",
                "--config",
                str(config),
                "--dry-run",
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
        )

    missing = deploy("--put", str(ca))  # no key anywhere: refused before anything is copied
    assert missing.returncode == 2 and "tls.cert and tls.key go together" in missing.stderr
    ok = deploy("--put", str(ca), "--put", f"{secrets}:secrets.json")
    assert ok.returncode == 0, ok.stderr
    assert f"fs cp {ca} :ca.pem" in ok.stdout and f"fs cp {secrets} :secrets.json" in ok.stdout
    assert "s3cret-never-shown" not in ok.stdout + ok.stderr and "S3CRETKEY" not in ok.stdout + ok.stderr


def test_a_gateway_and_a_node_deploy_with_their_configs_checked(tmp_path: Path) -> None:
    """The real-board path of docs/nodes.md without a board: a gateway's image has the firmware frozen in, so its
    deploy copies only main.py, boot.py and its config; a node's deploys the firmware and its config; each config is
    checked first by the firmware's own checker, and a node whose gateway is no MAC address is refused."""
    gateway = tmp_path / "gateway.json"
    gateway.write_text(json.dumps({"gateway": {"channel": 6, "nodes": [{"mac": "24:d7:eb:00:bb:01",
                                                                      "client_id": "shed-7"}]}}))  # fmt: skip
    node = tmp_path / "node.json"
    node.write_text(json.dumps({"client_id": "shed-7", "transport": "espnow", "espnow": {"gateway": "24d7eb00aa01"},
                                "sleep": {"every_s": 60}}))  # fmt: skip
    deploy = [sys.executable, "-m", "host_bridge", "deploy", "--port", "/dev/null", "--dry-run"]
    out = subprocess.run([*deploy, "--frozen", "--config", str(gateway)], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert f"fs cp {gateway} :config.json" in out.stdout and ":gateway.mpy" not in out.stdout
    out = subprocess.run([*deploy, "--config", str(node)], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert ":dlink/now_node.mpy" in out.stdout and f"fs cp {node} :config.json" in out.stdout
    node.write_text(json.dumps({"client_id": "shed-7", "transport": "espnow", "espnow": {"gateway": "24:d7"},
                                "sleep": {}}))  # fmt: skip
    out = subprocess.run([*deploy, "--config", str(node)], capture_output=True, text=True, cwd=REPO)
    assert out.returncode != 0 and "espnow must be {gateway" in out.stderr, out.stderr


@pytest.mark.parametrize(("board", "arch"), [("esp32-devkitc", "xtensawin"), ("esp32-c3-devkitm-1", "rv32imc")])
def test_deploy_compiles_an_apps_native_code_for_the_boards_chip(tmp_path: Path, board: str, arch: str) -> None:
    """An application of one's own with @micropython.native code, deployed: its .mpy holds the chip's machine code
    (the header's architecture), which a stock image loads; the virtual board's definition is refused."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "main.py").write_text("import fast\nprint(fast.double(21))\n")
    (app / "fast.py").write_text("import micropython\n\n\n@micropython.native\ndef double(x):\n    return 2 * x\n")
    deploy = [sys.executable, "-m", "host_bridge", "deploy", "--port", "/dev/null", "--dry-run", "--app", str(app)]
    out = subprocess.run([*deploy, "--board", board], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    root = Path(out.stdout.split(" files from ", 1)[1].splitlines()[0])
    header = (root / "fast.mpy").read_bytes()[:3]
    assert MPY_ARCHS[header[2] >> 2] == arch, header
    out = subprocess.run([*deploy, "--board", "sim"], capture_output=True, text=True, cwd=REPO)
    assert out.returncode != 0 and "the virtual board's definition" in out.stderr, out.stderr
