"""`host-bridge firmware` (`make firmware BOARD=...`): build a MicroPython image for a real board with the
firmware frozen in (firmware/manifest.py), so that its code runs from flash and leaves the heap to data.

It needs MicroPython's source (`--micropython DIR` or $MICROPY_DIR: a checkout of the version the board runs, with
its submodules) and ESP-IDF: `idf.py` on the PATH (an ESP-IDF shell), else Espressif's `espressif/idf` container
image through docker or podman; with neither, it prints the exact steps. --dry-run prints the commands it would
run. The image lands in build/firmware/BOARD/firmware.bin, ready for `host-bridge flash --image`."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from host_bridge import assets
from host_bridge.boards.definition import BoardDefinition
from host_bridge.errors import FirmwareBuildError

# ESP-IDF release the MicroPython version of the boards (1.29) recommends (ports/esp32/README.md).
IDF_VERSION = "v5.5.2"
IDF_IMAGE = f"espressif/idf:{IDF_VERSION}"
MICROPYTHON_VERSION = "v1.29.0"


@dataclass(frozen=True)
class Build:
    """How to build one board's image: the builder's name and its commands, and where the image comes out."""

    builder: str
    commands: list[list[str]]
    image: Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--board", required=True, help="board definition under boards/, e.g. esp32-devkitc")
    parser.add_argument(
        "--micropython",
        type=Path,
        default=Path(os.environ["MICROPY_DIR"]) if os.environ.get("MICROPY_DIR") else None,
        help="MicroPython source tree (default: $MICROPY_DIR)",
    )
    parser.add_argument(
        "--builder",
        choices=("auto", "idf", "docker", "podman"),
        default="auto",
        help="idf.py on the PATH, or the espressif/idf container (default: the first available)",
    )
    parser.add_argument("--out", type=Path, help="where the image goes (default: build/firmware/BOARD/)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")


def micropython_board(board: BoardDefinition) -> str:
    if board.virtual or not board.micropython_board:
        raise FirmwareBuildError(f"board {board.name} names no MicroPython board (micropython_board in board.json)")
    return board.micropython_board


def native_build(board: BoardDefinition, source: Path) -> Build:
    """With an ESP-IDF shell (idf.py on the PATH): MicroPython's own makefiles."""
    name = micropython_board(board)
    manifest = (assets.FIRMWARE / "manifest.py").resolve()
    port = source / "ports" / "esp32"
    make = ["make", "-C", str(port), f"BOARD={name}", f"FROZEN_MANIFEST={manifest}"]
    return Build(
        "idf",
        [["make", "-C", str(source / "mpy-cross")], [*make, "submodules"], make],
        port / f"build-{name}" / "firmware.bin",
    )


def container_build(board: BoardDefinition, source: Path, engine: str) -> Build:
    """In Espressif's ESP-IDF container: the source tree and the firmware mounted, the build as the caller's user
    so that its files are the caller's."""
    name = micropython_board(board)
    script = (
        f"make -C mpy-cross && make -C ports/esp32 BOARD={name} FROZEN_MANIFEST=/dmqtt/manifest.py submodules && "
        f"make -C ports/esp32 BOARD={name} FROZEN_MANIFEST=/dmqtt/manifest.py"
    )
    command = [
        engine,
        "run",
        "--rm",
        "--user",
        f"{os.getuid()}:{os.getgid()}",
        "-e",
        "HOME=/tmp",
        "-v",
        f"{source.resolve() if source.exists() else source}:/micropython",
        "-v",
        f"{assets.FIRMWARE.resolve()}:/dmqtt:ro",
        "-w",
        "/micropython",
        IDF_IMAGE,
        "bash",
        "-c",
        script,
    ]
    return Build(engine, [command], source / "ports" / "esp32" / f"build-{name}" / "firmware.bin")


def steps(board: BoardDefinition) -> str:
    """What to do without a builder here, as commands to paste."""
    name = micropython_board(board)
    manifest = (assets.FIRMWARE / "manifest.py").resolve()
    return "\n".join(
        [
            f"To build an image for the {board.chip} with the firmware frozen in:",
            f"  git clone --branch {MICROPYTHON_VERSION} https://github.com/micropython/micropython",
            f"  git clone --branch {IDF_VERSION} --recursive https://github.com/espressif/esp-idf",
            f"  ./esp-idf/install.sh {board.chip} && . ./esp-idf/export.sh",
            f"  make firmware BOARD={board.name} MICROPY_DIR=$PWD/micropython",
            "or, with docker or podman and the micropython checkout:",
            f"  docker pull {IDF_IMAGE}",
            f"  make firmware BOARD={board.name} MICROPY_DIR=$PWD/micropython",
            f"(the build runs `make -C ports/esp32 BOARD={name} FROZEN_MANIFEST={manifest}`)",
        ]
    )


def choose(board: BoardDefinition, source: Path | None, builder: str) -> Build:
    if source is None or not (source / "ports" / "esp32").is_dir():
        where = f"{source} is not a MicroPython source tree" if source else "no MicroPython source given"
        raise FirmwareBuildError(f"{where} (--micropython DIR or MICROPY_DIR).\n{steps(board)}")
    if builder in ("auto", "idf") and shutil.which("idf.py"):
        return native_build(board, source)
    for engine in ("docker", "podman"):
        if builder in ("auto", engine) and shutil.which(engine):
            return container_build(board, source, engine)
    raise FirmwareBuildError(f"no ESP-IDF here: neither idf.py on the PATH nor docker or podman.\n{steps(board)}")


def run(args: argparse.Namespace) -> int:
    board = BoardDefinition.load(args.board)
    out = args.out or assets.build_dir() / "firmware" / board.name
    if args.dry_run and (args.micropython is None or not (args.micropython / "ports" / "esp32").is_dir()):
        # Nothing to build from here: show both ways, for a source tree at MICROPY_DIR.
        source = args.micropython or Path("$MICROPY_DIR")
        builds = [native_build(board, source), container_build(board, source, "docker")]
    else:
        builds = [choose(board, args.micropython, args.builder)]
    for build in builds:
        print(f"# {build.builder}: the image comes out as {build.image}", flush=True)
        for command in build.commands:
            print("$ " + shlex.join(command), flush=True)
    if args.dry_run:
        return 0
    build = builds[0]
    for command in build.commands:
        if subprocess.run(command).returncode:
            raise FirmwareBuildError(f"the build failed: {shlex.join(command)}")
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(build.image, out / "firmware.bin")
    print(f"firmware: {out / 'firmware.bin'}; flash it with host-bridge flash --board {board.name} --image it")
    return 0
