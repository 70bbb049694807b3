"""The heap budget of every documented configuration, in the install path a stock image gets (.mpy files on the
board's filesystem, as `host-bridge deploy` leaves them, so the code itself takes heap), at each board
definition's heap: over a run with a power cut inside the journal's writes (the second boot replays the journal),
the lowest free heap the board reports stays at or above HEAP_GOAL (host_bridge/hil/verdict.py). Every other
scenario of the bench is held to the same budget by its verdict; these make sure each configuration is run.

Virtual boards only: their figures are the Unix port's 64-bit objects, stricter than a chip's (BENCHMARKS.md has
the table, docs/install-paths.md what each path leaves). The other install paths run once each here too."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dmqtt_telemetry.promises import Witness
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.broker.pki import CertificateAuthority
from host_bridge.hil.heap import (
    BOARDS,
    BOOTED,
    CONFIGURATIONS,
    DEPLOYED_SHORT,
    MESSAGES,
    boot_runs,
    documented_install,
    heap_goal,
    heap_run,
)  # fmt: skip
from host_bridge.hil.plugin import Bridge
from host_bridge.hil.subscriber import Subscriber
from host_bridge.hil.verdict import HEAP_GOAL, BoardRun, judge_runs

pytestmark = pytest.mark.hil_virtual("chooses the board definition and the install path")


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """Mosquitto with a TLS listener: its address, and the CA that signed its certificate."""
    root = tmp_path_factory.mktemp("tls")
    ca = CertificateAuthority(root / "ca")
    with Mosquitto(root / "broker", tls=ca.issue("broker", "localhost", dns="localhost")) as hil_broker:
        yield hil_broker.address, ca.ca


def run(
    hil_log: Path,
    name: str,
    board: str,
    hil_broker: Any,
    hil_bridge: Bridge,
    tls: tuple[str, Path],
    install: str = "deployed",
) -> tuple[BoardRun, dict[str, Any]]:
    summary, accepted = heap_run(
        hil_log, name, board, hil_broker.address, tls, (lambda dut: hil_bridge.start([dut]), hil_bridge.stop), install
    )
    qos = int(CONFIGURATIONS[name]["qos"])
    run = BoardRun.from_summary(summary, qos, 2, 1)
    run.witness = Witness(accepted) if qos else None  # judged by what its console said it accepted
    return run, summary


@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("name", list(CONFIGURATIONS))
def test_each_configuration_keeps_the_heap_budget_deployed(
    hil_log: Path,
    hil_broker: Any,
    hil_bridge: Bridge,
    hil_subscriber: Subscriber,
    tls_broker: tuple[str, Path],
    name: str,
    board: str,
) -> None:
    board_run, summary = run(hil_log, name, board, hil_broker, hil_bridge, tls_broker)
    assert board_run.heap_low is not None, summary  # the board reports its heap's low point and largest block
    assert summary["heap_max_block"] > 0 and summary["heap_min"] <= summary["heap_at_boot"]
    print(
        f"\n{name} on {board}: {summary['heap_min']} bytes free at the lowest, largest block "
        f"{summary['heap_max_block']}, TLS held {summary['heap_tls']} (budget {HEAP_GOAL})"
    )
    # The budget, or a documented shortfall's floor (DEPLOYED_SHORT), the promises judged as for every run.
    board_run.heap_goal = heap_goal(name, board, "deployed")
    if "tls" in CONFIGURATIONS[name]:
        assert board_run.sent == MESSAGES  # its own broker: no subscriber there
        # What the connection holds of MicroPython's heap: its objects, not mbedTLS's buffers (about 5 KB, in
        # ESP-IDF's heap on a chip, in the emulation's TLS arena here).
        assert 0 < summary["heap_tls"] < 2048, summary
        assert board_run.heap_low >= board_run.heap_goal, summary
        return
    if "confirm" in CONFIGURATIONS[name]:  # the recorder confirmed everything, through the power cut
        assert summary["confirm"]["unconfirmed"] == 0 and summary["confirm"]["dropped"] == 0, summary
    hil_verdict = judge_runs(f"heap-{name}-{board}", hil_subscriber, [board_run])
    hil_verdict.save(hil_log)
    hil_verdict.assert_kept()  # the promises, and the heap budget


@pytest.mark.parametrize("install", ["romfs", "frozen"])
def test_the_other_install_paths_run_the_firmware_from_flash(
    hil_log: Path,
    hil_broker: Any,
    hil_bridge: Bridge,
    hil_subscriber: Subscriber,
    tls_broker: tuple[str, Path],
    install: str,
) -> None:
    """The same run with the code in a ROMFS image or frozen into the image: the promises hold, and the code no
    longer takes heap, so more is left than in the deployed path, frozen most of all (only its objects remain)."""
    deployed, _ = run(hil_log, "tcp-qos2-subscription", "sim", hil_broker, hil_bridge, tls_broker)
    flash, summary = run(hil_log, "tcp-qos2-subscription", "sim", hil_broker, hil_bridge, tls_broker, install)
    hil_verdict = judge_runs(f"install-{install}", hil_subscriber, [deployed, flash])
    hil_verdict.save(hil_log)
    hil_verdict.assert_kept()
    assert deployed.heap_low is not None and flash.heap_low is not None
    assert flash.heap_low > deployed.heap_low + (40 if install == "frozen" else 20) * 1024, (deployed, flash, summary)


@pytest.mark.parametrize("name", sorted({name for name, _ in DEPLOYED_SHORT}))
def test_what_is_short_deployed_keeps_the_budget_from_flash(
    hil_log: Path,
    hil_broker: Any,
    hil_bridge: Bridge,
    hil_subscriber: Subscriber,
    tls_broker: tuple[str, Path],
    name: str,
) -> None:
    """The configurations short of the budget in the deployed path keep it with the code in a ROMFS image, or
    frozen where the image has no ROMFS (what docs/install-paths.md tells a board that wants them)."""
    for board in sorted({b for n, b in DEPLOYED_SHORT if n == name}):
        install = documented_install(name, board)
        board_run, summary = run(hil_log, name, board, hil_broker, hil_bridge, tls_broker, install)
        print(f"\n{name} on {board} ({install}): {summary['heap_min']} bytes free at the lowest")
        if "tls" in CONFIGURATIONS[name]:  # its own broker: no subscriber there
            assert board_run.heap_low is not None and board_run.heap_low >= HEAP_GOAL, summary
            continue
        hil_verdict = judge_runs(f"heap-{name}-{board}-{install}", hil_subscriber, [board_run])
        hil_verdict.save(hil_log)
        hil_verdict.assert_kept()  # the promises, and the heap budget


# Boots each configuration is held to: 20 of 20 in `make soak` (HIL_BOOTS=20) and, in `make test`, for the serial
# board with confirmation, whose boot comes nearest its heap; 5 for the others (make test's time).
BOOTS = int(os.environ.get("HIL_BOOTS", "5"))
ALWAYS_20 = ("serial-confirm",)


@pytest.mark.parametrize("name", list(BOOTED))
def test_every_configuration_boots_every_time(
    hil_log: Path, hil_broker: Any, hil_bridge: Bridge, tls_broker: tuple[str, Path], name: str
) -> None:
    """Each configuration the README offers boots every time on the install path docs/install-paths.md gives it
    on `sim` (the deployed .mpy files, the default, unless it is short of the budget there: then ROMFS), each boot
    over the journal the last one left, to its first accepted message (QoS 0: its run's end): never a
    MemoryError."""
    boots = max(BOOTS, 20) if name in ALWAYS_20 else BOOTS
    said = boot_runs(hil_log, name, "sim", hil_broker.address, tls_broker,
                     (lambda dut: hil_bridge.start([dut]), hil_bridge.stop), boots,
                     documented_install(name, "sim"))  # fmt: skip
    assert len(said) == boots and all(text.count("\nboot ") >= 1 for text in said)
