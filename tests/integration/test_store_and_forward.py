"""Store-and-forward across deep sleep on the virtual board (docs/low-power.md): config.json's sleep.readings_per_send
makes most wakes sampling wakes, which journal their reading with the radio off and load no client; every Nth
wake runs the application, which sends the batch in one connection and reads every acknowledgement. Each boot is
looked at on its own: what it printed, and what it had loaded when it went into deep sleep."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.vboard.runner import VirtualBoard
from host_bridge.vboard.wifi import AccessPoint, JoinModel

# What a sampling wake must leave unloaded: the client, the codec, TLS, the network, the application.
RADIO_AND_CLIENT = {"dmqtt.client", "dmqtt.codec", "dmqtt.tls", "dmqtt.transport", "dmqtt.wifi", "board_app", "config"}
# What a sampling wake whose hint holds leaves unloaded too: the journal's modules, the session, the plan's maker.
WHOLE_JOURNAL = {"dmqtt.journal", "dmqtt.journal_record", "dmqtt.journal_ring", "dmqtt.session", "wake_plan"}


def wakes(tmp_path: Path, config: dict[str, object], ap: AccessPoint) -> list[tuple[str, dict[str, object]]]:
    """Every boot of the board until its run completes: what it printed, and its wake record (last_wake(): every
    module the wake imported)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    board = VirtualBoard(
        tmp_path / "b.flash",
        config=path,
        ap=ap,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        extra_env={"VBOARD_IMPORTS": "1"},  # (what a wake loaded, those it dropped once used among them)
    )
    boots = []
    try:
        while True:
            board.start()
            out = board.output(60)
            status = board.wait()
            boots.append((out, board.last_wake()))
            if not board.next_boot(status):
                assert status == 0, out[-3000:]
                return boots
            assert len(boots) < 100, "the run never completed"
    finally:
        board.close()


def test_sampling_wakes_journal_with_the_radio_off_and_every_nth_wake_sends_the_batch(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    config = {
        "client_id": "batch-life",
        "broker": mosquitto.address,
        "mqtt_version": "5",
        "wifi": {"ssid": "lab"},
        "publish": {"qos": 2, "count": 13, "payload_bytes": 60},
        "sleep": {"every_s": 60, "awake_s": 10, "readings_per_send": 4},
    }
    with AccessPoint(tmp_path / "ap", model=JoinModel(scale=0.02)) as ap:
        boots = wakes(tmp_path, config, ap)
    sending = [(out, wake) for out, wake in boots if re.search(r"^boot \d+:", out, re.M)]
    sampling = [(out, wake) for out, wake in boots if not re.search(r"^boot \d+:", out, re.M)]
    # A power-on sends, then every 4th wake: 13 readings are 4 sending wakes (1, 5, 9, 13) and 9 sampling ones.
    assert (len(sending), len(sampling)) == (4, 9), [out for out, _ in boots]
    for out, wake in sampling:
        assert re.fullmatch(r"(?s).*accepted \d+ \d+\nsleep: \d+ ms, \d+ in flight\n", out), out
        assert "wifi:" not in out and not RADIO_AND_CLIENT & set(wake["loaded"]), (out, wake)  # type: ignore[arg-type]
        # It appends at the head the last wake's hint names (dmqtt.wake): no journal module, no session.
        assert {"sampler", "dmqtt.wake"} <= set(wake["loaded"]), wake  # type: ignore[arg-type]
        assert not WHOLE_JOURNAL & set(wake["loaded"]), wake  # type: ignore[arg-type]
    for n, (out, wake) in enumerate(sending[:-1]):
        assert "wifi: joined" in out and re.search(r"sleep: \d+ ms, 0 in flight", out), out
        assert RADIO_AND_CLIENT - {"config", "dmqtt.tls"} <= set(wake["loaded"]), wake  # (no TLS here)
        # The power-on checks config.json and keeps the check; the sending wakes after it load no checker.
        assert ("config" in wake["loaded"]) == (n == 0), wake  # type: ignore[operator]
    # The readings of a batch go out under one boot's number, numbered on from the sending wake's own.
    accepted = [tuple(map(int, m)) for out, _ in boots for m in re.findall(r"accepted (\d+) (\d+)", out)]
    assert len(accepted) == len(set(accepted)) == 13
    assert [seq for boot, seq in accepted if boot == accepted[4][0]] == [0, 1, 2, 3]
    summary = json.loads(sending[-1][0].strip().splitlines()[-1])
    assert summary["total"] == 13 and summary["count"] == 13, summary


def reading_a_wake(tmp_path: Path, broker: Mosquitto, client_id: str, qos: int) -> list[tuple[str, dict[str, object]]]:
    """Every boot of a WiFi board that sends at every wake (readings_per_send 1, the default), 3 readings."""
    config = {
        "client_id": client_id,
        "broker": broker.address,
        "wifi": {"ssid": "lab"},
        "publish": {"qos": qos, "count": 3},
        "sleep": {"every_s": 60, "awake_s": 10},
    }
    with AccessPoint(tmp_path / "ap", model=JoinModel(scale=0.02)) as ap:
        return wakes(tmp_path, config, ap)


def test_a_board_that_sends_every_wake_keeps_no_plan_for_sampling_wakes(tmp_path: Path, mosquitto: Mosquitto) -> None:
    """readings_per_send 1 (the default): every wake runs the application; a plan a former config left is void."""
    boots = reading_a_wake(tmp_path, mosquitto, "batch-none", 1)
    assert len(boots) == 3 and all(re.search(r"^boot \d+:", out, re.M) for out, _ in boots), boots


def test_a_qos0_reading_waits_for_the_join_within_the_awake_time(tmp_path: Path, mosquitto: Mosquitto) -> None:
    """A QoS 0 reading is not journaled: it goes over the wake's connection. The wake starts unjoined, so the
    reading waits for the join and the connection within sleep.awake_s, and is dropped (counted) only when they do
    not come in time."""
    boots = reading_a_wake(tmp_path, mosquitto, "qos0-sleeper", 0)
    summary = json.loads(boots[-1][0].strip().splitlines()[-1])
    assert summary["wifi"]["dropped"] == 0 and summary["total"] == 3, "\n".join(out for out, _ in boots)
