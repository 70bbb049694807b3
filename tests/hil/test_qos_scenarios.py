"""The bench's scenario suite: every QoS promise on every protocol version, over TCP and over the serial link,
through power cuts (at random moments and, on virtual boards, inside flash programs and erases), broker and
bridge restarts, a USB port that vanishes and comes back, a noisy line, and a board and broker restarted
together. The same tests run on virtual boards (`--hil-dut sim`, the default) and on real ones (`--hil-dut PORT
--hil-board NAME`); each prints and saves its table per board (sent, received, lost, duplicated, boots, power cuts).

`make test` runs one cycle of each; `make hil HIL_CYCLES=N` repeats the power-cut scenarios N times and writes
every table to build/hil/results.csv."""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from dboard import console_host
from dboard.console_host import summary as parse_summary
from host_bridge.hil.cycle import CutPlan, run_to_completion
from host_bridge.hil.dut import Dut
from host_bridge.hil.plugin import Bridge
from host_bridge.hil.scenario import app_config, run_board
from host_bridge.hil.subscriber import Subscriber
from host_bridge.hil.verdict import BoardRun, Verdict
from host_bridge.hil.virtual_dut import VirtualDut
from host_bridge.vboard.events import EventSpec
from host_bridge.vboard.serial_line import LineFaults

VERSIONS = ["3.1", "3.1.1", "5"]
TRANSPORTS = ["tcp", "serial"]
Judge = Callable[[list[BoardRun]], Verdict]


def device_id(request: pytest.FixtureRequest, *parts: object) -> str:
    """A client id unique to this test run (a persistent session of an earlier run must not be resumed)."""
    return "-".join(["hil", *map(str, parts), f"{time.monotonic_ns() % 10**8}"])


def prepare(dut: Dut, hil_bridge: Bridge, transport: str) -> None:
    if transport == "serial":
        hil_bridge.start([dut])


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_qos_flow(
    request: pytest.FixtureRequest,
    hil_dut: Dut,
    hil_broker: Any,
    hil_bridge: Bridge,
    hil_subscriber: Subscriber,
    hil_verdict: Judge,
    qos: int,
    version: str,
    transport: str,
) -> None:
    """A clean run: every message accepted arrives once, in order, on its topic, at the QoS it was published
    with, neither DUP nor retained, padded to its size (nothing disturbs QoS 0 here either)."""
    prepare(hil_dut, hil_bridge, transport)
    dev = device_id(request, "flow", transport, version.replace(".", ""), qos)
    config = app_config(hil_dut, dev, hil_broker.address, qos, 20, version, transport, publish={"payload_bytes": 200})
    run = run_board(hil_dut, config, CutPlan.none(), seed=qos)
    result = hil_verdict([run])
    result.assert_kept()
    assert (run.sent, result.tallies[0].received, result.tallies[0].duplicated) == (20, 20, 0)
    summary = parse_summary(hil_dut.console.text())
    assert summary is not None and (summary["dev"], summary["sent"], summary["boot"], summary["refused"]) == (
        dev,
        20,
        1,
        0,
    )
    got = [r for r in hil_subscriber.records if r.topic == f"sensors/{dev}/telemetry"]
    bodies = [json.loads(r.payload) for r in got]
    assert [b["seq"] for b in bodies] == list(range(20)) and all(b["boot"] == 1 for b in bodies)
    assert all((r.qos, r.dup, r.retain, len(r.payload)) == (qos, False, False, 200) for r in got)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("qos", [1, 2])
def test_power_cuts_during_flows(
    request: pytest.FixtureRequest,
    hil_dut: Dut,
    hil_broker: Any,
    hil_bridge: Bridge,
    hil_verdict: Judge,
    qos: int,
    transport: str,
    hil_cycle: int,
) -> None:
    """Power cut at random moments and (virtual boards) inside flash programs and erases, while QoS 1/2 flows are
    in flight; the board boots again on the same flash until its run completes. QoS 1 loses nothing, QoS 2
    delivers everything exactly once."""
    prepare(hil_dut, hil_bridge, transport)
    version = VERSIONS[(hil_cycle + qos) % 3]
    dev = device_id(request, "cuts", transport, qos, hil_cycle)
    # Half the cuts land inside a flash operation (the journal's writes from the 5th operation of a boot on, one
    # to two per message), half right after the board accepted its 5th to 40th message of the boot; published
    # back to back, so that flows are in flight at every cut. Five cuts of at most 60 messages cannot outrun 400
    # on a virtual board, which cuts its own power at the line. A real board's bench reads the console and cuts
    # late on a loaded host (after the 40th message came the 65th): it gets 800.
    plan = CutPlan(cuts=5, inside_flash=0.5, flash_ops=(5, 60), accepted=(5, 40))
    count = 400 if hil_dut.event_cuts else 800
    config = app_config(hil_dut, dev, hil_broker.address, qos, count, version, transport, publish={"interval_ms": 0})
    run = run_board(hil_dut, config, plan, seed=hil_cycle * 97 + qos)
    result = hil_verdict([run])
    result.assert_kept()
    assert run.power_cuts == 5, f"the dose was not given: {run.power_cuts} cuts"
    # The board's own boot counter (in flash) saw every cut: no cut lands before it is written (op 5 on).
    assert run.counted_boots == run.power_cuts + 1, f"the board counted {run.counted_boots} boots: {run.cut_kinds}"
    assert run.resumed_in_flight >= run.power_cuts // 2, (
        f"{run.resumed_in_flight} cuts with flows in flight: {run.cut_kinds}"
    )


