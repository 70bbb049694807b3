"""Devices under test: one interface for a virtual board (host_bridge.hil.virtual_dut) and a real board on a
serial port (host_bridge.hil.real_dut).

A DUT is configured (config.json onto the board), started (a boot), watched on its console (`expect`), and ended
by a power cut or by finishing its run (`wait_boot`). Each boot's console goes to one log file per DUT, with a
line `=== boot N ===` before it, so that a failure can name the file and the boot.

The virtual board (MicroPython Unix port, emulated flash), power cut by SIGKILL, optionally inside
the Nth flash program or erase; its link UART is a pty with a fixed path that can be unplugged and replugged.
A real ESP32 on a serial port (its console), power cut by a PowerSwitch, firmware and config copied
with mpremote; the board's link UART reaches the host through a second adapter (`link_port`).
"""

from __future__ import annotations

import json
import re
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dboard import console, console_host
from host_bridge.boards.board_config import check_value
from host_bridge.boards.definition import BoardDefinition
from host_bridge.errors import HostBridgeError
from host_bridge.vboard.events import EventSpec


class DutError(HostBridgeError):
    """A device under test did not do what the bench expected; the message names its console log."""


@dataclass
class BootEnd:
    """How one boot ended: "done" (the run completed: `summary` is its last line), "power-cut", "asleep" (in a
    deep sleep with no timer to wake it), or "failed". A boot the bench started includes the boots the board made
    by itself after it (resets, wakes from deep sleep): `console` holds them all."""

    kind: str
    status: int | None  # the process's exit status (virtual boards)
    summary: dict[str, Any] | None
    console: str


# The line the bench writes into a board's console log where a power cut ended a boot, so that the console holds
# the board's life in order: its boots, what it said in each, and the cuts between (verdict.resent_without_cut).
POWER_CUT_LINE = "=== power cut ==="


