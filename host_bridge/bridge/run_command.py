"""`host-bridge run`: relay boards on serial ports to a TCP broker, many boards per process."""

from __future__ import annotations

import argparse
import logging
import queue
import signal
import ssl
import sys
import threading
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import serial

from host_bridge.bridge import metrics as bridge_metrics
from host_bridge.bridge.config import BridgeConfig
from host_bridge.bridge.config import load as load_config
from host_bridge.bridge.relay import BoardPort, Bridge, BridgeError
from host_bridge.errors import HostBridgeError
from host_bridge.logs import DEFAULT_LOG_FORMAT, add_log_format_argument, event, log_to_stdout
from host_bridge.metrics import MetricsServer, metrics_address
from host_bridge.net import Destination, TLSConfig, add_wait_argument, await_broker, seconds
from host_bridge.schema import TLSSection
from host_bridge.systemd import Watchdog, notify


def command(broker: str, baud: int, ports: dict[str, str], stats_every: float = 60.0, *extra: str) -> list[str]:
    """The `host-bridge run` command line for named serial ports (name -> path), as a harness starts it."""
    args = [sys.executable, "-m", "host_bridge", "run", "--broker", broker, "--baud", str(baud)]
    args += ["--stats-every", f"{stats_every:g}", *extra]
    for name, path in ports.items():
        args += ["--port", f"{name}={path}"]
    return args


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not a baud rate: give a positive number (115200, say)")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-p",
        "--port",
        action="append",
        default=[],
        metavar="[NAME=]PATH",
        help="a board's serial port; a pattern (/dev/serial/by-id/usb-*) serves each port that matches, plugged in "
        "now or later",
    )
    parser.add_argument("--broker", metavar="HOST:PORT", help="where boards' MQTT connections go")
    parser.add_argument("--baud", type=_positive_int, help="serial speed (default 115200)")
    parser.add_argument(
        "--allow", action="append", default=[], metavar="HOST:PORT", help="another destination boards may ask for"
    )
    parser.add_argument(
        "--config",
        type=Path,
        help="TOML file: broker, baud, allow, stats_every, log_format, wait, strict_ports, metrics, health_after, "
        "[tls], identify, [[board]] name/port/baud/client_id (read again on SIGHUP)",
    )
    parser.add_argument("--tls", action="store_true", help="TLS to the broker, certificate verified")
    parser.add_argument("--cafile", help="CA bundle that signs the broker's certificate")
    parser.add_argument("--certfile", help="client certificate (mutual TLS)")
    parser.add_argument("--keyfile", help="client certificate's key")
    parser.add_argument(
        "--stats-every", type=seconds, metavar="S", help="print counters every S seconds (default 300; 0: never)"
    )
    parser.add_argument(
        "--strict-ports", action="store_true", help="fail at start (exit 2) on a port path that does not exist"
    )
    parser.add_argument(
        "--identify",
        action="store_true",
        help="each NAME of --port NAME=PATH is the client id the board on PATH must say in its CONNECT; another "
        "board there is refused (its messages never reach the broker under NAME)",
    )
    parser.add_argument(
        "--metrics", metavar="HOST:PORT", help="serve Prometheus metrics on /metrics and a health check on /healthz"
    )
    parser.add_argument(
        "--health-after",
        type=seconds,
        metavar="S",
        help="/healthz fails once the broker has been unreachable this long (default 60)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the configuration (the TOML file, the flags, the TLS files) and exit 0, or 2 saying what is "
        "wrong, without opening a port or connecting: before a restart or a SIGHUP",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    add_wait_argument(parser)
    add_log_format_argument(parser)


@dataclass
class Settings:
    """What `host-bridge run` runs with: the command line over the TOML file over the defaults."""

    boards: list[BoardPort]
    broker: Destination
    allow: list[Destination]
    tls: TLSConfig | None
    stats_every: float
    log_format: str
    wait: float | None
    strict_ports: bool
    metrics: str | None
    health_after: float


def _config(args: argparse.Namespace) -> Settings:
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
    identify = args.identify or conf.identify
    boards = [
        BoardPort(
            entry.name or Path(entry.port).name, entry.port, entry.baud or baud,
            entry.client_id or (entry.name if identify and entry.name else ""),
        )
        for entry in conf.board
    ]  # fmt: skip
    for spec in args.port:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = Path(spec).name, spec
        boards.append(BoardPort(name, path, baud, name if identify and sep else ""))
    for board in boards:
        if board.client_id and board.pattern:
            raise BridgeError(
                f"board {board.name}: a pattern ({board.path}) serves many boards, so it cannot expect one client id; "
                "give each board its own /dev/serial/by-id/ path"
            )
    allow = [Destination.parse(a) for a in [*conf.allow, *args.allow]]
    tls = None
    if args.tls or conf.tls is not None:
        section = conf.tls or TLSSection()
        tls = TLSConfig(
            args.cafile or section.cafile, args.certfile or section.certfile, args.keyfile or section.keyfile
        )
    return Settings(
        boards,
        Destination.parse(broker_text),
        allow,
        tls,
        args.stats_every if args.stats_every is not None else conf.stats_every,
        args.log_format if args.log_format != DEFAULT_LOG_FORMAT else conf.log_format,
        args.wait if args.wait is not None else conf.wait,
        args.strict_ports or conf.strict_ports,
        args.metrics or conf.metrics,
        args.health_after if args.health_after is not None else conf.health_after,
    )


def preflight(
    boards: list[BoardPort], broker: Destination, wait: float | None, strict: bool, say: Callable[[str], None]
) -> None:
    """Fail at once, saying what to do, on what waiting will not fix: a port that exists but cannot be opened,
    and (strict) a port that does not exist. Otherwise a port that does not exist yet is waited for (a board not
    plugged in); a broker that does not answer is waited for as --wait says (the same in every subcommand)."""
    for board in boards:
        if board.pattern:
            continue  # what matches is served when it appears
        if not Path(board.path).exists():
            if strict:
                raise BridgeError(
                    f"{board.path} does not exist (--strict-ports): check the path, or leave --strict-ports out to "
                    "wait for the board"
                )
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


# What each signal does; every one is logged.
_READY_WAIT_S = 10.0  # how long READY waits for the configured ports to open

_SIGNALS: dict[int, str] = {
    signal.SIGINT: "stop",
    signal.SIGTERM: "stop",
    signal.SIGHUP: "reload",
    signal.SIGUSR1: "counters",
}


def check(settings: Settings) -> str:
    """What a run with `settings` would serve, once the parts that can fail without a port or a connection have
    been tried: the TLS files loaded into a context, the metrics address parsed as the server takes it
    (BridgeError or MetricsError when one is not)."""
    if settings.tls is not None:
        try:
            settings.tls.context()
        except (OSError, ssl.SSLError) as exc:
            raise BridgeError(f"[tls]: {exc}") from None
    if settings.metrics:
        metrics_address(settings.metrics)
    boards = (
        ", ".join(
            f"{b.name}={b.path}" + (f" (client id {b.client_id})" if b.client_id else "") for b in settings.boards
        )
        or "none (--port or [[board]])"
    )
    return (
        f"configuration OK: boards {boards}; broker {settings.broker}; tls {'yes' if settings.tls else 'no'}; "
        f"metrics {settings.metrics or '-'}; counters every {settings.stats_every:g} s"
    )


def run(args: argparse.Namespace) -> int:
    settings = _config(args)
    if args.check:
        print(check(settings))
        return 0
    level = logging.DEBUG if args.verbose else logging.INFO
    log_to_stdout("host_bridge", settings.log_format, level)
    root = logging.getLogger("host_bridge")
    bridge = Bridge(settings.boards, settings.broker, settings.allow, settings.tls)
    live = Live(settings, None)
    if settings.metrics:
        live.server = _metrics_server(settings.metrics, bridge, live)
    preflight(
        settings.boards,
        settings.broker,
        settings.wait,
        settings.strict_ports,
        lambda text: event(root, logging.WARNING, "broker_unreachable", why=text),
    )
    signals: queue.SimpleQueue[int] = queue.SimpleQueue()
    for sig in _SIGNALS:
        signal.signal(sig, lambda signum, _frame: signals.put(signum))
    event(
        root,
        logging.INFO,
        "start",
        boards=len(settings.boards),
        broker=settings.broker,
        allowed=",".join(str(a) for a in settings.allow) or "-",
        tls=bool(settings.tls),
        metrics=live.server.address if live.server else "-",
    )
    watchdog = Watchdog()
    done = threading.Event()
    watcher = threading.Thread(target=bridge.watch, args=(done,), name="hotplug", daemon=True)
    try:
        bridge.start()
        watcher.start()
        if live.server is not None:
            live.server.start()
        # READY once every configured port is open, or after _READY_WAIT_S saying which are not (a board's
        # port that does not exist yet is waited for all the same; STATUS follows it from then on).
        ready_by = time.monotonic() + _READY_WAIT_S
        while bridge.missing() and time.monotonic() < ready_by:
            time.sleep(0.1)
        status = bridge.status()
        notify("READY=1", f"STATUS={status}")
        every = settings.stats_every  # the counters' period (a reload may change it)
        next_stats = time.monotonic() + every if every else None
        while True:
            waits = [w for w in (watchdog.wait_s(), next_stats and next_stats - time.monotonic()) if w is not None]
            try:
                signum = signals.get(timeout=max(0.0, min(waits)) if waits else None)
            except queue.Empty:
                signum = None
            watchdog.pet()
            if (now := bridge.status()) != status:
                status = now
                notify(f"STATUS={status}")
            if signum is not None:
                action = _SIGNALS[signum]
                event(root, logging.INFO, "signal", signal=signal.Signals(signum).name, action=action)
                if action == "stop":
                    break
                if action == "reload":
                    _reload(args, bridge, root, live)
                    if live.settings.stats_every != every:  # the counters' period, from now
                        every = live.settings.stats_every
                        next_stats = time.monotonic() + every if every else None
                else:
                    bridge.report()
            if next_stats is not None and time.monotonic() >= next_stats:
                bridge.report()
                next_stats = time.monotonic() + every
    finally:
        # Whatever ends the run (a signal, an error), the last counters are said once: each board's in its
        # `stopped` line, the totals in `exit`.
        notify("STOPPING=1")
        done.set()
        bridge.stop()
        if live.server is not None:
            live.server.stop()
        event(root, logging.INFO, "exit", **bridge.totals())
    return 0


@dataclass
class Live:
    """What the running bridge serves with, which a reload replaces: its settings, and its metrics server."""

    settings: Settings
    server: MetricsServer | None


def _metrics_server(address: str, bridge: Bridge, live: Live) -> MetricsServer:
    """The metrics server; its health check reads health_after from the live settings (a reload changes it)."""
    return MetricsServer(
        address,
        lambda: bridge_metrics.families(bridge),
        lambda: bridge_metrics.health(bridge, live.settings.health_after),
    )


# The settings a reload applies (besides the board list), each named in the `reloaded` line when it changed.
_RELOADABLE = ("broker", "allow", "tls", "stats_every", "log_format", "metrics", "health_after")


def _reload(args: argparse.Namespace, bridge: Bridge, root: logging.Logger, live: Live) -> None:
    """SIGHUP: the config file and the command line read again, and applied. Boards added start, boards removed
    stop, the others go on. A changed broker, allowed list or TLS retargets every board: a connection the new
    settings no longer describe is closed, and its board connects again (to the new broker), sending again from
    its journal what was not acknowledged, so nothing is lost. The counters' period, the log format and
    health_after apply at once; a new metrics address opens a new server before the old one closes. A config
    that does not load leaves everything as it is; a setting that cannot be applied (a metrics address that
    cannot be bound) is named (bridge.not_applied) and the running one kept."""
    running = live.settings
    try:
        new = _config(args)
        started, stopped = bridge.apply(new.boards)
    except HostBridgeError as exc:
        event(root, logging.ERROR, "reload_failed", error=str(exc), kept=len(bridge.boards()))
        bridge.reload_ok = False
        return
    bridge.reload_ok = True
    changed = [name for name in _RELOADABLE if getattr(new, name) != getattr(running, name)]
    not_applied = []
    if {"broker", "allow", "tls"} & set(changed):
        bridge.retarget(new.broker, new.allow, new.tls)
    if "log_format" in changed:
        log_to_stdout("host_bridge", new.log_format, root.level)
    if "metrics" in changed:
        try:
            server = _metrics_server(new.metrics, bridge, live) if new.metrics else None
            if server is not None:
                server.start()
        except HostBridgeError as exc:
            event(root, logging.ERROR, "metrics_not_moved", error=str(exc), kept=running.metrics or "-")
            not_applied.append("metrics")
            new.metrics = running.metrics
        else:
            if live.server is not None:
                live.server.stop()
            live.server = server
    live.settings = new
    bridge.not_applied = tuple(not_applied)
    event(
        root,
        logging.WARNING if not_applied else logging.INFO,
        "reloaded",
        boards=len(bridge.boards()),
        started=",".join(started) or "-",
        stopped=",".join(stopped) or "-",
        applied=",".join(name for name in changed if name not in not_applied) or "-",
        not_applied=",".join(not_applied) or "-",
        **({"metrics": live.server.address} if "metrics" in changed and live.server else {}),
    )
    notify(f"STATUS={bridge.status()}")