def run_while(
    dut: Dut, config: dict[str, Any], disturb: Callable[[Callable[[], None]], None], accepted: int
) -> BoardRun:
    """Run the board to completion (no power cuts), and call disturb(begun) once the board has said it accepted
    `accepted` messages: mid-run by what the board did, not by the clock. A virtual board waits at that line
    until the disturbance calls begun() (the broker stopped, the bridge killed), so that a loaded host cannot let
    the run finish first; a real board runs on while the bench reads its console."""
    dut.configure(config)
    ended = threading.Event()
    failed: list[BaseException] = []
    disturbed = threading.Event()
    hold = dut.ap.hold_at(EventSpec("accepted", accepted)) if isinstance(dut, VirtualDut) else None

    def reached() -> bool:
        if hold is not None:
            return hold.reached.wait(0.01)
        return len(console_host.lines(dut.console.text(), "accepted")) >= accepted

    def when_accepted() -> None:
        try:
            while not reached():
                if ended.wait(0.01):
                    return
            disturb(hold.release if hold is not None else lambda: None)
            disturbed.set()
        except BaseException as exc:  # noqa: BLE001 (handed to the test's thread, which raises it)
            failed.append(exc)
        finally:
            if hold is not None:
                hold.release()

    dut.start()
    watcher = threading.Thread(target=when_accepted, daemon=True)
    watcher.start()
    try:
        end = dut.wait_boot(180)
    finally:
        ended.set()
        watcher.join(60)
    if failed:
        raise failed[0]  # the disturbance failed: the test with it
    assert disturbed.is_set(), f"the run ended before its {accepted}th accepted message: nothing was disturbed"
    assert end.kind == "done" and end.summary is not None, end.console[-2000:]
    assert (end.summary["total"], end.summary["refused"]) == (config["publish"]["count"], 0), end.summary
    return BoardRun.witnessed(dut, end.summary, config["publish"]["qos"], dut.boots, dut.cuts)


def reconnected(dut: Dut, before: int, timeout: float = 30) -> None:
    """Until the board's console shows more connections than `before`."""
    deadline = time.monotonic() + timeout
    while len(console_host.lines(dut.console.text(), "connected")) <= before:
        assert time.monotonic() < deadline, f"the board did not reconnect; console log {dut.console.path}"
        time.sleep(0.02)


@pytest.mark.parametrize(("qos", "transport"), [(1, "tcp"), (2, "tcp"), (1, "serial")])
def test_broker_restarted_with_persistence(
    request: pytest.FixtureRequest,
    hil_dut: Dut,
    hil_broker: Any,
    hil_bridge: Bridge,
    hil_verdict: Judge,
    qos: int,
    transport: str,
) -> None:
    """The broker (persistence on) restarts twice mid-run; board (straight or through the bridge) and
    subscriber resume their sessions."""
    prepare(hil_dut, hil_bridge, transport)
    dev = device_id(request, "broker", qos, transport)
    config = app_config(hil_dut, dev, hil_broker.address, qos, 150, "3.1.1", transport, publish={"interval_ms": 10})

    def restart_twice(begun: Callable[[], None]) -> None:
        connections = len(console_host.lines(hil_dut.console.text(), "connected"))
        hil_broker.stop()
        begun()
        hil_broker.start()
        reconnected(hil_dut, connections)  # the second restart comes after the board is back, not after a delay
        hil_broker.restart()

    run = run_while(hil_dut, config, restart_twice, accepted=30)
    hil_verdict([run]).assert_kept()
    # It came back to its session (how it noticed the broker going differs: a TCP reset, or the bridge's notice).
    assert hil_dut.console.text().count("connected session_present=1") >= 1, hil_dut.console.text()
    if transport == "serial":
        # The bridge sees the broker go (an end of stream or a reset, as the timing falls) and tells the board.
        gone = ("the broker closed the connection", "broker connection failed")
        assert any(g in hil_bridge.text() for g in gone) and hil_bridge.text().count("event=connected") >= 2


def disturbed_serial_run(
    request: pytest.FixtureRequest,
    dut: Dut,
    hil_broker: Any,
    hil_bridge: Bridge,
    hil_verdict: Judge,
    name: str,
    version: str,
    disturb: Callable[[Callable[[], None]], None],
) -> None:
    """150 QoS 2 messages through the bridge, disturb(begun) after the board accepted 40 (run_while); the promises
    must hold."""
    hil_bridge.start([dut])
    dev = device_id(request, name)
    config = app_config(dut, dev, hil_broker.address, 2, 150, version, "serial", publish={"interval_ms": 5})
    run = run_while(dut, config, disturb, accepted=40)
    hil_verdict([run]).assert_kept()


