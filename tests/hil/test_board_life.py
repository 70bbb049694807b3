"""A board's life: WiFi that goes away in the middle of a run, and deep sleep between readings, with power cuts
anywhere, judged by the witness (what each board said it accepted the moment publish() returned) as every other
scenario is. On virtual boards the access point is the bench's (host_bridge.vboard.wifi), its joins scaled by
--hil-join-scale; on real boards it is --hil-ap-cmd's, their network --hil-wifi's.

`make test` gives one dose of each; `make soak` the long ones: HIL_OUTAGE_MINUTES of random outages and cuts,
HIL_WAKES wakes."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dboard import console_host
from host_bridge.hil.access_point import AccessPointSwitch
from host_bridge.hil.cycle import CutPlan
from host_bridge.hil.dut import Dut
from host_bridge.hil.heap import heap_goal
from host_bridge.hil.plugin import HilConfig
from host_bridge.hil.scenario import Fleet, app_config
from host_bridge.hil.subscriber import Subscriber
from host_bridge.hil.verdict import BoardRun, Verdict, resent_without_cut
from host_bridge.hil.virtual_dut import VirtualDut
from host_bridge.vboard.events import EventSpec
from host_bridge.vboard.wifi import AccessPoint

Judge = Callable[[list[BoardRun]], Verdict]
# (QoS, TLS) of the outage scenario's boards.
OUTAGE_BOARDS = [(1, False), (2, False), (1, True), (2, True)]
BEACON_S = 6  # ESP-IDF's beacon timeout: an outage shorter than this is only a stall to a station


def device_id(*parts: object) -> str:
    return "-".join(["life", *map(str, parts), f"{time.monotonic_ns() % 10**8}"])


def lines(dut: Dut, kind: str) -> list[console_host.Line]:
    return console_host.lines(dut.console.all(), kind)


def tls_ready(dut: Dut, hil_log: Path, hil_broker: Any) -> dict[str, Any]:
    """The board's TLS settings for the broker's second listener, the test's CA put on its filesystem."""
    if not isinstance(dut, VirtualDut):
        pytest.skip("TLS outages: the CA would have to be deployed to the real board; run the plain ones")
    dut.vboard.put = ((hil_log / "pki" / "ca" / "ca.pem", "ca.pem"),)
    return {"ca": "ca.pem", "server_hostname": "localhost"}