class ConsoleLog:
    """One DUT's console, every boot appended to one file (none: the console goes elsewhere, unread)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        self.boot_offset = 0
        self.start_offset = 0  # where the bench's last start() began: its boots since (resets, wakes) follow

    def new_boot(self, boot: int, started: bool = True) -> None:
        """A boot's header; `started`: the bench started this boot (not a reset or a wake of the board's own)."""
        if self.path is not None:
            with open(self.path, "ab") as f:
                if started:
                    self.start_offset = f.tell()
                f.write(f"=== boot {boot} ===\n".encode())
                self.boot_offset = f.tell()

    def power_cut(self) -> None:
        """The boot's end by a power cut, in the console's order (POWER_CUT_LINE): after everything the board
        printed before it (a virtual board's: written once its process is gone; a real one's: when the switch
        cut, so that bytes still in the serial adapter may follow it). On a line of its own: a cut can fall between
        a line the board printed and its newline (MicroPython's print() writes them apart)."""
        if self.path is not None:
            with open(self.path, "ab+") as f:
                ended = f.seek(0, 2) == 0 or (f.seek(-1, 2) >= 0 and f.read(1) == b"\n")
                f.write((b"" if ended else b"\n") + POWER_CUT_LINE.encode() + b"\n")

    def text(self) -> str:
        """This boot's console so far."""
        return self._read(self.boot_offset)

    def since_start(self) -> str:
        """The console since the bench last started the board: every boot the board made since by itself (a
        reset, a wake from deep sleep), each after its `=== boot N ===` line."""
        return self._read(self.start_offset)

    def all(self) -> str:
        """Every boot's console, each after its `=== boot N ===` line: what the board printed before each cut
        included (the bench's witness of what it accepted)."""
        return self._read(0)

    def acceptances(self) -> dict[int, list[int]]:
        """The witness over every boot: per boot (as the board numbers them), the seq of each `accepted` line."""
        return console_host.acceptances(self.all())

    def _read(self, offset: int) -> str:
        if self.path is None:
            return ""
        with open(self.path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")


class Dut(ABC):
    """What every device under test offers a scenario. Subclasses fill in the hardware."""

    flash_cuts = False  # can a power cut land inside a chosen flash operation?
    event_cuts = False  # can the board cut its own power at its own event (host_bridge/vboard/events.py)?
    sleep_cuts = False  # can a power cut land inside a chosen deep sleep? (a board that sleeps in no host time)
    counts_own_boots = False  # does `boots` count the boots the board makes by itself (wakes, resets) as well?
    can_unplug = False
    link_port: str | None = None  # host end of the board's link UART, for the bridge
    # The network this board joins on TCP, as config.json's "wifi" (None: no WiFi of the bench's to give it).
    wifi: dict[str, str] | None = None
    # What a completed run's summary line must hold (dboard/console.py): the board application's keys, unless
    # the DUT runs another application (the benchmarks' own).
    summary_keys: tuple[str, ...] = console.SUMMARY_KEYS

    def __init__(self, name: str, board: BoardDefinition, console_log: Path | None) -> None:
        self.name = name
        self.board = board
        self.console = ConsoleLog(console_log)
        self.boots = 0
        self.cuts = 0
        self.cut_times: list[float] = []  # time.time() of every power cut (the bench's, and inside flash operations)
        self.config: dict[str, Any] = {}

    # -- to be provided --------------------------------------------------------------------------------------

    def configure(self, config: dict[str, Any], *, check: bool = True) -> None:
        """config.json for the boots to come, checked first by the board's own rules (BoardConfigError names the
        key and what is expected); check=False hands the board a bad one on purpose, to see what it says."""
        if check and self.runs_firmware:
            check_value(json.loads(json.dumps(config)), f"{self.name}'s config", self.secrets)
        self.config = config
        self._install_config(config)

    @abstractmethod
    def _install_config(self, config: dict[str, Any]) -> None: ...

    @property
    def secrets(self) -> Path | None:
        """The secrets.json this board gets beside its config (merged by the board), if any."""
        return None

    @property
    def runs_firmware(self) -> bool:
        """The board runs the project's application (whose config.json rules configure() checks), not one of
        the user's own."""
        return True

    @abstractmethod
    def start(self, cut_at_op: int = 0, cut_in_sleep: int = 0, cut_on: EventSpec | None = None) -> None:
        """A boot. `cut_at_op`: a power cut during this boot's Nth flash program or erase, or with -N its Nth
        erase (flash_cuts);
        `cut_in_sleep`: a power cut during the Nth deep sleep the board goes into from here (sleep_cuts);
        `cut_on`: a power cut the board makes at its Nth such event from here (event_cuts)."""

    @abstractmethod
    def power_cut(self) -> None: ...

    @abstractmethod
    def wait_boot(self, timeout: float) -> BootEnd: ...

    @abstractmethod
    def close(self) -> None: ...

    # -- common ----------------------------------------------------------------------------------------------

    def reset(self) -> None:
        """A hard reset: power cut, then boot again."""
        self.power_cut()
        self.start()

    def unplug(self) -> None:
        raise DutError(f"{self.name}: this board's port cannot be unplugged by the bench")

    def replug(self) -> None:
        raise DutError(f"{self.name}: this board's port cannot be replugged by the bench")

    def stats(self) -> dict[str, dict[str, int]] | None:
        """Flash counters per partition where the board has them (the virtual board), else None."""
        return None

    def drive(self, **inputs: Any) -> None:
        """Drive the board's inputs as VirtualBoard.drive takes them (pins=, adc=, temperature_c=, i2c=). A real board's
        inputs are wired: the bench cannot drive them."""
        raise DutError(
            f"{self.name}: a real board's pins and sensors are wired, not driven by the bench: give the test a "
            "fixture of its own that drives them (a relay board, a DAC), or run it on a virtual board"
        )

    def expect(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        """Wait until this boot's console matches `pattern` (a regular expression); DutError naming the log
        otherwise, with the console's last lines."""
        regex = re.compile(pattern, re.MULTILINE)
        deadline = time.monotonic() + timeout
        while True:
            text = self.console.text()
            found = regex.search(text)
            if found:
                return found
            if time.monotonic() > deadline or not self.alive():
                tail = "\n".join(text.splitlines()[-8:])
                why = "in time" if self.alive() else "before the boot ended"
                raise DutError(
                    f"{self.name}: no console line matching {pattern!r} {why} ({timeout:.0f} s); "
                    f"console log {self.console.path} (boot {self.boots}), last lines:\n{tail}"
                )
            time.sleep(0.05)

    def alive(self) -> bool:
        return True

    def _begin_boot(self, started: bool = True) -> None:
        self.boots += 1
        self.console.new_boot(self.boots, started)
