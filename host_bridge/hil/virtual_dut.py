"""The virtual board as a device under test: the MicroPython Unix port on emulated flash, power cut by SIGKILL,
optionally inside the Nth flash program or erase; its link UART is a pty with a fixed path that can be unplugged
and replugged."""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

from dboard import console_host
from host_bridge import assets
from host_bridge.boards.definition import BoardDefinition
from host_bridge.boards.firmware_build import secrets_of
from host_bridge.hil.dut import BootEnd, Dut, DutError
from host_bridge.hil.power import PowerSwitch, SigkillSwitch
from host_bridge.vboard.events import EventSpec
from host_bridge.vboard.runner import DEEPSLEEP_EXIT_STATUS, POWER_CUT_EXIT_STATUS, VirtualBoard
from host_bridge.vboard.serial_line import LineFaults
from host_bridge.vboard.wifi import AccessPoint


class VirtualDut(Dut):
    """The virtual board as a device under test."""

    flash_cuts = True
    sleep_cuts = True
    event_cuts = True
    counts_own_boots = True
    can_unplug = True
    wifi = {"ssid": "hil-bench", "password": "hil-bench"}  # its access point takes any network and password

    def __init__(
        self,
        name: str,
        board: BoardDefinition,
        flash: Path,
        console_log: Path | None,
        faults: LineFaults | None = None,
        serial_link: Path | None = None,
        seed: int = 0,
        console: IO[Any] | int | None = None,
        **board_options: Any,
    ) -> None:
        """`faults`: a serial line for the link UART (None: no UART), reachable at `serial_link` (default: beside
        the flash file). `console`: where the board's output goes when not to `console_log` (the vboard command
        passes its own stdout)."""
        super().__init__(name, board, console_log)
        flash.parent.mkdir(parents=True, exist_ok=True)
        self.flash = flash
        if faults is not None and serial_link is None:
            serial_link = flash.with_name(flash.stem + ".tty")
        self.vboard = VirtualBoard(
            flash=flash, board=board, faults=faults, serial_link=serial_link, seed=seed, **board_options
        )
        self.switch: PowerSwitch = SigkillSwitch(self.vboard)
        self.link_port = str(self.vboard.serial_link) if faults is not None else None
        self._console_target = console
        self._cut_requested = False
        self._cut_in_sleep = 0
        self._cut_at_op = self._ops_at_boot = 0
        self._power = threading.Lock()  # a cut from another thread against the next boot of the board's own
        self._seeds = random.Random(seed)
        self.pids: list[int] = []  # every boot's process, so a harness can show they all ended

    @property
    def runs_firmware(self) -> bool:
        return assets.is_firmware_app(self.vboard.app)

    @property
    def secrets(self) -> Path | None:
        return secrets_of(self.vboard.put)

    def _install_config(self, config: dict[str, Any]) -> None:
        path = self.flash.with_name(self.flash.stem + ".config.json")
        path.write_text(json.dumps(config))
        self.vboard.config = path

    def set_line(self, faults: LineFaults) -> None:
        """Change what the serial line does to bytes (noise, drops, pacing), from now on."""
        if self.vboard.line is None:
            raise DutError(f"{self.name} has no serial line")
        self.vboard.line.set_faults(faults)

    @property
    def ap(self) -> AccessPoint:
        """The access point this board's WiFi joins (its own, unless one was given to share)."""
        assert self.vboard.ap is not None, f"{self.name} is closed"
        return self.vboard.ap

    def start(self, cut_at_op: int = 0, cut_in_sleep: int = 0, cut_on: EventSpec | None = None) -> None:
        """A boot; `cut_at_op` counts the flash programs and erases from here (below 0: the erases only), over
        the boots the board makes by itself after this one (a wake from deep sleep may do only a few), and so
        does `cut_on` its events."""
        self._cut_in_sleep = cut_in_sleep
        if cut_on is not None:
            self.vboard.schedule_cut(cut_on.event, cut_on.n)
        else:
            self.vboard.cut_on = None
        with self._power:
            self._cut_requested = False
            self._boot(cut_at_op, started=True)

    def _flash_ops(self, erases_only: bool = False) -> int:
        """Programs and erases (or erases only) the board has made on its flash (its counters survive every
        boot)."""
        stats = self.vboard.stats().values()
        return sum(p["blocks_erased"] + (0 if erases_only else p["program_ops"]) for p in stats)

    def _boot(self, cut_at_op: int, started: bool) -> None:
        self._begin_boot(started)
        self._cut_at_op = cut_at_op
        self._ops_at_boot = self._flash_ops(cut_at_op < 0) if cut_at_op else 0
        board = self.vboard
        board.cut_at_op = cut_at_op
        board.seed = self._seeds.randrange(1 << 30)  # a fresh half-done-operation draw per boot, reproducibly
        if self.console.path is not None:
            with open(self.console.path, "ab") as log:
                board.stdout, board.stderr = log, subprocess.STDOUT
                board.start()
        else:
            board.stdout = board.stderr = self._console_target
            board.start()
        assert board.process is not None
        self.pids.append(board.process.pid)

    def power_cut(self) -> None:
        """The board's power goes: a boot running dies (SIGKILL); between two boots of its own (inside a deep
        sleep, at a reset) the next one becomes a power-on. Safe from any thread: wait_boot() starts a board's
        next boot of its own under the same lock, so that a cut cannot fall between its decision and the boot."""
        with self._power:
            self._cut_requested = True
            self.cut_times.append(time.time())
            self.switch.cut()

    def alive(self) -> bool:
        process = self.vboard.process
        return process is not None and process.poll() is None

    def wait_boot(self, timeout: float) -> BootEnd:
        """Until the board stops booting by itself: machine.reset() or a soft reset at the REPL boots it again
        (reset cause HARD_RESET or SOFT_RESET), and so does the timer of a deep sleep (DEEPSLEEP_RESET, at once:
        sleep takes no host time), and the wait goes on. The boot's console is every boot's since start()."""
        deadline = time.monotonic() + timeout
        sleeps = 0
        while True:
            try:
                status = self.vboard.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.power_cut()
                raise DutError(
                    f"{self.name}: boot {self.boots} did not end within {timeout:.0f} s (cut now); "
                    f"console log {self.console.path}"
                ) from None
            with self._power:
                if self._cut_requested:  # killed now, or cut between two boots (a sleep, a reset)
                    self.vboard.next_boot(POWER_CUT_EXIT_STATUS)  # the next boot is a power-on
                    status = POWER_CUT_EXIT_STATUS
                    break
                rebooting = self.vboard.next_boot(status)
                if status == DEEPSLEEP_EXIT_STATUS:
                    sleeps += 1
                    if sleeps == self._cut_in_sleep:
                        # The board is asleep: it loses its RTC memory, its next boot is a power-on.
                        self._cut_requested = True
                        self.cut_times.append(time.time())
                        self.switch.cut()
                        status = POWER_CUT_EXIT_STATUS
                        break
                on_pins = status == DEEPSLEEP_EXIT_STATUS and self.vboard.sleeps_on_pins()
                if not rebooting and not on_pins:
                    break
                # A cut inside a flash operation that this boot did not reach is for the next one's.
                left = 0
                if self._cut_at_op > 0:
                    left = max(0, self._cut_at_op - (self._flash_ops() - self._ops_at_boot))
                elif self._cut_at_op < 0:
                    left = min(0, self._cut_at_op + (self._flash_ops(True) - self._ops_at_boot))
                if not on_pins:
                    self._boot(left, started=False)
                    continue
            # A deep sleep that a pin can end (esp32.wake_on_ext0/ext1) lasts host time, for the bench to drive the
            # pin: up to its timer (or, with none, the wait's own limit), outside the power lock so that a cut can
            # come meanwhile.
            limit = max(0.0, deadline - time.monotonic())
            if rebooting:
                limit = min(limit, self.vboard.sleep_timer_ms() / 1000)
            woken = self.vboard.wait_for_pins(limit)
            with self._power:
                if self._cut_requested:
                    self.vboard.next_boot(POWER_CUT_EXIT_STATUS)
                    status = POWER_CUT_EXIT_STATUS
                    break
                if not woken and not rebooting:
                    break  # still asleep: nothing woke it within the wait
                self._boot(left, started=False)
        text = self.console.since_start()
        if status == DEEPSLEEP_EXIT_STATUS:
            return BootEnd("asleep", status, None, text)  # a deep sleep without a timer: nothing wakes it
        if status == POWER_CUT_EXIT_STATUS:
            self.cuts += 1
            self.console.power_cut()  # the process is gone: nothing the board said can follow it
            if not self._cut_requested:
                self.cut_times.append(time.time())  # a cut inside a flash operation, made by the board's flash
            return BootEnd("power-cut", status, None, text)
        summary = console_host.summary(text, self.summary_keys)
        kind = "done" if status == 0 and (summary is not None or self.console.path is None) else "failed"
        return BootEnd(kind, status, summary, text)

    def unplug(self) -> None:
        assert self.vboard.line is not None, f"{self.name} has no serial line"
        self.vboard.line.unplug()

    def replug(self) -> None:
        assert self.vboard.line is not None, f"{self.name} has no serial line"
        self.vboard.line.replug()

    def drive(self, **inputs: Any) -> None:
        self.vboard.drive(**inputs)

    def stats(self) -> dict[str, dict[str, int]] | None:
        return self.vboard.stats()

    def close(self) -> None:
        self.vboard.close()
