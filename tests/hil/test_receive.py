"""Exactly once to the application, for what a board receives (docs/client.md, "Receiving"): commands sent to a
board at QoS 2 while its power is cut again and again, some cuts inside its flash operations (the receive
records' among them). Each command reaches the board's handler (its `message` line) exactly once, but in the
one window no journal closes: a cut after the handler returned and before its return was journaled. Then the
command comes again after the reboot, and the first delivery is the last thing that boot printed."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from dboard import console_host
from host_bridge.boards.definition import BoardDefinition
from host_bridge.hil.cycle import CutPlan, run_to_completion
from host_bridge.hil.dut import Dut
from host_bridge.hil.scenario import app_config
from host_bridge.hil.subscriber import Subscriber
from host_bridge.hil.verdict import BoardRun, judge_runs
from host_bridge.hil.virtual_dut import VirtualDut

COMMANDS = 40
PACE = 8  # a command every 8 messages the board accepts: 40 over its first 320 of 500, through its 5 cuts
PLAN = CutPlan(cuts=5, inside_flash=0.6, flash_ops=(5, 150), accepted=(20, 60))


def commander(
    hil_broker: str,
    topic: str,
    ready: threading.Event,
    stop: threading.Event,
    failures: list[BaseException],
    dut: Dut | None = None,
) -> threading.Thread:
    """Publishes COMMANDS commands at QoS 2 to `topic` once the board has subscribed (its session keeps the
    subscription through its reboots, so the broker queues what comes while it is down); given `dut`, one each
    time it has accepted PACE more messages, so that the commands spread over its boots by its own progress, not
    the host's clock. What goes wrong goes into `failures`, for the test to raise."""

    def run() -> None:
        try:
            send()
        except BaseException as e:  # noqa: BLE001 (handed to the test's thread)
            failures.append(e)

    def send() -> None:
        if not ready.wait(60):
            raise TimeoutError("the board never subscribed")
        host, port = hil_broker.rsplit(":", 1)
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"commander-{time.monotonic_ns()}")
        client.connect(host, int(port))
        client.loop_start()
        try:
            for i in range(COMMANDS):
                while dut is not None and accepted(dut) < (i + 1) * PACE:
                    if stop.wait(0.01):
                        return
                if stop.is_set():
                    return
                info = client.publish(topic, b"c-%03d" % i, qos=2)
                info.wait_for_publish(10)
                if not info.is_published():
                    raise TimeoutError(f"command {i} not acknowledged by the broker in 10 s")
                time.sleep(0.03)
        finally:
            client.loop_stop()
            client.disconnect()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def accepted(dut: Dut) -> int:
    return len(console_host.lines(dut.console.all(), "accepted"))


def deliveries_per_boot(console: str, topic: str) -> list[list[tuple[bytes, int]]]:
    """The commands each boot's handler printed, in order, each with its receive number."""
    return [
        [(ln.values[2], ln.values[3]) for ln in console_host.lines(boot, "message") if ln.values[0] == topic]
        for boot in console.split("=== boot ")[1:]
    ]


@pytest.mark.hil_virtual("cuts power inside chosen flash operations")
def test_commands_at_qos2_reach_the_handler_exactly_once_through_power_cuts(
    hil_log: Path, hil_broker: Any, hil_subscriber: Subscriber
) -> None:
    dev = f"rx-{time.monotonic_ns() % 10**8}"
    topic = f"cmd/{dev}"
    dut = VirtualDut(dev, BoardDefinition.load("sim"), flash=hil_log / dev / "b.flash", console_log=hil_log / "c.log")
    ready, stop = threading.Event(), threading.Event()
    failures: list[BaseException] = []
    sender = commander(hil_broker.address, topic, ready, stop, failures, dut)
    watcher = threading.Thread(target=lambda: ready.set() if _subscribed(dut) else None, daemon=True)
    try:
        config = app_config(
            dut,
            dev,
            hil_broker.address,
            1,
            500,
            "5",
            subscribe=[{"topic": topic, "qos": 2}],
            publish={"interval_ms": 8},
        )
        dut.configure(config)
        watcher.start()
        result = run_to_completion(dut, PLAN, random.Random(5), timeout=120)
    finally:
        stop.set()
        sender.join(15)
        dut.close()
    assert not sender.is_alive(), "the commander did not end"
    if failures:
        raise failures[0]
    run = BoardRun.from_cycle(dut, result, 1)
    judge_runs(dev, hil_subscriber, [run]).assert_kept()  # what it published, through the same cuts
    assert run.power_cuts == PLAN.cuts, run

    console = dut.console.all()
    per_boot = deliveries_per_boot(console, topic)
    numbered = [d for boot in per_boot for d in boot]
    got = [c for c, _ in numbered]
    # Each command has one receive number, at every delivery, and later commands larger ones.
    numbers = dict(numbered)
    assert all(numbers[c] == n for c, n in numbered), f"a command's number changed: {numbered}"
    firsts = [numbers[c] for c in dict.fromkeys(got)]
    assert all(n > 0 for n in firsts) and firsts == sorted(set(firsts)), f"numbers not unique and rising: {firsts}"
    # The cuts fell while commands were coming: they reached the handler across several boots.
    assert sum(1 for boot in per_boot if boot) >= 3, f"the commands came within {per_boot}; cuts {run.cut_kinds}"
    expected = [b"c-%03d" % i for i in range(COMMANDS)]
    assert sorted(set(got)) == expected, f"missing {sorted(set(expected) - set(got))}; console {dut.console.path}"
    for command in set(got):
        if got.count(command) == 1:
            continue
        # Twice only through the one window: its first delivery was the last line that boot printed.
        assert got.count(command) == 2, command
        first = next(i for i, boot in enumerate(per_boot) if (command, numbers[command]) in boot)
        segment = console.split("=== boot ")[1:][first]
        last = [ln for ln in console_host.lines(segment) if ln.kind != "summary"][-1]
        assert last.kind == "message" and last.values[2] == command, f"{command!r} delivered twice: {dut.console.path}"


def _subscribed(dut: VirtualDut, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if console_host.lines(dut.console.all(), "connected"):
            time.sleep(0.2)  # its SUBSCRIBE follows the CONNACK at once
            return True
        time.sleep(0.02)
    return False
