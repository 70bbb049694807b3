"""A cut at every flash operation of a sampling wake, on the virtual board, then the board's life run to its end:
every reading the board said it accepted reaches the broker, and at QoS 2 once. Two applications of the cheap wake
(dmqtt.wake) are swept: the board application, and examples/battery_sensor, an application of its own on the
library that reads an AHT20. For the board application two sampling wakes: one that appends at the head the
library's hint names, and one whose record does not fit the head, which opens the whole journal and starts the
next sector (dmqtt.wake.journal). For the example, the wake that appends at the hint (its readings are small: the
head fills after some sixty, a life `make soak` sweeps with SWEEP_EVERY_WAKE=1; the whole open is the same call).
Each operation is cut two ways:

- a power cut: RTC memory is lost with the hint, so the next boot is a power-on that opens the whole journal;
- a reset that keeps RTC memory (a watchdog, a panic, a brown-out of the CPU alone) taken for a wake from deep
  sleep: the next boot is a sampling wake whose hint names the head as it was before the torn program. A chip
  boots the application after such a reset (its reset cause is not a deep sleep's), so this is the harder case:
  the check against the flash must find the torn record and open the whole journal.

A clean life is run first and the board's state (its flash, its RTC clock and slow memory) kept before each boot;
each cut starts from the kept state of its wake. SWEEP_EVERY_WAKE=1 (`make soak`) sweeps every sampling wake of
the life; `make soak` also cuts at random through thousands of wakes (tests/hil/test_board_life.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.subscriber import Subscriber
from host_bridge.vboard.runner import (
    DEEPSLEEP_EXIT_STATUS,
    DEEPSLEEP_RESET,
    POWER_CUT_EXIT_STATUS,
    TIMER_WAKE,
    VirtualBoard,
)
from host_bridge.vboard.wifi import AccessPoint, JoinModel
from tests.conftest import REPO
from tests.integration.boards import NOT_WHERE_LEFT

ACCEPTED = re.compile(r"^accepted (\d+) (\d+)$", re.M)
ON_FLASH = re.compile(r"^reading (\d+) on flash$", re.M)  # the battery example's own witness
STATE = ("", ".rtc", ".rtc.mem")  # the flash, the RTC's clock and sleep counters, its slow memory (the plan)
WHOLE_OPEN = "dmqtt.journal_ring"  # a sampling wake that loaded it opened the whole journal
READINGS = 10  # 400-byte payloads: the head's sector fills after about 8 readings


def config(dev: str, address: str, qos: int) -> dict[str, object]:
    return {
        "client_id": dev,
        "broker": address,
        "mqtt_version": "5",
        "wifi": {"ssid": "lab"},
        "publish": {"qos": qos, "count": READINGS, "payload_bytes": 400},
        "sleep": {"every_s": 60, "awake_s": 10, "readings_per_send": READINGS, "queue_limit": READINGS + 1},
    }


@dataclass(frozen=True)
class App:
    """An application of the cheap wake: how its board is made, and how its witness and its arrivals read."""

    example: bool  # examples/battery_sensor, else the board application
    dev: str
    settings: Path  # config.json, or the example's example.json

    def board(self, flash: Path, ap: AccessPoint) -> VirtualBoard:
        common: dict[str, Any] = {"ap": ap, "stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "seed": 7}
        if not self.example:
            return VirtualBoard(flash, config=self.settings, **common)
        board = VirtualBoard(flash, app=EXAMPLE, library=True, put=((self.settings, "example.json"),), **common)
        board.drive(i2c={0x38: {"model": "aht20", "temperature_c": 21.5, "humidity": 40}})
        return board

    def accepted(self, out: str) -> list[tuple[str, str]]:
        """What a boot's console says the board accepted, as (boot, seq); the example numbers its readings alone."""
        return [("", seq) for seq in ON_FLASH.findall(out)] if self.example else ACCEPTED.findall(out)

    def arrived(
        self, observer: Subscriber, expected: set[tuple[str, str]], timeout: float = 30
    ) -> Counter[tuple[str, str]]:
        """Every delivery's (boot, seq), once `expected` have all arrived or at `timeout` (woken by each)."""
        deadline = time.monotonic() + timeout
        with observer.arrived:  # (its lock: the records read under it)
            while True:
                if self.example:
                    found = Counter(("", str(json.loads(r.payload)["seq"])) for r in observer.records)
                else:
                    found = Counter(
                        (str(r.telemetry.boot), str(r.telemetry.seq))
                        for r in observer.records
                        if r.telemetry is not None and r.telemetry.dev == self.dev
                    )
                left = deadline - time.monotonic()
                if expected <= set(found) or left <= 0:
                    return found
                observer.arrived.wait(left)

    def sampling(self, wake: dict[str, object]) -> bool:
        """A wake that journaled without sending: the board application's are boot.py's; the example's load no
        client."""
        if not self.example:
            return wake.get("script") == "boot.py"
        return bool(wake) and "dmqtt.client" not in wake_modules(wake)