@pytest.mark.hil_broker(tls=True)
def test_wifi_outages_in_the_middle_of_qos_runs(
    hil_fleet: Callable[[int], list[Dut]],
    hil_ap: AccessPointSwitch,
    hil_broker: Any,
    hil_verdict: Judge,
    hil_log: Path,
    hil_config: HilConfig,
) -> None:
    """QoS 1 and QoS 2 boards over TCP, with and without TLS, all on one access point: a 1 s outage (shorter
    than the beacon timeout: the stations notice nothing, their links stall and go on), then a 30 s one. Two
    boards lose their power during it, two during the rejoin once it is back. Each board says the outage on its
    console, keeps accepting QoS 1/2 readings into its journal meanwhile, and completes its run on its own once
    the access point is back: no QoS 1 message lost, every QoS 2 message stored exactly once."""
    duts = hil_fleet(len(OUTAGE_BOARDS))
    configs = []
    for i, (qos, tls) in enumerate(OUTAGE_BOARDS[: len(duts)]):
        dut = duts[i]
        extra: dict[str, Any] = {"tls": tls_ready(dut, hil_log, hil_broker)} if tls else {}
        address = hil_broker.tls_address if tls else hil_broker.address
        config = app_config(
            dut, device_id("out", qos, "tls" if tls else "tcp"), address, qos, 200, "5", wifi=True, **extra
        )
        config["publish"].update({"interval_ms": 50})
        configs.append(config)
    # The last two boards lose their power as they rejoin after the 30 s outage: a virtual board cuts its own at
    # its second join's association (its first rejoin: the 1 s outage is only a stall), before it can say it is
    # back; real boards get the bench's cut a moment after the access point returns.
    virtual = all(dut.event_cuts for dut in duts)
    rejoin_cut = CutPlan(cuts=1, inside_flash=0.0, on_event=("joined", (2, 3)))
    plans = [rejoin_cut if virtual and i >= 2 else CutPlan.none() for i in range(len(duts))]
    fleet = Fleet(duts, configs, plans)
    fleet.wait_accepted(30)
    hil_ap.outage(1.0)
    fleet.wait_accepted(60)
    downs = [len(lines(d, "wifi_down")) for d in duts]
    hil_ap.down()
    down_at = time.monotonic()
    fleet.wait(
        "every board saying the outage",
        lambda: all(len(lines(d, "wifi_down")) > n for d, n in zip(duts, downs, strict=True)),
        30,
    )
    during = duts[:2]
    for dut in during:
        dut.power_cut()  # during the outage: it boots again with no access point to join
    time.sleep(max(0.0, 30 - (time.monotonic() - down_at)))
    ups = [len(lines(d, "wifi_up")) + len(lines(d, "wifi_joined")) for d in duts]
    hil_ap.up()
    rejoining = duts[2:]
    if not virtual:
        time.sleep(0.05)  # inside the rejoin: a DHCP join takes 1.75 s on a chip
        for dut, n in zip(rejoining, ups[2:], strict=True):
            joined = len(lines(dut, "wifi_up")) + len(lines(dut, "wifi_joined"))
            dut.power_cut()
            assert joined == n, f"{dut.name} had rejoined before its cut: the cut did not land in the rejoin"
    runs = fleet.runs()
    if virtual:  # each cut itself at its rejoin's association, before it could say it was back
        for dut, n in zip(rejoining, ups[2:], strict=True):
            text = dut.console.all()
            before = text[: text.index("vboard: power cut during joined event 2")]
            assert len(console_host.lines(before, "wifi_up")) + len(console_host.lines(before, "wifi_joined")) == n
    for run, dut, (_qos, tls) in zip(runs, duts, OUTAGE_BOARDS, strict=False):
        awake_with_wifi(run, dut, hil_config, tls)
    result = hil_verdict(runs)
    result.assert_kept()
    assert all(r.power_cuts == 1 for r in runs), [r.power_cuts for r in runs]
    for dut in duts:
        backs = [ln.values[0] for ln in lines(dut, "wifi_up")]
        assert lines(dut, "wifi_down") and (backs or dut in rejoining), f"{dut.name}: no outage on its console"
    stats = getattr(hil_ap, "stats", None)
    if stats is not None:  # the virtual access point: only the 30 s outage outlasted the beacon timeout
        assert (stats.outages, stats.stations_lost) == (2, 1), stats


def awake_with_wifi(run: BoardRun, dut: Dut, hil_config: HilConfig, tls: bool = False) -> None:
    """A board that stays awake with its WiFi supervised has its documented floor on the deployed path."""
    run.heap_goal = heap_goal("tls-wifi" if tls else "tcp-wifi", dut.board.name, hil_config.install)


def sleep_config(dut: Dut, qos: int, hil_broker: Any, wakes: int) -> dict[str, Any]:
    # A virtual board sleeps in no host time: a minute between readings. A real one sleeps for real.
    every = 60 if isinstance(dut, VirtualDut) else 3
    config = app_config(dut, device_id("sleep", qos), hil_broker.address, qos, wakes, "5", wifi=True)
    config["sleep"] = {"every_s": every, "awake_s": 20}
    return config


