"""`host-bridge vboard`: run the firmware on a virtual ESP32 board."""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TypeVar

from dboard import console_host
from host_bridge import assets
from host_bridge.boards.board_config import check_file, read_json
from host_bridge.boards.definition import BoardDefinition
from host_bridge.boards.firmware_build import add_put_argument, parse_put, secrets_of
from host_bridge.errors import VBoardError
from host_bridge.hil.cycle import boot_once
from host_bridge.hil.virtual_dut import VirtualDut
from host_bridge.net import Destination, add_wait_argument, await_broker
from host_bridge.vboard.events import BOARD_EVENTS, EventSpec
from host_bridge.vboard.flash_image import parse_size, size_argument
from host_bridge.vboard.runner import INSTALL_PATHS
from host_bridge.vboard.serial_line import LineFaults
from host_bridge.vboard.wifi import AccessPoint, JoinModel, Outage
from host_bridge.vboard.wiring import Wiring


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--flash", required=True, type=Path, help="flash image file, created erased if missing")
    parser.add_argument("--config", type=Path, help="JSON written to /flash/config.json at start")
    add_put_argument(parser)
    parser.add_argument("--board", default="sim", help="board folder under boards/ (default: sim)")
    parser.add_argument(
        "--flash-size",
        type=size_argument,
        help="its data partitions' size in a new flash file, e.g. 2M (default: board's)",
    )
    parser.add_argument("--heap", type=size_argument, help="MicroPython heap, e.g. 110k, an ESP32's (default: board's)")
    parser.add_argument("--app", type=Path, default=assets.APP, help="folder with boot.py/main.py")
    parser.add_argument(
        "--library",
        action="store_true",
        help="--app is an application of your own (examples/): install the client library in lib/, as "
        "`mpremote mip install` does, instead of the board application's modules",
    )
    parser.add_argument(
        "--install",
        choices=INSTALL_PATHS,
        default="deployed",
        help="where the firmware's code lives: deployed (.mpy files on LittleFS, loaded into the heap, as "
        "`host-bridge deploy` leaves a stock image; the default), romfs (a ROMFS image, run in place) or frozen "
        "(in the MicroPython image)",
    )
    parser.add_argument(
        "--wiring",
        type=Path,
        metavar="FILE",
        help="the parts on the board's pins and buses (docs/testing-your-firmware.md; default: --app's "
        "wiring.json, if it has one)",
    )
    parser.add_argument(
        "--no-deploy",
        action="store_true",
        help="boot what the board's flash holds (e.g. after `host-bridge deploy` to its console) instead of "
        "installing --app at each boot",
    )
    parser.add_argument(
        "--console",
        nargs="?",
        const=True,
        type=Path,
        metavar="LINK",
        help="give the board a console port with its REPL, as a real board's USB serial port (printed as "
        "`console-port: PATH`; LINK: also reachable at this path), for mpremote or `host-bridge deploy`",
    )
    line = parser.add_argument_group("serial line (host end printed as `serial-port: PATH`)")
    line.add_argument("--no-serial", action="store_true", help="give the board no UART")
    line.add_argument("--baud", type=int, default=0, help="pace both directions at BAUD/10 bytes/s (8N1)")
    line.add_argument("--noise", type=float, default=0.0, metavar="BER", help="bit error rate on the line")
    line.add_argument("--drop", type=float, default=0.0, metavar="P", help="probability a byte is lost")
    line.add_argument("--garbage", type=float, default=0.0, metavar="P", help="probability a random byte is inserted")
    cut = parser.add_argument_group("power cuts")
    cut.add_argument("--cut-op", type=int, default=0, metavar="N", help="cut power during the Nth program/erase")
    cut.add_argument("--cut-after", type=float, metavar="S", help="cut power S seconds after boot")
    cut.add_argument("--cut-random", type=float, metavar="S", help="cut power at a random moment within S seconds")
    cut.add_argument(
        "--cut-on",
        type=_event,
        metavar="EVENT[#N]",
        help="the board cuts its own power at its Nth EVENT (default the 1st): "
        + ", ".join(f"{name} ({where})" for name, where in BOARD_EVENTS.items()),
    )
    wifi = parser.add_argument_group("WiFi (the board's network.WLAN joins a virtual access point on this host)")
    wifi.add_argument(
        "--ap",
        metavar="SSID:PASSWORD",
        help="the access point is this network: another name or password fails to join, as on a chip "
        "(default: it takes any)",
    )
    wifi.add_argument(
        "--ap-outage",
        action="append",
        default=[],
        type=_outage,
        metavar="AT:FOR",
        help="the access point goes down AT seconds after start, or at the board's event (EVENT[#N], as --cut-on "
        "takes it: joined:3 is down for 3 s once the board has joined), for FOR seconds (repeatable)",
    )
    wifi.add_argument(
        "--ap-outages",
        type=float,
        metavar="RATE",
        help="random outages, RATE a minute on average, each 1 to 30 s long (seeded by --seed)",
    )
    wifi.add_argument(
        "--join-scale",
        type=float,
        default=1.0,
        metavar="F",
        help="host time a join or a scan takes, as a share of a chip's (default 1: a DHCP join takes 1.75 s)",
    )
    wifi.add_argument(
        "--beacon-timeout",
        type=float,
        default=6.0,
        metavar="S",
        help="seconds without the access point before a station notices it is gone (ESP-IDF's default: 6)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for line faults and half-done operations")
    parser.add_argument(
        "--stats",
        action="store_true",
        help="print flash counters as `flash-stats: JSON` at exit, sleep counters as `sleep-stats: JSON` and the "
        "access point's as `ap-stats: JSON`",
    )
    parser.add_argument(
        "--flash-timing", action="store_true", help="programs and erases take a real SPI NOR chip's time (W25Q32JV)"
    )
    add_wait_argument(parser)


