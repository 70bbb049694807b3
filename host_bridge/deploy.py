"""`host-bridge deploy`: copy the compiled firmware (.mpy) and a checked config.json onto a board with mpremote."""

from __future__ import annotations

import argparse
from pathlib import Path

from host_bridge import assets
from host_bridge.firmware_build import parse_put, stage_firmware
from host_bridge.realboard import check_config, deploy_commands, run_commands


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", required=True, help="serial port of the board, e.g. /dev/ttyUSB0")
    parser.add_argument("--config", type=Path, help="config.json to install on the board (checked first)")
    parser.add_argument(
        "--put",
        action="append",
        default=[],
        metavar="FILE[:NAME]",
        help="also copy FILE to the board's filesystem root as NAME (certificates, secrets.json); repeatable",
    )
    parser.add_argument("--app", type=Path, default=assets.APP, help="application folder")
    parser.add_argument("--resume", action="store_true", help="do not soft-reset on connect (mpremote resume)")
    parser.add_argument("--no-reset", action="store_true", help="do not soft-reset the board after copying")
    parser.add_argument("--dry-run", action="store_true", help="print the mpremote command, run nothing")


def run(args: argparse.Namespace) -> int:
    puts = [parse_put(p) for p in args.put]
    if args.config is not None:
        check_config(args.config, next((source for source, name in puts if name == "secrets.json"), None))
    root = stage_firmware(args.app)
    files = sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())
    print(f"firmware: {len(files)} files from {root}", flush=True)
    cmd = deploy_commands(args.port, root, args.config, args.resume, not args.no_reset, puts)
    return run_commands([cmd], args.dry_run, "mpremote")