EXAMPLE = REPO / "examples" / "battery_sensor"


def keep(flash: Path, into: Path) -> None:
    into.mkdir()
    for suffix in STATE:
        source = flash.with_name(flash.name + suffix)
        if source.exists():
            shutil.copy(source, into / ("b.flash" + suffix))


def restore(kept: Path, flash: Path) -> None:
    for suffix in STATE:
        target = flash.with_name(flash.name + suffix)
        source = kept / ("b.flash" + suffix)
        if source.exists():
            shutil.copy(source, target)
        else:
            target.unlink(missing_ok=True)


class Life:
    """One board's boots until its run completes, what each printed, and the state kept before each."""

    def __init__(self, folder: Path, app: App, ap: AccessPoint) -> None:
        folder.mkdir()
        self.folder = folder
        self.flash = folder / "b.flash"
        self.app = app
        self.board = app.board(self.flash, ap)
        self.out: list[str] = []
        self.wakes: list[dict[str, object]] = []

    def boot(self, keep_state: bool = False) -> int:
        if keep_state:
            keep(self.flash, self.folder / f"state-{len(self.out)}")
        self.board.start()
        self.out.append(self.board.output(60))
        status = self.board.wait()
        self.wakes.append(self.board.last_wake() if status == DEEPSLEEP_EXIT_STATUS else {})
        return status

    def to_the_end(self, status: int, keep_state: bool = False) -> None:
        """Boot on (a power-on after a cut, as the bench makes one) until the run completes."""
        while status != 0:
            assert status in (DEEPSLEEP_EXIT_STATUS, POWER_CUT_EXIT_STATUS), self.out[-1][-3000:]
            assert len(self.out) < 3 * READINGS, "the run never completed:\n" + self.out[-1][-3000:]
            self.board.next_boot(status)
            status = self.boot(keep_state)

    def as_woken(self) -> None:
        """The next boot is a wake from deep sleep by the timer, whatever ended the last."""
        self.board.reset_cause, self.board.wake_reason = DEEPSLEEP_RESET, TIMER_WAKE

    def accepted(self, boots: slice = slice(None)) -> list[tuple[str, str]]:
        return [key for out in self.out[boots] for key in self.app.accepted(out)]


def swept(app: App, wakes: list[dict[str, object]]) -> list[int]:
    """The sampling wakes to sweep (boot numbers from 0): the first that appended at the hint's head and, for the
    board application, the first that opened the whole journal; every one with SWEEP_EVERY_WAKE."""
    sampling = [i for i, wake in enumerate(wakes) if app.sampling(wake)]
    whole = [i for i in sampling if WHOLE_OPEN in wake_modules(wakes[i])]
    hinted = [i for i in sampling if i not in whole]
    assert hinted and (whole or app.example), f"the life had no hinted or no whole-journal sampling wake: {wakes}"
    return sampling if os.environ.get("SWEEP_EVERY_WAKE") else hinted[:1] + whole[:1]


