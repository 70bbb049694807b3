"""A long run on the deployed install path, the heap watched all along: QoS 1 messages through a proxy that drops
the board's connection again and again (it reconnects), with power cuts between, the board logging its free heap
and largest free block every few dozen messages. The free heap may not trend down (no leak), and the largest free
block may not fall below what the client allocates after boot (no fragmentation that starves it).

`make test` runs a dose (3,000 messages, 12 reconnects, 3 power cuts); `make soak` the full run (LONG_RUN_MESSAGES
=100000, LONG_RUN_RECONNECTS=200, LONG_RUN_CUTS=50)."""

from __future__ import annotations

import os
import random
import threading
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

from dboard import console_host
from host_bridge.boards.definition import BoardDefinition
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.cycle import CutPlan, run_to_completion
from host_bridge.hil.scenario import app_config
from host_bridge.hil.subscriber import Subscriber
from host_bridge.hil.verdict import HEAP_GOAL, BoardRun, judge_runs
from host_bridge.hil.virtual_dut import VirtualDut
from tests.integration.cutter import Cutter

MESSAGES = int(os.environ.get("LONG_RUN_MESSAGES", "3000"))
RECONNECTS = int(os.environ.get("LONG_RUN_RECONNECTS", "12"))
CUTS = int(os.environ.get("LONG_RUN_CUTS", "3"))
SAMPLES = 60  # heap lines over the run
# The largest allocation the client makes after boot is about 1 KB (its receive buffer growing to max_packet
# for a large incoming PUBLISH; group commit's staging buffer): that, and some, must always be free in one piece.
BLOCK_FLOOR = 1280


def heap_samples(console: str) -> list[list[dict[str, int]]]:
    """The heap lines of each boot, in order (the DUT's log marks each boot with a line `=== boot N ===`)."""
    return [console_host.heap_samples(boot) for boot in console.split("=== boot ")[1:]]


def felt_drops(console: Path) -> int:
    """Drops the board noticed: one lands on an open connection ("connection lost") or on one still connecting
    ("connect failed")."""
    text = console.read_text(errors="replace") if console.exists() else ""
    return text.count("connection lost") + text.count("connect failed")


def disturb(progress: Any, dut: VirtualDut, cutter: Cutter, stop: threading.Event, console: Path) -> dict[str, int]:
    """Drops the connection RECONNECTS times and cuts the power CUTS times, spread over the run by its progress
    (messages delivered): the schedule holds on a fast machine and a slow one alike. A power cut waits until the
    board has noticed the drops before it (up to 10 s): on a loaded machine both can fall due in one round, and
    a board cut off just after a drop would never see it."""
    done = {"reconnects": 0, "cuts": 0}
    rng = random.Random(1)
    drops = sorted(rng.uniform(0.02, 0.95) * MESSAGES for _ in range(RECONNECTS))
    cuts = sorted(rng.uniform(0.05, 0.9) * MESSAGES for _ in range(CUTS))

    def run() -> None:
        while not stop.is_set() and (drops or cuts):
            delivered = progress()
            if drops and delivered >= drops[0]:
                if cutter.cut():  # counted only when a connection was there to drop
                    drops.pop(0)
                    done["reconnects"] += 1
            if cuts and delivered >= cuts[0]:
                deadline = time.monotonic() + 10
                while felt_drops(console) < done["reconnects"] and time.monotonic() < deadline and not stop.is_set():
                    stop.wait(0.02)
                cuts.pop(0)
                dut.power_cut()
                done["cuts"] += 1
            stop.wait(0.01)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    done["thread"] = thread  # type: ignore[assignment]
    return done


def test_a_long_run_keeps_the_heap_flat(tmp_path: Path, broker: Mosquitto) -> None:
    dev = f"long-{time.monotonic_ns() % 10**8}"
    subscriber = Subscriber(broker.address, f"sub-{dev}")
    cutter = Cutter(broker.address)
    dut = VirtualDut(dev, BoardDefinition.load("sim"), flash=tmp_path / "b.flash", console_log=tmp_path / "console.log")
    stop = threading.Event()
    try:
        every = max(16, MESSAGES // SAMPLES)
        config = app_config(dut, dev, cutter.address, 1, MESSAGES, "5", heap_log_every=every)
        dut.configure(config)
        done = disturb(lambda: len(subscriber.distinct(dev)), dut, cutter, stop, tmp_path / "console.log")
        plan = CutPlan(cuts=0, max_boots=CUTS + 5)  # the power cuts come from disturb()
        result = run_to_completion(dut, plan, random.Random(2), timeout=3600)
        stop.set()
        done.pop("thread").join(5)  # type: ignore[attr-defined]
        assert result.summary is not None
        run = BoardRun.from_cycle(dut, result, 1)
        verdict = judge_runs(dev, subscriber, [run])
        verdict.save(tmp_path)
    finally:
        stop.set()
        dut.close()
        cutter.close()
        subscriber.close()
    verdict.assert_kept()  # nothing lost, and the budget held at the lowest point of every boot
    assert (done["reconnects"], done["cuts"], result.cuts) == (RECONNECTS, CUTS, CUTS), done
    console = (tmp_path / "console.log").read_text(errors="replace")
    assert felt_drops(tmp_path / "console.log") >= RECONNECTS, "the board did not feel the drops"

    samples = [s for boot in heap_samples(console) for s in boot]
    assert len(samples) >= SAMPLES // 2, f"{len(samples)} heap lines"
    free = [s["free"] for s in samples]
    block = [s["block"] for s in samples]
    print(f"\nfree heap {min(free)}..{max(free)}, largest block {min(block)}..{max(block)} over {len(samples)} samples")
    # No leak: the free heap stays within a kilobyte in every boot, reconnects included, and over every boot on a
    # used flash. The first boot is left out of the second: it formats the flash and lays the firmware out, and
    # starts the run with several hundred bytes more free than a boot that finds both done.
    boots = [[s["free"] for s in boot] for boot in heap_samples(console)]
    assert all(max(b) - min(b) <= 1024 for b in boots if b), boots
    later = [f for boot in boots[1:] for f in boot]
    assert not later or max(later) - min(later) <= 1024, boots
    assert min(free) >= HEAP_GOAL
    # No fragmentation that starves the client. (Not "the largest block late no smaller than early": which block
    # is largest depends on where the latest connection's objects landed, and moves with every reconnect,
    # measured between 2.6 and 11.5 KB within one run of 3,000 messages.)
    assert min(block) >= BLOCK_FLOOR, block
    for boot in heap_samples(console):
        if len(boot) >= 4:
            # Within one boot too, across its reconnects: what the heap lost over the boot, less its largest
            # single drop, stays within 512 bytes. One step is allowed (the whole run's kilobyte above bounds
            # it): the first use of a rare text interns its words for good, as a boot's first "offline queue
            # full" does (384 bytes, dmqtt/client_text.py); a leak, per message or per reconnect, goes on falling.
            free_in_boot = [s["free"] for s in boot]
            steps = [a - b for a, b in pairwise(free_in_boot)]
            assert free_in_boot[0] - free_in_boot[-1] - max(steps) <= 512, boot
