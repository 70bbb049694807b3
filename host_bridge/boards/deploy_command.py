"""`host-bridge deploy`: copy the compiled firmware (.mpy files, or a ROMFS image with --romfs) and a checked
config.json onto a board with mpremote, then reset it so that it runs what was copied."""

from __future__ import annotations

import argparse
from pathlib import Path

from host_bridge import assets
from host_bridge.boards.board_config import check_file
from host_bridge.boards.definition import BoardDefinition
from host_bridge.boards.firmware_build import (
    add_put_argument,
    parse_put,
    romfs_build_command,
    romfs_image,
    romfs_paths,
    secrets_of,
    stage_firmware,
)
from host_bridge.boards.realboard import (
    NO_ROMFS,
    DeployError,
    add_port_argument,
    deploy_commands,
    find_port,
    has_romfs,
    romfs_query_command,
    run_commands,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_port_argument(parser)
    parser.add_argument("--config", type=Path, help="config.json to install on the board (checked first)")
    add_put_argument(parser)
    parser.add_argument("--app", type=Path, default=assets.APP, help="application folder")
    parser.add_argument(
        "--board",
        default="esp32-devkitc",
        help="the board's definition (boards/): an application of your own has its @native and @viper code "
        "compiled for its chip (xtensawin for the ESP32 and S3, rv32imc for the C3 and C6)",
    )
    parser.add_argument("--resume", action="store_true", help="do not soft-reset on connect (mpremote resume)")
    parser.add_argument("--no-reset", action="store_true", help="do not reset the board after copying")
    parser.add_argument(
        "--romfs",
        action="store_true",
        help="write the modules as a ROMFS image to the board's romfs partition (run from flash, no heap for code; "
        "needs an image built with ROMFS)",
    )
    parser.add_argument(
        "--frozen",
        action="store_true",
        help="the board's image has the firmware frozen in (`make firmware`): copy only main.py, the config and "
        "--put files, and remove .mpy files an earlier deploy left (they would shadow the frozen modules)",
    )
    parser.add_argument(
        "--fallback-mpy",
        action="store_true",
        help="with --romfs: deploy .mpy files instead when the board's image has no ROMFS partition",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the mpremote commands, run nothing")


def run(args: argparse.Namespace) -> int:
    args.port = find_port(args.port, args.dry_run)
    puts = [parse_put(p) for p in args.put]
    if args.config is not None:
        check_file(args.config, secrets_of(puts))
    board = BoardDefinition.load(args.board)
    if board.mpy_arch is None:
        raise DeployError(f"{args.board} is the virtual board's definition: give the real board's (boards/)")
    root = stage_firmware(args.app, march=board.mpy_arch)
    files = sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())
    print(f"firmware: {len(files)} files from {root}", flush=True)
    if args.romfs and args.frozen:
        raise DeployError("--romfs and --frozen are two ways to install the code: give one")
    code: Path | str | None = "frozen" if args.frozen else None
    if args.romfs:
        if args.dry_run:
            folder, code = romfs_paths(root)
            run_commands([romfs_query_command(args.port, args.resume), romfs_build_command(folder, code)], True, "")
        elif has_romfs(args.port, args.resume):
            code = romfs_image(root)
            print(f"romfs: {code.stat().st_size} bytes in {code}", flush=True)
        elif args.fallback_mpy:
            print(f"romfs: {NO_ROMFS.split('.')[0]}; deploying .mpy files instead (--fallback-mpy)", flush=True)
        else:
            raise DeployError(NO_ROMFS)
    cmd = deploy_commands(args.port, root, args.config, args.resume, not args.no_reset, puts, code)
    return run_commands([cmd], args.dry_run, "mpremote")
