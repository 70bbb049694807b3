"""`host-bridge chaos`: its arguments and its handler; the campaign itself is host_bridge.campaigns.chaos."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("build/chaos"))
    parser.add_argument("--messages", type=int, default=600, help="messages per board")
    parser.add_argument("--cuts", type=int, default=5, help="power cuts per board")
    parser.add_argument(
        "--faults", type=int, default=3, help="SIGKILLs of broker, bridge, recorder and disk-full episodes, of each"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--broker-fault", choices=("kill", "restart"), default="kill", help="SIGKILL the broker, or restart it cleanly"
    )
    parser.add_argument(
        "--confirm",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="end-to-end confirmation on the boards and the recorder; --no-confirm runs without it (what a broker "
        "SIGKILL loses is then lost)",
    )
    parser.add_argument(
        "--app", type=Path, help="the boards' application folder instead of the firmware's (a change under test)"
    )


def run(args: argparse.Namespace) -> int:
    from host_bridge.campaigns.chaos import run_campaign  # (the [bench] and [pipeline] extras: --help works without)

    result = run_campaign(
        args.out.resolve(),
        args.messages,
        args.cuts,
        args.faults,
        args.seed,
        broker_fault=args.broker_fault,
        confirm=args.confirm,
        app=args.app.resolve() if args.app else None,
    )
    return 0 if result.ok else 1