def test_bridge_killed_and_restarted(
    request: pytest.FixtureRequest, hil_dut: Dut, hil_broker: Any, hil_bridge: Bridge, hil_verdict: Judge
) -> None:
    """The serial bridge is SIGKILLed mid-run and started again: the board resumes its session through it."""

    def kill_and_restart(begun: Callable[[], None]) -> None:
        hil_bridge.kill()
        begun()
        time.sleep(0.5)
        hil_bridge.start()

    disturbed_serial_run(request, hil_dut, hil_broker, hil_bridge, hil_verdict, "bridge", "5", kill_and_restart)
    assert "connected session_present=1" in hil_dut.console.text()
    assert hil_bridge.starts == 2


@pytest.mark.hil_virtual("unplugs the serial adapter from the host")
def test_usb_port_vanishes_and_comes_back(
    request: pytest.FixtureRequest, hil_dut: Dut, hil_broker: Any, hil_bridge: Bridge, hil_verdict: Judge
) -> None:
    """The host end of the board's serial line disappears for 1.5 s (a USB adapter pulled and plugged back in
    under the same /dev/serial/by-id name); the bridge reopens it and nothing is lost."""

    def pull_cable(begun: Callable[[], None]) -> None:
        hil_dut.unplug()
        begun()
        time.sleep(1.5)
        hil_dut.replug()

    disturbed_serial_run(request, hil_dut, hil_broker, hil_bridge, hil_verdict, "usb", "3.1.1", pull_cable)
    log = hil_bridge.text()
    assert "event=port_lost" in log and log.count("event=port_open") >= 2


@pytest.mark.hil_virtual("injects bit errors and dropped bytes on the line")
@pytest.mark.parametrize("qos", [1, 2])
def test_noisy_line(
    request: pytest.FixtureRequest, hil_dut: Dut, hil_broker: Any, hil_bridge: Bridge, hil_verdict: Judge, qos: int
) -> None:
    """600 messages at 115200 baud with bit error rate 1e-4 and dropped bytes: retransmissions, nothing lost,
    QoS 2 not duplicated, and the broker never sees a malformed packet."""
    assert isinstance(hil_dut, VirtualDut)
    hil_dut.set_line(LineFaults(baud=115200, bit_error_rate=1e-4, drop_rate=5e-5, seed=qos))
    hil_bridge.start([hil_dut])
    dev = device_id(request, "noisy", qos)
    run = run_board(
        hil_dut, app_config(hil_dut, dev, hil_broker.address, qos, 600, "3.1.1", "serial"), CutPlan.none(), seed=qos
    )
    hil_verdict([run]).assert_kept()
    hil_bridge.stop()
    counters = [line for line in hil_bridge.text().splitlines() if "event=stopped" in line][-1]  # the last said
    stats = dict(field.split("=", 1) for field in counters.split() if "=" in field)
    assert int(stats["crc_errors"]) > 0 and int(stats["retransmissions"]) > 0, counters  # the noise was real
    if hil_broker.log_path is not None:  # an external broker (--hil-broker) keeps its log elsewhere
        broker_log = hil_broker.log_path.read_text().lower()
        assert "malformed" not in broker_log and "protocol error" not in broker_log


@pytest.mark.parametrize("qos", [1, 2])
def test_board_and_broker_restarted_together(
    request: pytest.FixtureRequest, hil_dut: Dut, hil_broker: Any, hil_verdict: Judge, qos: int
) -> None:
    """The broker goes down; the board keeps accepting messages into its journal (the offline queue) and then
    loses power; both come back, and the queued flows resume from flash alone."""
    dev = device_id(request, "together", qos)
    config = app_config(hil_dut, dev, hil_broker.address, qos, 80, "5", publish={"interval_ms": 10})
    hil_dut.configure(config)
    hil_dut.start()
    hil_dut.expect(r"connected session_present", timeout=30)
    hil_dut.expect(r"^accepted \d+ 9$", timeout=30)  # ten messages on their way
    hil_broker.stop()
    hil_dut.expect(r"connection lost|connect failed", timeout=10)
    away = len(console_host.lines(hil_dut.console.text(), "accepted"))
    deadline = time.monotonic() + 30
    while len(console_host.lines(hil_dut.console.text(), "accepted")) < away + 20:  # journaled while it is away
        assert time.monotonic() < deadline, hil_dut.console.text()[-2000:]
        time.sleep(0.01)
    hil_dut.power_cut()
    assert hil_dut.wait_boot(30).kind == "power-cut"
    hil_broker.start()
    result = run_to_completion(hil_dut, CutPlan.none(), random.Random(qos), timeout=180)
    assert result.summary is not None
    run = BoardRun.witnessed(hil_dut, result.summary, qos, hil_dut.boots, hil_dut.cuts)
    hil_verdict([run]).assert_kept()
    assert run.boots == 2 and run.power_cuts == 1
    assert re.search(r"connected session_present=\d inflight=([1-9]\d*)", hil_dut.console.text()), "nothing was queued"
