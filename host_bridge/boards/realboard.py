"""Real boards: the esptool and mpremote command lines for writing MicroPython with the board's partition
table, and for copying the compiled firmware and config.json onto it; run (or only printed, --dry-run) by the
`host-bridge flash` and `host-bridge deploy` commands."""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from host_bridge.boards import partitions
from host_bridge.boards.definition import CHIPS, BoardDefinition, image_chip_id
from host_bridge.errors import HostBridgeError


class DeployError(HostBridgeError):
    """Flashing or deploying to a real board failed."""


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


def flash_commands(
    port: str, board: BoardDefinition, image: Path, table: Path, baud: int, erase_all: bool = False
) -> list[list[str]]:
    """esptool's commands: MicroPython's image and our partition table, which erases only the sectors they are
    written to, so that the journal (mqttlog) and the filesystem (vfs: the boot counter, config.json, deployed
    files) keep what they hold across an upgrade; `erase_all` erases the whole chip first."""
    chip = board.chip_info
    esptool = [sys.executable, "-m", "esptool", "--chip", chip.name, "--port", port, "--baud", str(baud)]
    # Two writes: the MicroPython image carries a stock partition table at 0x8000, which ours (with the journal
    # partition) replaces; in one write-flash call esptool would refuse the overlap.
    return [
        *([[*esptool, "erase-flash"]] if erase_all else []),
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


def _mpremote(port: str, resume: bool) -> list[str]:
    cmd = [sys.executable, "-m", "mpremote", "connect", port]
    if resume:
        cmd.append("resume")  # keep the running interpreter: no soft reset when mpremote connects
    return cmd


def deploy_commands(
    port: str,
    root: Path,
    config: Path | None,
    resume: bool,
    reset: bool,
    put: list[tuple[Path, str]] | None = None,
    code: Path | str | None = None,
) -> list[str]:
    """One mpremote invocation: every staged file and folder copied to the board's filesystem root. `code`:
    where the modules go instead of .mpy files on the filesystem: a ROMFS image (a Path) written to the board's
    ROMFS partition, or "frozen" (the board's image has them already). Then only what is not modules (main.py) is
    copied, and the modules a .mpy deploy left on the filesystem are removed: the port searches the filesystem
    first, so they would shadow the image's."""
    cmd = _mpremote(port, resume)
    files = sorted(p for p in root.rglob("*") if p.is_file())
    steps: list[list[str]] = []
    if code is not None:
        modules = [p.relative_to(root) for p in files if p.suffix == ".mpy"]
        # Their packages' folders too, deepest first (left alone where something else lives in them).
        packages = sorted({str(m.parent) for m in modules if m.parent != Path(".")}, key=lambda d: -d.count("/"))
        if isinstance(code, Path):
            steps.append(["romfs", "deploy", str(code)])
        steps.append(["exec", _REMOVE % ([str(m) for m in modules], packages)])
        files = [p for p in files if p.suffix != ".mpy"]
    # Every folder a file goes in, parents before children: staged packages, and --put paths (certs/ca.pem).
    paths = [str(p.relative_to(root)) for p in files] + [name for _source, name in put or []]
    folders = sorted({"/".join(path.split("/")[:n]) for path in paths for n in range(1, path.count("/") + 1)})
    # Folders made by a script that tolerates them existing (`fs mkdir` fails on a second deploy, and
    # `fs cp -r` is not accepted inside a chain of commands).
    if folders:
        steps.append(["exec", _MKDIRS % folders])
    for item in files:
        steps.append(["fs", "cp", str(item), ":" + str(item.relative_to(root))])
    if config is not None:
        steps.append(["fs", "cp", str(config), ":config.json"])
    for source, name in put or []:
        steps.append(["fs", "cp", str(source), ":" + name])
    if reset:
        # A hard reset (machine.reset()): the board boots and runs main.py from what was just copied. A soft reset
        # from mpremote's raw REPL would leave it at the REPL (the port skips main.py after one).
        steps.append(["reset"])
    for i, step in enumerate(steps):
        if i:
            cmd.append("+")
        cmd += step
    return cmd


_REMOVE = """import os
for f in %r:
    try:
        os.remove(f)
    except OSError:
        pass
for d in %r:
    try:
        os.rmdir(d)
    except OSError:
        pass
"""


def romfs_query_command(port: str, resume: bool) -> list[str]:
    return [*_mpremote(port, resume), "romfs", "query"]


def has_romfs(port: str, resume: bool) -> bool:
    """Whether the board's MicroPython image has a ROMFS partition, as `mpremote romfs query` reports it."""
    result = subprocess.run(romfs_query_command(port, resume), capture_output=True, text=True)
    if result.returncode:
        raise DeployError(
            f"mpremote romfs query failed (exit {result.returncode}): {(result.stderr or result.stdout).strip()}"
        )
    return "partition has size" in result.stdout


NO_ROMFS = (
    "the board's MicroPython image has no ROMFS partition (stock ESP32 images up to 1.29 have none). Build an "
    "image with the firmware frozen in (`make firmware BOARD=...`: frozen code runs from flash and needs no "
    "ROMFS), or one with ROMFS (MICROPY_VFS_ROM and a 'romfs' partition, see docs/install-paths.md); or deploy "
    ".mpy files: drop --romfs, or add --fallback-mpy to do that whenever ROMFS is missing"
)


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


# USB vendor ids of what a board's USB serial port is: Espressif's own USB (S3, C3, C6), and the USB-UART bridges
# of common boards (Silicon Labs CP210x on the DevKitC, WCH CH34x, FTDI).
BOARD_VENDORS = {0x303A: "Espressif", 0x10C4: "Silicon Labs", 0x1A86: "WCH", 0x0403: "FTDI"}


def add_port_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port",
        "-p",
        default="auto",
        help="serial port of the board, e.g. /dev/ttyUSB0; auto: the one board plugged in (by its USB vendor)",
    )


def find_port(requested: str, dry_run: bool = False) -> str:
    """`requested`, or for "auto" the one serial port whose USB vendor is a board's (as mpremote and esptool find
    a board); DeployError naming what was found when there is none or more than one."""
    if requested != "auto":
        return requested
    from serial.tools import list_ports

    found = [p for p in list_ports.comports() if p.vid in BOARD_VENDORS]
    if len(found) == 1:
        print(f"port: {found[0].device} ({BOARD_VENDORS[found[0].vid]} {found[0].description})", flush=True)
        return str(found[0].device)
    if not found and dry_run:
        return "PORT"  # a dry run shows the commands without a board
    if not found:
        raise DeployError("no board found on USB: plug one in, or give --port PATH (e.g. /dev/ttyUSB0)")
    names = ", ".join(f"{p.device} ({BOARD_VENDORS[p.vid]})" for p in found)
    raise DeployError(f"{len(found)} boards found ({names}): choose one with --port PATH")
