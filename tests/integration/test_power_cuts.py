"""The promises, end to end: virtual boards power-cut at random moments (inside journal writes too) and restarted
from the same flash, publishing to a real Mosquitto, with a paho-mqtt subscriber on a persistent session
counting what arrives. QoS 1: nothing accepted is lost. QoS 2: nothing lost and nothing delivered twice.
`make test` cuts each QoS at least 50 times; `make soak` runs POWER_CUTS_PER_QOS=1000."""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from host_bridge.broker import Mosquitto
from host_bridge.vboard import POWER_CUT_EXIT_STATUS, BoardDefinition
from tests.integration.boards import board_config, finish, start_board, summary

CUTS_PER_QOS = int(os.environ.get("POWER_CUTS_PER_QOS", "50"))
COUNT = 25  # messages per run; a run is restarted after every cut until it completes


class Recorder:
    """A QoS 2 subscriber with a persistent session: every delivery, duplicates included, by device."""

    def __init__(self, address: str, client_id: str) -> None:
        host, port = address.rsplit(":", 1)
        self.address = (host, int(port))
        self.lock = threading.Lock()
        self.deliveries: dict[str, list[tuple[int, int, bool]]] = defaultdict(list)  # dev -> (boot, seq, dup)
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False)
        self.client.on_message = self._on_message
        self.client.on_connect = lambda c, u, f, rc, p: c.subscribe("sensors/#", qos=2)
        self.client.reconnect_delay_set(0.1, 1)
        self.client.connect(host, int(port))
        self.client.loop_start()
        deadline = time.monotonic() + 10
        while not self.client.is_connected() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # SUBACK

    def _on_message(self, _c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        body = json.loads(msg.payload)
        with self.lock:
            self.deliveries[body["dev"]].append((body["boot"], body["seq"], bool(msg.dup)))

    def distinct(self, dev: str) -> set[tuple[int, int]]:
        with self.lock:
            return {(boot, seq) for boot, seq, _ in self.deliveries[dev]}

    def wait_for(self, dev: str, count: int, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while len(self.distinct(dev)) < count and time.monotonic() < deadline:
            time.sleep(0.05)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mosquitto]:
    with Mosquitto(tmp_path_factory.mktemp("cuts-broker"), persistence=True) as b:
        yield b


def check_promises(recorder: Recorder, dev: str, qos: int, count: int) -> None:
    recorder.wait_for(dev, count)
    with recorder.lock:
        got = list(recorder.deliveries[dev])
    distinct = {(boot, seq) for boot, seq, _ in got}
    by_boot: dict[int, list[int]] = defaultdict(list)
    for boot, seq in distinct:
        by_boot[boot].append(seq)
    for boot, seqs in by_boot.items():
        # Each boot's accepted messages are seq 0..k-1: a gap is an accepted message that was lost.
        assert sorted(seqs) == list(range(len(seqs))), f"{dev} boot {boot}: lost {set(range(max(seqs))) - set(seqs)}"
    assert len(distinct) == count, f"{dev}: {len(distinct)} distinct messages arrived, {count} were accepted"
    if qos == 2:
        dups = len(got) - len(distinct)
        assert dups == 0, f"{dev}: {dups} QoS 2 messages delivered twice"


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
    recorder = Recorder(broker.address, f"recorder-{board_name}-g{group}-q{qos}")
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
            check_promises(recorder, dev, qos, COUNT)
            runs += 1
    finally:
        recorder.close()
    assert cuts >= wanted


@pytest.mark.parametrize("qos", [1, 2])
def test_broker_restart_with_persistence_keeps_the_promises(tmp_path: Path, qos: int) -> None:
    with Mosquitto(tmp_path / "broker", persistence=True) as broker:
        recorder = Recorder(broker.address, f"restart-recorder-q{qos}")
        try:
            dev = f"restart-q{qos}"
            count = 150
            (tmp_path / dev).mkdir()
            config = board_config(dev, broker.address, qos, count, publish={"interval_ms": 10})
            board = start_board(tmp_path / dev, config)
            for _ in range(2):
                time.sleep(0.6)
                broker.restart()  # mid-run, twice; the board and the recorder reconnect
            code, out = finish(board, timeout=120)
            assert code == 0, out
            result = summary(out)
            assert result["total"] == count and result["reconnects"] >= 1, out
            check_promises(recorder, dev, qos, count)
        finally:
            recorder.close()
