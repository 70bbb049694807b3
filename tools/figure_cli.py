"""The command line every figure tool shares: `--quick` (a short dose), for the board-count figures `--boards`,
and the figure's results printed as JSON (what tools/benchmarks.py merges into bench/results.json)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any


def print_figure(doc: str | None, figure: Callable[[bool], Any]) -> None:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    print(json.dumps(figure(parser.parse_args().quick), indent=1))


def print_board_figure(doc: str | None, figure: Callable[[bool, tuple[int, ...] | None], Any], default: str) -> None:
    """A figure over numbers of boards: `--boards 8,16` instead of its `default` sizes."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--boards", help=f"comma-separated board counts (default {default})")
    args = parser.parse_args()
    sizes = tuple(int(n) for n in args.boards.split(",")) if args.boards else None
    print(json.dumps(figure(args.quick, sizes), indent=1))
