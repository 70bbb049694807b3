"""Your own firmware on the virtual board, for your own tests (docs/testing-your-firmware.md): an application folder
booted with its wiring file, its console read forward as a serial expect reads it, its parts set and its outputs
read by their names. The HIL plugin's `app_board` fixture makes these and stops them after the test."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

from host_bridge.boards.definition import BoardDefinition
from host_bridge.hil.dut import BootEnd, DutError
from host_bridge.hil.virtual_dut import VirtualDut
from host_bridge.vboard.wiring import Wiring, WiringError


class AppBoardError(DutError):
    """What the application did not do: a line it never printed, an end it never reached."""


class AppBoard:
    """One board running the application in `app` (a folder with main.py, as you copy it to a board), its parts
    wired by `wiring` (default: the folder's wiring.json, if it has one). Started at once; `close()` stops it."""

    def __init__(self, app: Path, work: Path, wiring: Path | None = None, **board_options: Any) -> None:
        app = Path(app)
        if not (app / "main.py").exists() and not (app / "boot.py").exists():
            raise AppBoardError(f"{app} has no main.py or boot.py: give the folder you copy to the board")
        self.wiring = Wiring.for_app(app, wiring)
        self.dut = VirtualDut(
            app.name,
            BoardDefinition.load("sim"),
            flash=work / "board.flash",
            console_log=work / "console.log",
            app=app,
            **board_options,
        )
        self.dut.summary_keys = ()  # (an application of one's own has no summary line)
        self._drive()
        self._at = 0  # where expect() goes on from, in the console of every boot
        self._end: BootEnd | None = None
        self._error: BaseException | None = None
        self._runner: threading.Thread | None = None
        self.start()

    # -- running ---------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Boot the board (a power-on after a cut); its resets and wakes from deep sleep follow by themselves."""
        self._end = None
        self._error = None
        self.dut.start()
        self._runner = threading.Thread(target=self._run, name=f"app-board-{self.dut.name}", daemon=True)
        self._runner.start()

    def _run(self) -> None:
        try:
            self._end = self.dut.wait_boot(24 * 3600)
        except BaseException as exc:  # noqa: BLE001 (raised in the test's thread, by end())
            self._error = exc

    @property
    def running(self) -> bool:
        return self._runner is not None and self._runner.is_alive()

    def end(self, timeout: float = 30) -> str:
        """Until the application stops by itself: "ended" (main.py returned), "failed" (an exception it did not
        catch, or another exit status), "asleep" (a deep sleep nothing wakes) or "power-cut"."""
        assert self._runner is not None
        self._runner.join(timeout)
        if self._runner.is_alive():
            raise AppBoardError(f"{self.dut.name} still runs after {timeout:.0f} s; {self._tail()}")
        if self._error is not None:
            raise self._error
        assert self._end is not None
        if self._end.kind in ("asleep", "power-cut"):
            return self._end.kind
        return "ended" if self._end.status == 0 else "failed"

    def power_cut(self) -> None:
        """Its power goes (the flash keeps what was programmed); start() is the power coming back."""
        self.dut.power_cut()
        if self._runner is not None:
            self._runner.join(30)

    def close(self) -> None:
        if self.running:
            self.dut.power_cut()
            assert self._runner is not None
            self._runner.join(30)
        self.dut.close()

    # -- the console -----------------------------------------------------------------------------------------

    def console(self) -> str:
        """Everything the board printed, every boot after a `=== boot N ===` line."""
        return self.dut.console.all()

    def expect(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        """Wait for a line matching `pattern` (a regular expression) after the last one expect() matched, through
        the board's resets and wakes; the match. AppBoardError when the time runs out or the application ends
        first, with its last lines."""
        regex = re.compile(pattern, re.MULTILINE)
        deadline = time.monotonic() + timeout
        while True:
            text = self.console()
            found = regex.search(text, self._at)
            if found:
                self._at = found.end()
                return found
            if not self.running:
                text = self.console()  # (what it printed before it ended)
                found = regex.search(text, self._at)
                if found:
                    self._at = found.end()
                    return found
                raise AppBoardError(f"{self.dut.name} ended without printing {pattern!r}; {self._tail()}")
            if time.monotonic() > deadline:
                raise AppBoardError(f"{self.dut.name} printed no {pattern!r} within {timeout:.0f} s; {self._tail()}")
            time.sleep(0.02)

    def _tail(self) -> str:
        lines = self.console()[self._at :].splitlines()[-10:]
        return f"console log {self.dut.console.path}, last lines:\n" + "\n".join(lines)

    # -- the parts -------------------------------------------------------------------------------------------

    def _drive(self) -> None:
        self.dut.vboard.drive(**self.wiring.drive())

    def set(self, part: str, **values: Any) -> None:
        """Change a part's values from now on: a sensor's temperature_c, a pot's volts, a button's pressed."""
        self.wiring.set(part, **values)
        self._drive()

    def press(self, button: str) -> None:
        self.set(button, pressed=True)

    def release(self, button: str) -> None:
        self.set(button, pressed=False)

    def level(self, part: str) -> int | None:
        """The level an output part's pin drives (an LED, a relay): 1, 0, or None before the board drove it."""
        pin = self._pin_of(part, ("output", "button"))
        return self.dut.vboard.pin(pin)

    def strip(self, part: str) -> list[tuple[int, ...]]:
        """A WS2812 strip's pixels, as the board last sent them."""
        found = self.wiring.part(part)
        pin = self._pin_of(part, ("strip",))
        return self.dut.vboard.strip(pin, str(found.values.get("order", "GRB")))

    def display(self, part: str) -> list[list[int]]:
        """An SSD1306's pixels as its glass shows them (rows of 0 and 1)."""
        return self.dut.vboard.display(self._address_of(part))

    def display_png(self, part: str, path: Path, scale: int = 4) -> Path:
        return self.dut.vboard.display_png(path, self._address_of(part), scale)

    def changes(self, part: str) -> list[tuple[int, int]]:
        """Every level an output part's pin took, in order: (microseconds on the board's clock, level)."""
        pin = self._pin_of(part, ("output", "strip"))
        return [(at, level) for at, changed, level in self.dut.vboard.trace() if changed == pin]

    def trace(self, path: Path) -> Path:
        """Every output pin's changes as a Value Change Dump, for a logic analyzer's viewer."""
        return self.dut.vboard.vcd(path)

    def _pin_of(self, name: str, kinds: tuple[str, ...]) -> int:
        found = self.wiring.part(name)
        if found.kind not in kinds or found.pin is None:
            raise WiringError(f"{self.wiring.source}: {name} is a {found.part}, not one of {', '.join(kinds)}")
        return found.pin

    def _address_of(self, name: str) -> int:
        found = self.wiring.part(name)
        if found.part != "ssd1306" or found.address is None:
            raise WiringError(f"{self.wiring.source}: {name} is a {found.part}, not an ssd1306")
        return found.address