def wake_modules(wake: dict[str, object]) -> list[str]:
    loaded = wake.get("loaded", [])
    assert isinstance(loaded, list)
    return [str(name) for name in loaded]


@pytest.mark.parametrize(("example", "qos"), [(False, 1), (False, 2), (True, 1)], ids=["board-1", "board-2", "example"])
def test_a_cut_at_every_operation_of_a_sampling_wake_loses_nothing_and_doubles_nothing(
    tmp_path: Path, mosquitto: Mosquitto, example: bool, qos: int
) -> None:
    dev = f"sweep-{'example' if example else qos}"
    settings = tmp_path / ("example.json" if example else "config.json")
    if example:
        # Readings journaled at sampling wakes between sending wakes READINGS apart, as the board application's.
        ex = {"client_id": dev, "broker": mosquitto.address, "count": READINGS, "every_s": 60, "awake_s": 10,
              "readings_per_send": READINGS, "wifi": {"ssid": "lab"}}  # fmt: skip
        settings.write_text(json.dumps(ex))
    else:
        settings.write_text(json.dumps(config(dev, mosquitto.address, qos)))
    app = App(example, dev, settings)
    cases: list[str] = []
    caught: list[bool] = []  # at the hinted wake, after each reset: whether the check found the torn record
    with AccessPoint(tmp_path / "ap", model=JoinModel(scale=0.02)) as ap:
        clean = Life(tmp_path / "clean", app, ap)
        try:
            clean.to_the_end(clean.boot(keep_state=True), keep_state=True)
        finally:
            clean.board.close()
        swept_wakes = swept(app, clean.wakes)
        for wake in swept_wakes:
            # Readings journaled before this wake and not yet sent: the life after the cut sends them (the first
            # boot, a power-on, sent its own).
            waiting = clean.accepted(slice(1, wake))
            for keeps_rtc in (False, True):
                op = 0
                while True:
                    op += 1
                    name = f"{'reset' if keeps_rtc else 'power-cut'} at operation {op} of boot {wake}"
                    life = Life(tmp_path / name.replace(" ", "-"), app, ap)
                    observer = Subscriber(mosquitto.address, f"{dev}-w{len(cases)}", f"sensors/{dev}/#")
                    try:
                        restore(clean.folder / f"state-{wake}", life.flash)
                        life.as_woken()
                        life.board.cut_at_op = op
                        status = life.boot()
                        life.board.cut_at_op = 0
                        if status == DEEPSLEEP_EXIT_STATUS:
                            break  # fewer operations than `op`: each one of this wake has been cut
                        assert status == POWER_CUT_EXIT_STATUS, life.out[-1][-3000:]
                        if keeps_rtc:
                            # The flash as the cut left it, RTC memory as it was (the plan the wake began with).
                            shutil.copy(clean.folder / f"state-{wake}" / "b.flash.rtc.mem", f"{life.flash}.rtc.mem")
                            life.as_woken()
                            status = life.boot()
                        life.to_the_end(status)
                        expected = set(waiting) | set(life.accepted())
                        arrived = app.arrived(observer, expected)
                    finally:
                        life.board.close()
                        observer.close()
                    missing = expected - set(arrived)
                    assert not missing, f"{name}: accepted and never arrived: {sorted(missing)}\n" + "".join(life.out)
                    if qos == 2:
                        twice = {key: n for key, n in arrived.items() if n > 1}
                        assert not twice, f"{name}: delivered more than once: {twice}\n" + "".join(life.out)
                    cases.append(name)
                    if keeps_rtc and wake == swept_wakes[0]:
                        caught.append(NOT_WHERE_LEFT in life.out[1])
    # Each swept wake made at least one operation, each cut both ways; the hint's check found a torn record.
    assert len(cases) >= 2 * len(swept_wakes), cases
    assert any(caught), "no reset left a torn record that the next sampling wake's check found"
