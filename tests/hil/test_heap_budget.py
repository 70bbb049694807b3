"""The heap budget of every documented configuration, in the install path a stock image gets (.mpy files on the
board's filesystem, as `host-bridge deploy` leaves them, so the code itself takes heap), at each board
definition's heap: over a run with a power cut inside the journal's writes (the second boot replays the journal),
the lowest free heap the board reports stays at or above HEAP_GOAL (host_bridge/hil/verdict.py). Every other
scenario of the bench is held to the same budget by its verdict; these make sure each configuration is run.

Virtual boards only: their figures are the Unix port's 64-bit objects, stricter than a chip's (BENCHMARKS.md has
the table, docs/install-paths.md what each path leaves). The other install paths run once each here too."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from host_bridge.boards import BoardDefinition
from host_bridge.broker import Mosquitto
from host_bridge.hil.cycle import CutPlan, run_to_completion
from host_bridge.hil.dut import VirtualDut
from host_bridge.hil.plugin import Bridge
from host_bridge.hil.scenario import app_config
from host_bridge.hil.subscriber import Subscriber
from host_bridge.hil.verdict import HEAP_GOAL, BoardRun, judge_runs
from host_bridge.pki import CertificateAuthority
from host_bridge.vboard.serial_line import LineFaults

pytestmark = pytest.mark.hil_virtual("chooses the board definition and the install path")

COUNT = 60
SUBSCRIPTION = [{"topic": "cmd/{client_id}", "qos": 2}]
# One dimension at a time from the base (TCP, MQTT 5, QoS 1, window auto), the heaviest case of each transport.
CONFIGS: dict[str, dict[str, Any]] = {
    "tcp-qos0": {"qos": 0},
    "tcp-qos1": {"qos": 1},
    "tcp-qos2": {"qos": 2},
    "tcp-qos2-subscription": {"qos": 2, "subscribe": SUBSCRIPTION},
    "tcp-window-auto": {"qos": 1, "window": "auto"},
    "tcp-group-commit": {"qos": 1, "group_commit": 8},
    "tls-qos2-subscription": {"qos": 2, "subscribe": SUBSCRIPTION, "tls": True},
    "serial-qos2-subscription": {"qos": 2, "subscribe": SUBSCRIPTION, "transport": "serial"},
}
# Each distinct heap among the board definitions (with WiFi and without), and the file journal's boards.
BOARDS = ["sim", "sim-nojournal", "esp32-c3-devkitm-1"]


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Mosquitto, Path]]:
    """Mosquitto with a TLS listener, and the CA that signed its certificate."""
    root = tmp_path_factory.mktemp("tls")
    ca = CertificateAuthority(root / "ca")
    with Mosquitto(root / "broker", tls=ca.issue("broker", "localhost", dns="localhost")) as broker:
        yield broker, ca.ca


def budget_run(
    hil_log: Path,
    name: str,
    board_name: str,
    options: dict[str, Any],
    broker: Any,
    bridge: Bridge,
    tls_broker: tuple[Mosquitto, Path],
    install: str = "deployed",
) -> tuple[BoardRun, dict[str, Any]]:
    """One board through a run with a power cut; its BoardRun and last summary."""
    options = dict(options)
    tls = options.pop("tls", False)
    transport = options.pop("transport", "tcp")
    qos = options.pop("qos")
    board = BoardDefinition.load(board_name)
    dev = f"heap-{name}-{board_name}-{install}"[:60]
    put: tuple[tuple[Path, str], ...] = ()
    address = broker.address
    if tls:
        address = tls_broker[0].address
        options["tls"] = {"ca": "ca.pem", "server_hostname": "localhost"}
        put = ((tls_broker[1], "ca.pem"),)
    dut = VirtualDut(
        dev,
        board,
        flash=hil_log / dev / "board.flash",
        console_log=hil_log / f"{dev}.console.log",
        faults=LineFaults(baud=115200) if transport == "serial" else None,
        install=install,
        put=put,
    )
    try:
        config = app_config(dut, dev, address, qos, COUNT, "5", transport, publish={"interval_ms": 10}, **options)
        if transport == "serial":
            bridge.start([dut])
        dut.configure(config)
        # The cut lands inside the journal's writes (from the 20th flash operation of the boot): the next boot
        # replays a journal with flows in flight.
        plan = CutPlan(cuts=1, inside_flash=1.0, flash_ops=(20, 60))
        result = run_to_completion(dut, plan, random.Random(len(dev)), timeout=120)
    finally:
        dut.close()
        bridge.stop()
    assert result.summary is not None and result.cuts == 1, result.last
    return BoardRun.from_summary(result.summary, qos, result.boots, result.cuts), result.summary


@pytest.mark.parametrize("board_name", BOARDS)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_each_configuration_keeps_the_heap_budget_deployed(
    hil_log: Path,
    broker: Any,
    bridge: Bridge,
    subscriber: Subscriber,
    tls_broker: tuple[Mosquitto, Path],
    name: str,
    board_name: str,
) -> None:
    run, summary = budget_run(hil_log, name, board_name, CONFIGS[name], broker, bridge, tls_broker)
    assert run.heap_low is not None, summary  # the board reports its heap's low point and largest block
    assert summary["heap_max_block"] > 0 and summary["heap_min"] <= summary["heap_at_boot"]
    print(
        f"\n{name} on {board_name}: {summary['heap_min']} bytes free at the lowest, largest block "
        f"{summary['heap_max_block']}, TLS held {summary['heap_tls']} (budget {HEAP_GOAL})"
    )
    if "tls" in CONFIGS[name]:
        assert summary["heap_tls"] > 0 and run.sent == COUNT  # its own broker: no subscriber there
        assert run.heap_low >= HEAP_GOAL, summary
        return
    verdict = judge_runs(f"heap-{name}-{board_name}", subscriber, [run])
    verdict.save(hil_log)
    verdict.assert_kept()  # the promises, and the heap budget


@pytest.mark.parametrize("install", ["romfs", "frozen"])
def test_the_other_install_paths_run_the_firmware_from_flash(
    hil_log: Path,
    broker: Any,
    bridge: Bridge,
    subscriber: Subscriber,
    tls_broker: tuple[Mosquitto, Path],
    install: str,
) -> None:
    """The same run with the code in a ROMFS image or frozen into the image: the promises hold, and the code no
    longer takes heap, so more is left than in the deployed path, frozen most of all (only its objects remain)."""
    options = CONFIGS["tcp-qos2-subscription"]
    deployed, _ = budget_run(hil_log, "base", "sim", options, broker, bridge, tls_broker)
    run, summary = budget_run(hil_log, "flash", "sim", options, broker, bridge, tls_broker, install)
    verdict = judge_runs(f"install-{install}", subscriber, [deployed, run])
    verdict.save(hil_log)
    verdict.assert_kept()
    assert deployed.heap_low is not None and run.heap_low is not None
    assert run.heap_low > deployed.heap_low + (40 if install == "frozen" else 20) * 1024, (deployed, run, summary)