def run(args: argparse.Namespace) -> int:
    for name in ("noise", "drop", "garbage"):
        if not 0.0 <= getattr(args, name) < 1.0:
            raise VBoardError(f"--{name} must be a probability in [0, 1)")
    if args.config is not None and not assets.is_firmware_app(args.app):
        read_json(args.config)  # an application of one's own reads its own keys: valid JSON is all we know
    elif args.config is not None:
        # The board's own rules, before a flash file is created or anything boots.
        config = check_file(args.config, secrets_of([parse_put(p) for p in args.put]))
        if config["transport"] == "tcp":
            await_broker(
                Destination(config["host"], config["port"]),
                args.wait,
                lambda text: print(f"vboard: {text}", file=sys.stderr, flush=True),
                f"is it running (host-bridge broker starts one), and is the broker in {args.config} right?",
            )
    wiring = Wiring.for_app(args.app, args.wiring)  # (checked before anything boots)
    faults = None if args.no_serial else LineFaults(args.baud, args.noise, args.drop, args.garbage, args.seed)
    ssid = password = None
    if args.ap is not None:
        ssid, sep, password = args.ap.partition(":")
        if not ssid or not sep:
            raise VBoardError(f"--ap is SSID:PASSWORD (an open network: SSID:), not {args.ap!r}")
    if args.beacon_timeout < 0:
        raise VBoardError(f"--beacon-timeout must be 0 or more seconds, not {args.beacon_timeout}")
    ap = AccessPoint(
        args.flash.with_name(args.flash.name + ".ap"),
        ssid,
        password,
        JoinModel(scale=args.join_scale, beacon_ms=round(args.beacon_timeout * 1000)),
        args.ap_outage,
    )
    if args.ap_outages is not None:
        ap.random_outages(args.ap_outages, seed=args.seed)
    # Ended by SIGTERM (a harness, systemd, `kill`): unwind, so that the board and its serial line go with us.
    # SIGKILL cannot be caught: then the kernel's parent-death signal takes the board down (see runner.py).
    signal.signal(signal.SIGTERM, _terminated)
    signal.signal(signal.SIGHUP, _terminated)
    dut = VirtualDut(
        "vboard",
        BoardDefinition.load(args.board),
        flash=args.flash,
        console_log=None,
        faults=faults,
        seed=args.seed,
        console=sys.stdout,
        config=args.config,
        put=tuple(parse_put(p) for p in args.put),
        flash_size=parse_size(args.flash_size) if args.flash_size else None,
        heap=args.heap,
        app=args.app,
        library=args.library,
        flash_timing=args.flash_timing,
        install=args.install,
        deploy=not args.no_deploy,
        console_pty=args.console or False,
        ap=ap,
    )
    dut.drive(**wiring.drive())
    cut_after = args.cut_after
    if args.cut_random is not None:
        cut_after = random.Random(args.seed).uniform(0, args.cut_random)
    try:
        if dut.link_port is not None:
            print(f"serial-port: {dut.vboard.serial_port}", flush=True)
        if dut.vboard.console_port is not None:
            print(f"console-port: {dut.vboard.console_port}", flush=True)
        sys.stdout.flush()
        end = boot_once(dut, cut_after, args.cut_op, timeout=_NO_TIMEOUT, cut_on=args.cut_on)
        wakes = dut.vboard.wakes
        if dut.boots - 1 - wakes > 0:
            print(f"vboard: resets booted the board {dut.boots - 1 - wakes} more time(s)", file=sys.stderr, flush=True)
        if wakes:
            slept = dut.vboard.sleep_stats()["deep_slept_ms"] / 1000
            print(f"vboard: the board woke {wakes} time(s) from deep sleep, {slept:.0f} s asleep", file=sys.stderr)
        if end.kind == "asleep":
            print("vboard: the board is in deep sleep with no timer to wake it", file=sys.stderr, flush=True)
        if end.kind == "power-cut":
            print("vboard: power cut; the flash file keeps what was programmed", file=sys.stderr, flush=True)
        if end.status == console_host.CONFIG_ERROR_STATUS:
            # The board's own words say "reset the board": on the virtual one that is running the command again.
            print(
                f"vboard: the board stopped on its config: fix {args.config or '/flash/config.json'} (or the files "
                "it names), then run host-bridge vboard again",
                file=sys.stderr,
                flush=True,
            )
        assert end.status is not None
        return 0 if end.kind == "asleep" else end.status
    finally:
        dut.close()
        if args.stats:  # (at every end: the board's own, Ctrl-C, SIGTERM, SIGHUP)
            print("flash-stats: " + json.dumps(dut.stats(), sort_keys=True), flush=True)
            print("sleep-stats: " + json.dumps(dut.vboard.sleep_stats(), sort_keys=True), flush=True)
            print("ap-stats: " + json.dumps(asdict(ap.stats), sort_keys=True), flush=True)
        ap.close()


T = TypeVar("T")


def _argument(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An argparse type from a parser that raises VBoardError: its message becomes argparse's usage error."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except VBoardError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


_event = _argument(EventSpec.parse)
_outage = _argument(Outage.parse)


_NO_TIMEOUT = 10 * 365 * 24 * 3600.0  # a board on the command line runs until it ends or is ended


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)
