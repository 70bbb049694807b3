"""The heap budget's documented configurations, and one run of a configuration on a virtual board: what the bench's
budget scenario (tests/hil/test_heap_budget.py) and `make bench`'s heap figure both run (docs/install-paths.md).

One dimension at a time from the base (TCP, MQTT 5, QoS 1, window auto), the heaviest case of each transport. A
run goes through one power cut inside the journal's writes, so that the second boot replays a journal with flows
in flight, and returns the board's last summary line (heap_min, heap_max_block, heap_tls, heap_at_boot)."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from host_bridge.boards.definition import BoardDefinition
from host_bridge.hil.cycle import CutPlan, run_to_completion
from host_bridge.hil.dut import Dut, DutError
from host_bridge.hil.scenario import app_config
from host_bridge.hil.verdict import HEAP_GOAL
from host_bridge.hil.virtual_dut import VirtualDut
from host_bridge.processes import ManagedProcess
from host_bridge.vboard.events import EventSpec
from host_bridge.vboard.serial_line import LineFaults
from host_bridge.vboard.wifi import AccessPoint, JoinModel

SUBSCRIPTION = [{"topic": "cmd/{client_id}", "qos": 2}]
CONFIGURATIONS: dict[str, dict[str, Any]] = {
    "tcp-qos0": {"qos": 0},
    "tcp-qos1": {"qos": 1},
    "tcp-qos2": {"qos": 2},
    "tcp-qos2-subscription": {"qos": 2, "subscribe": SUBSCRIPTION},
    "tcp-window-auto": {"qos": 1, "window": "auto"},
    "tcp-group-commit": {"qos": 1, "group_commit": 8},
    # End-to-end confirmation, a confirming recorder beside the board (heap_run starts one).
    "tcp-confirm": {"qos": 2, "confirm": {}},
    "tls-qos2-subscription": {"qos": 2, "subscribe": SUBSCRIPTION, "tls": True},
    # WiFi supervised (dmqtt.wifi), publishing all along; and deep sleep between readings, one a wake.
    "tcp-wifi": {"qos": 1, "wifi": True},
    "tls-wifi": {"qos": 1, "wifi": True, "tls": True},
    "tcp-wifi-sleep": {"qos": 1, "wifi": True, "sleep": {"every_s": 60, "awake_s": 20}},
    # Store-and-forward: a sending wake with a batch of 60 readings journaled by the sampling wakes before it.
    "tcp-wifi-batch": {"qos": 1, "wifi": True, "sleep": {"every_s": 60, "awake_s": 20, "readings_per_send": 60}},
    "serial-qos2-subscription": {"qos": 2, "subscribe": SUBSCRIPTION, "transport": "serial"},
}
# Each distinct heap among the board definitions (110 KB with WiFi, 140 KB without: the ESP32 and the virtual
# board; 128 and 158 KB: the S3, C3, C6), and the file journal's boards (no mqttlog partition).
BOARDS = ["sim", "sim-nojournal", "esp32-c3-devkitm-1"]
MESSAGES = 60
# What does not keep the budget in the deployed path, per board, and the floor it keeps there instead: bytes, the
# lowest tests/hil/test_heap_budget.py measured less a margin, so that a regression still fails. Each is the
# configuration's own code on an ESP32 with WiFi; docs/install-paths.md says where it keeps the budget (ROMFS,
# frozen code, the serial link, the S3, C3 and C6). The low point moves by up to 192 bytes with the length of the
# run's folder, which a chip does not have (measured over folder names of 20 to 160 characters; the emulation
# reads its paths as strings during the run, and the collector is conservative): each floor is under the lowest.
DEPLOYED_SHORT: dict[tuple[str, str], int] = {
    # End-to-end confirmation's code and state (dmqtt/confirm.py), with the client's answers to a broker's broken
    # rules (a Maximum QoS held, not downgraded; a PUBREC of no flow answered).
    ("tcp-confirm", "sim"): 24_704,
    ("tcp-confirm", "sim-nojournal"): 28_224,  # the same on the file journal's board
    ("tcp-wifi", "sim"): 31_232,  # WiFi supervision's code on a board that stays awake (dmqtt.wifi, supervise.py)
    ("tls-wifi", "sim"): 29_696,  # the same with TLS: tls_open.py's code and the connection's objects
    ("tls-qos2-subscription", "sim"): 32_256,  # TLS's code and the connection's objects (mbedTLS's are apart)
}


def documented_install(name: str, board: str) -> str:
    """The install path docs/install-paths.md gives configuration `name` on `board`: the deployed .mpy files
    where it keeps the budget there, else the code in a ROMFS image, or frozen where the board's image has no
    ROMFS partition."""
    if (name, board) not in DEPLOYED_SHORT:
        return "deployed"
    return "romfs" if any(p.label == "romfs" for p in BoardDefinition.load(board).partitions) else "frozen"


def heap_goal(name: str, board: str, install: str) -> int:
    """The lowest free heap a run of configuration `name` on `board` must keep: the budget, or on the deployed
    path its documented floor where it has one (DEPLOYED_SHORT)."""
    if install == "deployed":
        return DEPLOYED_SHORT.get((name, board), HEAP_GOAL)
    return HEAP_GOAL


# The configurations a boot is held on (boot_runs): the budget's, and the serial board with end-to-end
# confirmation, which the README offers and whose boot comes nearest its heap (every module, the link's buffers
# and the confirmation's state loaded on the deployed path).
BOOTED: dict[str, dict[str, Any]] = {
    **CONFIGURATIONS,
    "serial-confirm": {"qos": 2, "confirm": {}, "transport": "serial"},
}


@contextmanager
def _configured_board(
    work: Path,
    name: str,
    board_name: str,
    broker: str,
    tls: tuple[str, Path] | None,
    bridge: tuple[Callable[[Dut], None], Callable[[], None]],
    install: str,
    messages: int,
) -> Iterator[tuple[VirtualDut, dict[str, Any]]]:
    """A virtual board of `board_name` configured as `name` (BOOTED), with what it needs beside it: its access
    point, a confirming recorder, the bridge for the serial link. -> (the board, the configuration's options)."""
    options = dict(BOOTED[name])
    transport = options.pop("transport", "tcp")
    qos = options.pop("qos")
    put: tuple[tuple[Path, str], ...] = ()
    address = broker
    if options.pop("tls", False):
        if tls is None:
            raise DutError(f"{name} needs a broker with a TLS listener")
        address = tls[0]
        options["tls"] = {"ca": "ca.pem", "server_hostname": "localhost"}
        put = ((tls[1], "ca.pem"),)
    dev = f"heap-{name}-{board_name}-{install}"[:60]
    # Its access point joins it in a twentieth of a chip's time (the heap does not depend on the join's time).
    ap = AccessPoint(work / f"{dev}.ap", model=JoinModel(scale=0.05))
    dut = VirtualDut(
        dev,
        BoardDefinition.load(board_name),
        flash=work / dev / "board.flash",
        console_log=work / f"{dev}.console.log",
        faults=LineFaults(baud=115200) if transport == "serial" else None,
        install=install,
        put=put,
        ap=ap,
    )
    start_bridge, stop_bridge = bridge
    recorder = None
    try:
        if "confirm" in options:
            # (its own command line: the bench is a layer below the recorder, and runs it as a user does)
            recorder = ManagedProcess(
                [sys.executable, "-m", "host_bridge", "record", "--broker", broker, "--confirm", "--topic",
                 f"sensors/{dev}/#", "--out", str(work / dev / "recorded"), "--flush-seconds", "1"],
                work / f"{dev}.recorder.log",
            )  # fmt: skip
            recorder.wait_for("event=connected")
        config = app_config(dut, dev, address, qos, messages, "5", transport, publish={"interval_ms": 10}, **options)
        if transport == "serial":
            start_bridge(dut)
        dut.configure(config)
        yield dut, options
    finally:
        dut.close()
        ap.close()
        if transport == "serial":
            stop_bridge()
        if recorder is not None:
            recorder.stop()


def heap_run(
    work: Path,
    name: str,
    board_name: str,
    broker: str,
    tls: tuple[str, Path] | None,
    bridge: tuple[Callable[[Dut], None], Callable[[], None]],
    install: str = "deployed",
    messages: int = MESSAGES,
) -> tuple[dict[str, Any], dict[int, list[int]]]:
    """Run configuration `name` on a virtual board of `board_name` to completion through one power cut; the
    board's last summary, and its witness (console_host.acceptances: what its console said it accepted). `tls`:
    the address of a broker's TLS listener and the CA that signed it; `bridge`: (start it for this board, stop
    it), for the serial link."""
    sleep = CONFIGURATIONS[name].get("sleep")
    if sleep is not None:
        # A board that sleeps takes a reading a wake: a dozen wakes show its heap. Store-and-forward: one whole
        # batch, whose sending wake is the low point (a second batch's sending wake reaches the same).
        messages = sleep.get("readings_per_send", 12)
    with _configured_board(work, name, board_name, broker, tls, bridge, install, messages) as (dut, options):
        # From the 20th flash operation of the boot: inside the journal's writes, with flows in flight (a board
        # that sleeps writes a record or two a wake: inside one of its first wake's).
        ops = (2, 5) if "sleep" in options else (20, 60)
        plan = CutPlan(cuts=1, inside_flash=1.0, flash_ops=ops)
        result = run_to_completion(dut, plan, random.Random(len(dut.name)), timeout=120)
    if result.summary is None or result.cuts != 1:
        raise DutError(f"{dut.name}: the run did not go through its power cut; console log {dut.console.path}")
    return result.summary, dut.console.acceptances()


def boot_runs(
    work: Path,
    name: str,
    board_name: str,
    broker: str,
    tls: tuple[str, Path] | None,
    bridge: tuple[Callable[[Dut], None], Callable[[], None]],
    boots: int,
    install: str = "deployed",
) -> list[str]:
    """Boot configuration `name` (BOOTED) `boots` times on one board, each boot's power cut right after it
    accepts its first message (the whole application made: its client, journal, link and confirmation; at QoS 0,
    which accepts nothing into the journal, each boot's run goes to its end), so that each boot starts over a
    journal the last one left. -> each boot's console; DutError naming the boot
    that ended otherwise (a MemoryError, a traceback, a wait that never ended)."""
    said = []
    # QoS 0 accepts nothing into the journal: such a boot runs its MESSAGES to their end. Otherwise a run longer
    # than the boots can accept, so that every boot has a message to accept.
    accepting = BOOTED[name]["qos"] > 0
    messages = 100_000 if accepting else MESSAGES
    with _configured_board(work, name, board_name, broker, tls, bridge, install, messages) as (dut, _):
        for boot in range(1, boots + 1):
            dut.start(cut_on=EventSpec("accepted", 1) if accepting else None)
            end = dut.wait_boot(60)
            said.append(end.console)
            ended = "power-cut" if accepting else "done"
            if end.kind != ended or "Traceback" in end.console or "MemoryError" in end.console:
                raise DutError(
                    f"{dut.name}: boot {boot} of {boots} ended {end.kind}, where {ended} was expected; its console "
                    f"said:\n{end.console[-1500:]}"
                )
    return said
