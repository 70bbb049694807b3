"""`host-bridge`: one console script, a table of subcommands, each handler in its own module."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from host_bridge.errors import HostBridgeError

# name -> (module with add_arguments(parser) and run(args) -> int, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "vboard": (
        "host_bridge.vboard.command",
        "run a virtual ESP32 board (MicroPython Unix port, emulated flash, pty UART)",
    ),
    "flash": ("host_bridge.flash", "write MicroPython and the board's partition table to a real board (esptool)"),
    "deploy": ("host_bridge.deploy", "copy the compiled firmware and config.json onto a board (mpremote)"),
    "firmware": (
        "host_bridge.firmware_image",
        "build a MicroPython image with the firmware frozen in, for a real board (ESP-IDF or its container)",
    ),
    "run": ("host_bridge.run", "relay boards on serial ports to a TCP broker (the serial-to-TCP bridge)"),
    "record": ("host_bridge.record", "subscribe at QoS 2 and keep every delivery in Parquet (the telemetry recorder)"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="host-bridge", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(module_name)
        command = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(command)
        command.set_defaults(handler=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.handler(args)
    except HostBridgeError as exc:
        print(f"host-bridge {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
