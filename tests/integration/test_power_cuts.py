"""The promises, end to end: virtual boards power-cut at random moments (inside journal writes too) and restarted
from the same flash, publishing to a real Mosquitto, with a paho-mqtt subscriber on a persistent session
counting what arrives. QoS 1: nothing accepted is lost. QoS 2: nothing lost and nothing delivered twice.
`make test` cuts each QoS at least 50 times; `make soak` runs POWER_CUTS_PER_QOS=1000."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from host_bridge.broker import Mosquitto
from host_bridge.vboard import POWER_CUT_EXIT_STATUS, BoardDefinition
from tests.integration.boards import board_config, finish, start_board, summary
from tests.integration.observer import Observer, check_promises

CUTS_PER_QOS = int(os.environ.get("POWER_CUTS_PER_QOS", "50"))
COUNT = 25  # messages per run; a run is restarted after every cut until it completes


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mosquitto]:
    with Mosquitto(tmp_path_factory.mktemp("cuts-broker"), persistence=True) as b:
        yield b


def run_until_complete(
    workdir: Path, config: dict[str, object], rng: random.Random, board_name: str = "sim"
) -> tuple[int, str]:
    """Boot the board again and again on the same flash, cutting its power at random, until it completes its
    run. Returns the number of cuts and the last console output."""
    cuts = 0
    definition = BoardDefinition.load(board_name)
    # The file journal costs some 35 flash operations per message, the ring about 2: cut points to match.
    max_op = 120 if board_name == "sim" else 900
    while True:
        if rng.random() < 0.75:
            board = start_board(
                workdir, config, board=definition, cut_at_op=rng.randrange(1, max_op), seed=rng.randrange(1 << 30)
            )
            code, out = finish(board)
        else:
            board = start_board(workdir, config, board=definition, seed=rng.randrange(1 << 30))
            time.sleep(rng.uniform(0.05, 0.5))
            board.power_cut()
            code, out = finish(board)
        if code == 0:
            return cuts, out
        assert code == POWER_CUT_EXIT_STATUS, out
        cuts += 1
        assert cuts < 400, "the board never completes its run"


@pytest.mark.parametrize(
    ("board_name", "qos", "wanted"),
    [
        ("sim", 1, CUTS_PER_QOS),
        ("sim", 2, CUTS_PER_QOS),
        # The LittleFS file journal, for boards without a journal partition: a smaller dose.
        ("sim-nojournal", 1, CUTS_PER_QOS // 2),
        ("sim-nojournal", 2, CUTS_PER_QOS // 2),
        # Group commit: staged messages die with the power, the mark with them; the run republishes them.
        ("sim-group", 2, CUTS_PER_QOS // 2),
    ],
)
def test_power_cuts_lose_nothing_and_qos2_delivers_once(
    tmp_path: Path, broker: Mosquitto, board_name: str, qos: int, wanted: int
) -> None:
    group = 4 if board_name == "sim-group" else 0
    board_name = "sim" if group else board_name
    rng = random.Random(qos * 7919 + len(board_name))
    observer = Observer(broker.address, f"observer-{board_name}-g{group}-q{qos}")
    cuts = 0
    runs = 0
    try:
        while cuts < wanted:
            dev = f"cut-{board_name}-g{group}-q{qos}-{runs}"
            workdir = tmp_path / dev
            workdir.mkdir()
            version = ["3.1", "3.1.1", "5"][runs % 3]
            config = board_config(dev, broker.address, qos, COUNT, version, group_commit=group)
            made, out = run_until_complete(workdir, config, rng, board_name)
            cuts += made
            assert summary(out)["total"] == COUNT, out
            check_promises(observer, dev, qos, COUNT)
            runs += 1
    finally:
        observer.close()
    assert cuts >= wanted


@pytest.mark.parametrize("qos", [1, 2])
def test_broker_restart_with_persistence_keeps_the_promises(tmp_path: Path, qos: int) -> None:
    with Mosquitto(tmp_path / "broker", persistence=True) as broker:
        observer = Observer(broker.address, f"restart-observer-q{qos}")
        try:
            dev = f"restart-q{qos}"
            count = 150
            (tmp_path / dev).mkdir()
            config = board_config(dev, broker.address, qos, count, publish={"interval_ms": 10})
            board = start_board(tmp_path / dev, config)
            for _ in range(2):
                time.sleep(0.6)
                broker.restart()  # mid-run, twice; the board and the observer reconnect
            code, out = finish(board, timeout=120)
            assert code == 0, out
            result = summary(out)
            assert result["total"] == count and result["reconnects"] >= 1, out
            check_promises(observer, dev, qos, count)
        finally:
            observer.close()
