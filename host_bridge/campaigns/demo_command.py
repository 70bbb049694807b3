"""`host-bridge demo` (`make demo`): its arguments and its handler; the demo itself is host_bridge.campaigns.demo."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("build/demo"), help="work and result folder (emptied first)")
    parser.add_argument("--messages", type=int, default=200, help="messages per board")
    parser.add_argument("--cuts", type=int, default=3, help="power cuts per board")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--app", type=Path, help="the boards' application folder instead of the firmware's (a change under test)"
    )


def run(args: argparse.Namespace) -> int:
    from host_bridge.campaigns.demo import run_demo  # (the [bench] and [pipeline] extras: --help works without)

    def interrupted(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM cleans up as Ctrl-C does: every process started here is stopped

    signal.signal(signal.SIGTERM, interrupted)
    app = args.app.resolve() if args.app else None
    return run_demo(args.out.resolve(), args.messages, args.cuts, args.seed, app=app).exit_code
