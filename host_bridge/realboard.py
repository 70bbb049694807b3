"""Real boards: the esptool and mpremote command lines for writing MicroPython with the board's partition
table, and for copying the compiled firmware and config.json onto it; run (or only printed, --dry-run) by the
`host-bridge flash` and `host-bridge deploy` commands."""

from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from host_bridge import assets, partitions
from host_bridge.boards import CHIPS, BoardDefinition, image_chip_id
from host_bridge.errors import HostBridgeError


class DeployError(HostBridgeError):
    """Flashing or deploying to a real board failed."""


def board_config_module() -> ModuleType:
    """The firmware's own config checker (firmware/app/config.py), so a bad file is caught before it ships."""
    spec = importlib.util.spec_from_file_location("board_config", assets.APP / "config.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_config(path: Path, secrets: Path | None = None) -> None:
    """The board's own checks on config.json, with secrets.json merged as the board merges it. Messages name
    fields, never secret values."""
    module = board_config_module()
    try:
        raw = json.loads(path.read_text())
        if secrets is not None:
            module.merge_secrets(raw, json.loads(secrets.read_text()))
        module.check(raw)
    except FileNotFoundError as exc:
        raise DeployError(f"{exc.filename} does not exist") from None
    except json.JSONDecodeError as exc:
        raise DeployError(
            f"{path if secrets is None else 'config.json or secrets.json'} is not valid JSON: {exc}"
        ) from None
    except module.ConfigError as exc:
        raise DeployError(f"{path}: {exc}") from None


def check_image(board: BoardDefinition, image: bytes, name: str) -> None:
    """Refuse an image built for another chip: esptool would write it, and the board would not boot."""
    chip = board.chip_info
    found = image_chip_id(image)
    if found is None:
        raise DeployError(
            f"{name} is not an ESP firmware image (no 0xE9 magic byte): download the .bin for {chip.name}"
        )
    if found != chip.image_chip_id:
        other = next((c.name for c in CHIPS.values() if c.image_chip_id == found), f"chip id {found}")
        raise DeployError(
            f"{name} is built for {other}, but board {board.name} has an {chip.name}: download the MicroPython "
            f"image for {chip.name} ({board.firmware_image or 'see micropython.org/download'})"
        )


def flash_commands(port: str, board: BoardDefinition, image: Path, table: Path, baud: int) -> list[list[str]]:
    chip = board.chip_info
    esptool = [sys.executable, "-m", "esptool", "--chip", chip.name, "--port", port, "--baud", str(baud)]
    # Two writes: the MicroPython image carries a stock partition table at 0x8000, which ours (with the journal
    # partition) replaces; in one write-flash call esptool would refuse the overlap.
    return [
        [*esptool, "erase-flash"],
        [*esptool, "write-flash", "-z", hex(chip.bootloader_offset), str(image)],
        [*esptool, "write-flash", hex(partitions.TABLE_OFFSET), str(table)],
    ]


_MKDIRS = """import os
for d in %r:
    try:
        os.mkdir(d)
    except OSError:
        pass
"""


def deploy_commands(
    port: str, root: Path, config: Path | None, resume: bool, reset: bool, put: list[tuple[Path, str]] | None = None
) -> list[str]:
    """One mpremote invocation: every staged file and folder copied to the board's filesystem root."""
    cmd = [sys.executable, "-m", "mpremote", "connect", port]
    if resume:
        cmd.append("resume")  # keep the running interpreter (the virtual board behind a pty has no reset)
    folders = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir())
    # Folders made by a script that tolerates them existing (`fs mkdir` fails on a second deploy, and
    # `fs cp -r` is not accepted inside a chain of commands).
    steps: list[list[str]] = [["exec", _MKDIRS % folders]] if folders else []
    for item in sorted(p for p in root.rglob("*") if p.is_file()):
        steps.append(["fs", "cp", str(item), ":" + str(item.relative_to(root))])
    if config is not None:
        steps.append(["fs", "cp", str(config), ":config.json"])
    for source, name in put or []:
        steps.append(["fs", "cp", str(source), ":" + name])
    if reset:
        steps.append(["soft-reset"])
    for i, step in enumerate(steps):
        if i:
            cmd.append("+")
        cmd += step
    return cmd


def run_commands(commands: list[list[str]], dry_run: bool, what: str) -> int:
    for cmd in commands:
        print("$ " + shlex.join(cmd), flush=True)
        if dry_run:
            continue
        result = subprocess.run(cmd)
        if result.returncode:
            raise DeployError(
                f"{what} failed (exit {result.returncode}). Is the board plugged in and the port right "
                "(ls /dev/ttyUSB* /dev/ttyACM*)? 'Permission denied': add yourself to the dialout group. "
                "'Failed to connect': hold BOOT while it starts."
            )
    return 0
