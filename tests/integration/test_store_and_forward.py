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
from host_bridge.hil.subscriber import Subscriber
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


def test_a_refused_join_ends_at_once_and_the_sending_wakes_back_off_until_one_joins(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """A wrong password (status 202): the sending wake ends as soon as the network says no, not at awake_s, and says
    why; the sampling wakes go on journaling, and each refused sending wake puts the next one twice as far away
    (readings_per_send 3: at the power-on, then 6 wakes on, then 12). A reset with the password put right (a new
    config.json) joins at once and sends every reading: nothing was lost while the network refused."""
    config = {
        "client_id": "refused-1",
        "broker": mosquitto.address,
        "mqtt_version": "5",
        "wifi": {"ssid": "lab", "password": "wrong"},
        "publish": {"qos": 1, "count": 40, "payload_bytes": 40},
        "sleep": {"every_s": 60, "awake_s": 30, "readings_per_send": 3},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    subscriber = Subscriber(mosquitto.address, "refused-observer", "sensors/refused-1/#")
    outs: list[str] = []
    awake_ms: list[int] = []
    with AccessPoint(tmp_path / "ap", model=JoinModel(scale=0.02), ssid="lab", password="right") as ap:
        board = VirtualBoard(tmp_path / "b.flash", config=path, ap=ap, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            for _ in range(20):
                board.start()
                outs.append(board.output(60))
                assert board.next_boot(board.wait()), outs[-1][-3000:]
                awake_ms.append(int(board.last_wake()["awake_ms"]))
            sending = [n for n, out in enumerate(outs) if re.search(r"^boot \d+:", out, re.M)]
            assert sending == [0, 6, 18], "\n".join(f"{n}: {out}" for n, out in enumerate(outs))
            for n in sending:
                assert "wifi: not joined (status 202): the password was refused" in outs[n], outs[n]
                assert awake_ms[n] < 15_000, awake_ms  # the refusal ends the wake, not sleep.awake_s (30 s)
            accepted = [m for out in outs for m in re.findall(r"^accepted (\d+) (\d+)$", out, re.M)]
            assert len(accepted) == 20  # one a wake: the sampling wakes journal while the network refuses
            # The password put right, and the board reset (as deploying a config.json does): it joins and sends.
            config["wifi"] = {"ssid": "lab", "password": "right"}
            path.write_text(json.dumps(config))
            board.power_cut()
            board.start()
            outs.append(board.output(60))
            board.wait()
            assert "wifi: joined" in outs[-1] and re.search(r"sleep: \d+ ms, 0 in flight", outs[-1]), outs[-1]
        finally:
            board.close()
    try:
        subscriber.wait_for("refused-1", 21, timeout=30)
        assert len(set(subscriber.distinct("refused-1"))) == 21
    finally:
        subscriber.close()
