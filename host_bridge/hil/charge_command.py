"""`host-bridge charge`: a real board's charge per reading, measured wake by wake with a current meter."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from host_bridge.hil import charge


def add_arguments(parser: argparse.ArgumentParser) -> None:
    meter = parser.add_mutually_exclusive_group(required=True)
    meter.add_argument(
        "--ppk2", metavar="PORT", help="a Nordic Power Profiler Kit II's serial port, powering the board"
    )
    meter.add_argument("--joulescope", action="store_true", help="the Joulescope on USB, in series with the board")
    parser.add_argument("--mv", type=int, default=3300, help="the PPK2's source voltage, millivolts")
    parser.add_argument("--seconds", type=float, default=600.0, help="how long to measure (several wakes' worth)")
    parser.add_argument("--cell-mah", type=float, default=2000.0, help="the cell whose life is given")
    parser.add_argument("--out", type=Path, help="write the rows as JSON here too")


def run(args: argparse.Namespace) -> int:
    if args.ppk2:
        print(f"measuring {args.seconds:g} s through the PPK2 on {args.ppk2} at {args.mv} mV", flush=True)
        samples, rate = charge.ppk2_trace(args.ppk2, args.mv, args.seconds), float(charge.PPK2_RATE_HZ)
    else:
        print(f"measuring {args.seconds:g} s through the Joulescope", flush=True)
        samples, rate = charge.joulescope_trace(args.seconds)
    rows = charge.rows(charge.split(samples, rate), args.cell_mah)
    for key, value in rows.items():
        shown = "-" if value is None else (f"{value:.2f}" if isinstance(value, float) else str(value))
        print(f"{key}: {shown}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0
