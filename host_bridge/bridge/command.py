"""`host-bridge run`: relay boards on serial ports to a TCP broker, many boards per process."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import serial

from host_bridge.bridge.config import BridgeConfig, TLSSection
from host_bridge.bridge.config import load as load_config
from host_bridge.bridge.relay import BoardPort, Bridge, BridgeError
from host_bridge.logs import add_log_format_argument, event, log_to_stdout
from host_bridge.net import Destination, TLSConfig, add_wait_argument, await_broker


def command(broker: str, baud: int, ports: dict[str, str], stats_every: float = 60.0, *extra: str) -> list[str]:
    """The `host-bridge run` command line for named serial ports (name -> path), as a harness starts it."""
    args = [sys.executable, "-m", "host_bridge", "run", "--broker", broker, "--baud", str(baud)]
    args += ["--stats-every", f"{stats_every:g}", *extra]
    for name, path in ports.items():
        args += ["--port", f"{name}={path}"]
    return args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-p", "--port", action="append", default=[], metavar="[NAME=]PATH", help="a board's serial port"
    )
    parser.add_argument("--broker", metavar="HOST:PORT", help="where boards' MQTT connections go")
    parser.add_argument("--baud", type=int, help="serial speed (default 115200)")
    parser.add_argument(
        "--allow", action="append", default=[], metavar="HOST:PORT", help="another destination boards may ask for"
    )
    parser.add_argument("--config", type=Path, help="TOML file: broker, baud, allow, [tls], [[board]] name/port/baud")
    parser.add_argument("--tls", action="store_true", help="TLS to the broker, certificate verified")
    parser.add_argument("--cafile", help="CA bundle that signs the broker's certificate")
    parser.add_argument("--certfile", help="client certificate (mutual TLS)")
    parser.add_argument("--keyfile", help="client certificate's key")
    parser.add_argument("--stats-every", type=float, default=60.0, metavar="S", help="print counters every S seconds")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    add_wait_argument(parser)
    add_log_format_argument(parser)


def _config(args: argparse.Namespace) -> tuple[list[BoardPort], Destination, list[Destination], TLSConfig | None]:
    conf = BridgeConfig()
    if args.config is not None:
        try:
            raw = tomllib.loads(args.config.read_text())
        except FileNotFoundError:
            raise BridgeError(f"config file {args.config} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise BridgeError(f"{args.config}: {exc}") from None
        conf = load_config(args.config, raw)  # every key and type checked before anything runs
    broker_text = args.broker or conf.broker
    if not broker_text:
        raise BridgeError('no broker: give --broker HOST:PORT or broker = "HOST:PORT" in the config')
    baud = args.baud or conf.baud
    boards = [BoardPort(entry.name or Path(entry.port).name, entry.port, entry.baud or baud) for entry in conf.board]
    for spec in args.port:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = Path(spec).name, spec
        boards.append(BoardPort(name, path, baud))
    allow = [Destination.parse(a) for a in [*conf.allow, *args.allow]]
    tls = None
    if args.tls or conf.tls is not None:
        section = conf.tls or TLSSection()
        tls = TLSConfig(
            args.cafile or section.cafile, args.certfile or section.certfile, args.keyfile or section.keyfile
        )
    return boards, Destination.parse(broker_text), allow, tls


def preflight(boards: list[BoardPort], broker: Destination, wait: float | None, say: Callable[[str], None]) -> None:
    """Fail at once, saying what to do, on what waiting will not fix: a port that exists but cannot be opened.
    A port that does not exist yet is waited for (a board not plugged in); a broker that does not answer is
    waited for as --wait says (the same in every subcommand)."""
    for board in boards:
        if not Path(board.path).exists():
            continue
        try:
            serial.Serial(board.path, board.baud, timeout=0, exclusive=True).close()
        except serial.SerialException as exc:
            text = str(exc)
            if "Permission denied" in text or "Errno 13" in text:
                raise BridgeError(
                    f"permission denied on {board.path}: add yourself to the dialout group "
                    "(sudo usermod -aG dialout $USER) and log in again"
                ) from None
            if "lock" in text or "busy" in text.lower() or "Errno 16" in text:
                raise BridgeError(
                    f"{board.path} is busy: another program has it open "
                    "(screen, minicom, mpremote, another bridge); close it"
                ) from None
            raise BridgeError(f"cannot open {board.path}: {text}") from None
    await_broker(broker, wait, say, "is it running (host-bridge broker starts one), and is --broker right?")


def run(args: argparse.Namespace) -> int:
    level = logging.DEBUG if args.verbose else logging.INFO
    log_to_stdout("host_bridge", args.log_format, level)
    root = logging.getLogger("host_bridge")
    boards, broker, allow, tls = _config(args)
    bridge = Bridge(boards, broker, allow, tls)
    preflight(boards, broker, args.wait, lambda text: event(root, logging.WARNING, "broker-unreachable", why=text))
    done = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if signum == signal.SIGUSR1:
            bridge.report()
        else:
            done.set()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
        signal.signal(sig, on_signal)
    event(
        root,
        logging.INFO,
        "start",
        boards=len(boards),
        broker=broker,
        allowed=",".join(str(a) for a in allow) or "-",
        tls=bool(tls),
    )
    bridge.start()
    while not done.wait(args.stats_every):
        bridge.report()
    bridge.stop()
    bridge.report()
    return 0