def test_deep_sleep_wakes_read_their_acknowledgements_and_never_resend_what_was_acknowledged(
    hil_fleet: Callable[[int], list[Dut]], hil_broker: Any, hil_subscriber: Subscriber, hil_verdict: Judge
) -> None:
    """Boards that deep-sleep between readings, one QoS 1 and one QoS 2: each wake joins WiFi, publishes its
    reading, reads its acknowledgement, and sleeps. Power cuts land anywhere in the cycle: inside a sleep, in a
    flash program of the first wake, at random moments (the wake, the imports, the join, the flow). Nothing is
    lost, QoS 2 arrives exactly once, and no message arrives again at the broker unless a cut came between."""
    wakes = int(os.environ.get("HIL_WAKES", "84"))
    duts = hil_fleet(2)
    plans = [
        CutPlan(cuts=wakes // 12, in_sleep=0.35, sleeps=(1, 30), inside_flash=0.25, flash_ops=(1, 12), window=(0.05, 4))
        for _ in duts
    ]
    configs = [sleep_config(dut, qos, hil_broker, wakes) for dut, qos in zip(duts, (1, 2), strict=False)]
    runs = Fleet(duts, configs, plans, timeout=60 + wakes * 2).runs()
    result = hil_verdict(runs)
    result.assert_kept()
    for dut, run, config in zip(duts, runs, configs, strict=False):
        assert run.power_cuts == wakes // 12, f"{dut.name}: the dose was not given ({run.power_cuts} cuts)"
        if isinstance(dut, VirtualDut):
            assert run.cuts_in_sleep and run.cuts_in_flash, f"{dut.name}: a kind of cut never landed: {run}"
            # Every reading came from a wake but the first boot's and those of the boots after a cut (power-ons).
            assert dut.vboard.wakes >= wakes - 1 - run.power_cuts, (dut.vboard.wakes, wakes)
        resent = resent_without_cut(hil_subscriber.records, config["client_id"], dut.console.all())
        assert not resent, f"{dut.name} sent again what the broker had acknowledged: {resent[:5]}"
        assert len(lines(dut, "sleep")) >= wakes - 1 - run.power_cuts


def batch_config(dut: Dut, qos: int, hil_broker: Any, wakes: int, readings_per_send: int) -> dict[str, Any]:
    config = sleep_config(dut, qos, hil_broker, wakes)
    config["client_id"] = device_id("batch", qos)
    # A wake that cannot reach the broker gives up within awake_s (host time, on a virtual board too).
    config["sleep"].update({"awake_s": 2, "readings_per_send": readings_per_send, "queue_limit": 32})
    return config


def test_store_and_forward_across_deep_sleep_under_cuts_and_outages(
    hil_fleet: Callable[[int], list[Dut]],
    hil_ap: AccessPointSwitch,
    hil_broker: Any,
    hil_subscriber: Subscriber,
    hil_verdict: Judge,
) -> None:
    """Boards that journal a reading at each wake with the radio off and send the batch every 10th wake, one QoS
    1 and one QoS 2 (docs/low-power.md). Power cuts land anywhere in the cycle (inside a sleep, inside a flash
    program, at random moments) and the access point goes away at sending wakes, so that a batch waits for a
    later one. Judged at the broker by the witness: nothing lost, QoS 2 exactly once, and nothing the broker
    acknowledged sent again unless a cut came between. make soak gives HIL_BATCH_WAKES (1,000 and more)."""
    wakes = int(os.environ.get("HIL_BATCH_WAKES", "120"))
    rng = random.Random(38)
    duts = hil_fleet(2)
    plans = [
        CutPlan(cuts=wakes // 15, in_sleep=0.35, sleeps=(1, 40), inside_flash=0.3, flash_ops=(1, 40), window=(0.02, 3))
        for _ in duts
    ]
    configs = [batch_config(dut, qos, hil_broker, wakes, 10) for dut, qos in zip(duts, (1, 2), strict=False)]
    # The access point goes away as a sending wake begins, at about one sending wake in four, for up to longer
    # than the wake stays awake (awake_s): it then gives up. A virtual access point does it at the board's own
    # join (the wake waits until it is down); with a real one the bench watches the consoles for the wake's `boot`
    # line and may come a little late.
    virtual = isinstance(hil_ap, AccessPoint)
    outages = 0
    if virtual:
        # Each board makes at least wakes / 10 sending wakes (one more per cut), each with its join: outages at
        # as many as that of the first such joins, the first board to reach each.
        for join in rng.sample(range(2, wakes // 10 + 1), max(1, wakes // 20)):
            hil_ap.outage_at(EventSpec("join", join), rng.uniform(0.5, 3))
            outages += 1
    fleet = Fleet(duts, configs, plans, timeout=120 + wakes * 2)
    seen = 0
    while not virtual and not fleet.finished():
        boots = sum(len(lines(dut, "boot")) for dut in duts)
        if boots > seen:
            seen = boots
            if rng.random() < 0.25:
                hil_ap.outage(rng.uniform(0.5, 3))
                outages += 1
        time.sleep(0.01)
    runs = fleet.runs()
    result = hil_verdict(runs)
    result.assert_kept()
    assert outages, "no access point outage was given"
    if virtual:
        assert hil_ap.stats.event_outages == outages, (hil_ap.stats, outages)
    for dut, run, config in zip(duts, runs, configs, strict=False):
        assert run.power_cuts == wakes // 15, f"{dut.name}: the dose was not given ({run.power_cuts} cuts)"
        sleeps = lines(dut, "sleep")
        sampled = len(sleeps) - len(lines(dut, "boot"))
        assert sampled >= wakes // 2, f"{dut.name}: only {sampled} of {len(sleeps)} wakes were sampling wakes"
        if isinstance(dut, VirtualDut):
            assert run.cuts_in_sleep and run.cuts_in_flash, f"{dut.name}: a kind of cut never landed: {run}"
        resent = resent_without_cut(hil_subscriber.records, config["client_id"], dut.console.all())
        assert not resent, f"{dut.name} sent again what the broker had acknowledged: {resent[:5]}"


@pytest.mark.skipif(not os.environ.get("HIL_OUTAGE_MINUTES"), reason="make soak: HIL_OUTAGE_MINUTES=N")
def test_random_outages_and_power_cuts_for_minutes(
    hil_fleet: Callable[[int], list[Dut]],
    hil_ap: AccessPointSwitch,
    hil_broker: Any,
    hil_verdict: Judge,
    hil_config: HilConfig,
) -> None:
    """`make soak`: for HIL_OUTAGE_MINUTES minutes, outages of 1 to 30 s at random and power cuts at random,
    under a QoS 1 and a QoS 2 board that publish all along; then every promise judged."""
    minutes = float(os.environ["HIL_OUTAGE_MINUTES"])
    rng = random.Random(7)
    duts = hil_fleet(2)
    count = int(minutes * 60 * 8)  # about eight readings a second, for the whole dose
    configs = []
    for dut, qos in zip(duts, (1, 2), strict=False):
        config = app_config(dut, device_id("soak", qos), hil_broker.address, qos, count, "5", wifi=True)
        config["publish"].update({"interval_ms": 100})
        configs.append(config)
    fleet = Fleet(duts, configs, timeout=minutes * 60 + 600)
    until = time.monotonic() + minutes * 60
    while time.monotonic() < until:
        time.sleep(rng.uniform(5, 40))
        length = rng.uniform(1, 30)
        hil_ap.down()
        time.sleep(rng.uniform(0, length))
        rng.choice(duts).power_cut()
        time.sleep(rng.uniform(0, length / 2))
        hil_ap.up()
        time.sleep(rng.uniform(0, 0.3))
        rng.choice(duts).power_cut()
    runs = fleet.runs(timeout=minutes * 60 + 600)
    for run, dut in zip(runs, duts, strict=True):
        awake_with_wifi(run, dut, hil_config)
    hil_verdict(runs).assert_kept()
