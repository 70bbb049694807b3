"""`host-bridge flash`: write MicroPython and the board's partition table (with its journal partition) with
esptool."""

from __future__ import annotations

import argparse
from pathlib import Path

from host_bridge import assets
from host_bridge.boards import partitions
from host_bridge.boards.definition import BoardDefinition
from host_bridge.boards.realboard import (
    DeployError,
    add_port_argument,
    check_image,
    find_port,
    flash_commands,
    run_commands,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_port_argument(parser)
    parser.add_argument("--board", default="esp32-devkitc", help="board folder under boards/ (default: esp32-devkitc)")
    parser.add_argument("--image", required=True, type=Path, help="MicroPython firmware image (.bin) for the chip")
    parser.add_argument("--baud", type=int, default=460800)
    parser.add_argument(
        "--erase-all",
        action="store_true",
        help="erase the whole chip first: the journal (messages not yet acknowledged), the boot counter, config.json "
        "and deployed files go with it",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the esptool commands, run nothing")


def run(args: argparse.Namespace) -> int:
    board = BoardDefinition.load(args.board)
    args.port = find_port(args.port, args.dry_run)
    if args.image.is_file():
        check_image(board, args.image.read_bytes()[:64], str(args.image))
    elif not args.dry_run:
        raise DeployError(
            f"firmware image {args.image} does not exist (download the {board.chip} build of MicroPython)"
        )
    table = assets.build_dir() / f"partitions-{board.name}.bin"
    table.parent.mkdir(parents=True, exist_ok=True)
    table.write_bytes(partitions.build(board))
    print(f"partition table for {board.name}: {table}", flush=True)
    for part in board.partitions:
        print(f"  {part.label:<10} {part.type}/{part.subtype:<10} 0x{part.offset:06x} {part.size // 1024} KiB")
    if args.erase_all:
        print(
            "erasing the whole chip first: journal, boot counter, config.json and deployed files included", flush=True
        )
    else:
        print(
            "keeping the journal (mqttlog) and the filesystem (vfs: boot counter, config.json, deployed files): "
            "--erase-all erases them",
            flush=True,
        )
    commands = flash_commands(args.port, board, args.image, table, args.baud, args.erase_all)
    return run_commands(commands, args.dry_run, "esptool")
