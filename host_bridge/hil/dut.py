"""Devices under test: one interface for a virtual board and a real board on a serial port.

A DUT is configured (config.json onto the board), started (a boot), watched on its console (`expect`), and ended
by a power cut or by finishing its run (`wait_boot`). Each boot's console goes to one log file per DUT, with a
line `=== boot N ===` before it, so that a failure can name the file and the boot.

VirtualDut: the virtual board (MicroPython Unix port, emulated flash), power cut by SIGKILL, optionally inside
the Nth flash program or erase; its link UART is a pty with a fixed path that can be unplugged and replugged.
SerialDut: a real ESP32 on a serial port (its console), power cut by a PowerSwitch, firmware and config copied
with mpremote; the board's link UART reaches the host through a second adapter (`link_port`).
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from host_bridge.boards import BoardDefinition
from host_bridge.errors import HostBridgeError
from host_bridge.hil.power import PowerSwitch, SigkillSwitch
from host_bridge.vboard.runner import POWER_CUT_EXIT_STATUS, VirtualBoard
from host_bridge.vboard.serial_line import LineFaults

SUMMARY_PREFIX = '{"'  # the application's last line of a completed run is its JSON summary
FAILURE_MARKERS = ("config error:", "journal error:", "Traceback (most recent call last)")


class DutError(HostBridgeError):
    """A device under test did not do what the bench expected; the message names its console log."""


@dataclass
class BootEnd:
    """How one boot ended: "done" (the run completed: `summary` is its last line), "power-cut", or "failed"."""

    kind: str
    status: int | None  # the process's exit status (virtual boards)
    summary: dict[str, Any] | None
    console: str


def parse_summary(text: str) -> dict[str, Any] | None:
    """The application's JSON summary line (the last one in `text`), or None."""
    for line in reversed(text.splitlines()):
        if line.startswith(SUMMARY_PREFIX):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and "total" in value:
                return value
    return None


class ConsoleLog:
    """One DUT's console, every boot appended to one file (none: the console goes elsewhere, unread)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        self.boot_offset = 0

    def new_boot(self, boot: int) -> None:
        if self.path is not None:
            with open(self.path, "ab") as f:
                f.write(f"=== boot {boot} ===\n".encode())
                self.boot_offset = f.tell()

    def text(self) -> str:
        """This boot's console so far."""
        if self.path is None:
            return ""
        with open(self.path, "rb") as f:
            f.seek(self.boot_offset)
            return f.read().decode(errors="replace")


class Dut:
    """What every device under test offers a scenario. Subclasses fill in the hardware."""

    flash_cuts = False  # can a power cut land inside a chosen flash operation?
    can_unplug = False
    link_port: str | None = None  # host end of the board's link UART, for the bridge

    def __init__(self, name: str, board: BoardDefinition, console_log: Path | None) -> None:
        self.name = name
        self.board = board
        self.console = ConsoleLog(console_log)
        self.boots = 0
        self.cuts = 0
        self.config: dict[str, Any] = {}

    # -- to be provided --------------------------------------------------------------------------------------

    def configure(self, config: dict[str, Any]) -> None:
        raise NotImplementedError

    def start(self, cut_at_op: int = 0) -> None:
        raise NotImplementedError

    def power_cut(self) -> None:
        raise NotImplementedError

    def wait_boot(self, timeout: float) -> BootEnd:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

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

    def _begin_boot(self) -> None:
        self.boots += 1
        self.console.new_boot(self.boots)


class VirtualDut(Dut):
    """The virtual board as a device under test."""

    flash_cuts = True
    can_unplug = True

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
        self._seeds = random.Random(seed)
        self.pids: list[int] = []  # every boot's process, so a harness can show they all ended

    def configure(self, config: dict[str, Any]) -> None:
        self.config = config
        path = self.flash.with_name(self.flash.stem + ".config.json")
        path.write_text(json.dumps(config))
        self.vboard.config = path

    def set_line(self, faults: LineFaults) -> None:
        """Change what the serial line does to bytes (noise, drops, pacing), from now on."""
        if self.vboard.line is None:
            raise DutError(f"{self.name} has no serial line")
        self.vboard.line.set_faults(faults)

    def start(self, cut_at_op: int = 0) -> None:
        self._begin_boot()
        self._cut_requested = False
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
        self._cut_requested = True
        self.switch.cut()

    def alive(self) -> bool:
        process = self.vboard.process
        return process is not None and process.poll() is None

    def wait_boot(self, timeout: float) -> BootEnd:
        """Until this boot's process ends; machine.reset() or a soft reset at the REPL boots it again (reset cause
        HARD_RESET or SOFT_RESET) and the wait goes on."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                status = self.vboard.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.power_cut()
                raise DutError(
                    f"{self.name}: boot {self.boots} did not end within {timeout:.0f} s (cut now); "
                    f"console log {self.console.path}"
                ) from None
            if not self.vboard.next_boot(status):
                break
            self.start()
        text = self.console.text()
        if status == POWER_CUT_EXIT_STATUS:
            self.cuts += 1
            return BootEnd("power-cut", status, None, text)
        summary = parse_summary(text)
        kind = "done" if status == 0 and (summary is not None or self.console.path is None) else "failed"
        return BootEnd(kind, status, summary, text)

    def unplug(self) -> None:
        assert self.vboard.line is not None, f"{self.name} has no serial line"
        self.vboard.line.unplug()

    def replug(self) -> None:
        assert self.vboard.line is not None, f"{self.name} has no serial line"
        self.vboard.line.replug()

    def stats(self) -> dict[str, dict[str, int]] | None:
        return self.vboard.stats()

    def close(self) -> None:
        self.vboard.close()


class SerialDut(Dut):
    """A real board: console on `port`, power through `switch`, files through mpremote."""

    def __init__(
        self,
        name: str,
        board: BoardDefinition,
        log_dir: Path,
        port: str,
        switch_factory: Any,
        link_port: str | None = None,
        baud: int = 115200,
        deploy: Any = None,
        install: str = "deployed",
    ) -> None:
        """`switch_factory(modem_lines) -> PowerSwitch`: the switch may need this DUT's port (RTS on EN).
        `deploy(port, config_path)`: copies firmware and config (default: mpremote through realboard, as
        `install` says: .mpy files, a ROMFS image, or only config and main.py beside a frozen image)."""
        super().__init__(name, board, log_dir / f"{name}.console.log")
        self.log_dir = log_dir
        self.port_path = port
        self.baud = baud
        self.link_port = link_port
        self._serial: Any = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._cut_requested = False
        self._power = threading.Lock()  # one switch operation at a time: a cut from a timer ends before a boot
        self._deploy = deploy or (lambda port, config: _mpremote_deploy(port, config, install))
        self.port_losses = 0
        self.switch: PowerSwitch = switch_factory(_Lines(self))
        self._reader = threading.Thread(target=self._read_console, name=f"console-{name}", daemon=True)
        try:
            self._open()
        except OSError as exc:  # serial.SerialException is an OSError
            raise DutError(
                f"cannot open {port} ({exc}): is the board plugged in? `ls -l /dev/serial/by-id` lists the ports"
            ) from None
        self._reader.start()

    # The console port: opened with DTR and RTS released, so that opening it neither resets the board nor
    # holds it in the bootloader (the dev kit's auto-reset circuit acts on both lines).
    def _open(self) -> None:
        import serial

        port = serial.Serial()
        port.port, port.baudrate, port.timeout = self.port_path, self.baud, 0.1
        port.dtr = port.rts = False
        port.open()
        self._serial = port

    def _read_console(self) -> None:
        import serial

        while not self._stop.is_set():
            port = self._serial
            try:
                if port is None:
                    raise serial.SerialException("closed")
                data = port.read(4096)
            except (serial.SerialException, OSError, TypeError, AttributeError):
                # The port went away (native USB re-enumerates at every reset, or a cable was pulled): wait for
                # its device node to come back, then open it again.
                if self._stop.is_set():
                    return
                with self._lock:
                    if self._serial is port and port is not None:
                        self.port_losses += 1
                        try:
                            port.close()
                        except Exception:  # noqa: BLE001 (a vanished port fails to close in many ways)
                            pass
                        self._serial = None
                self._stop.wait(0.02)
                if Path(self.port_path).exists() and self._serial is None:
                    try:
                        with self._lock:
                            self._open()
                    except (serial.SerialException, OSError):
                        pass
                continue
            if data and self.console.path is not None:
                with open(self.console.path, "ab") as log:
                    log.write(data.replace(b"\r\n", b"\n"))

    def configure(self, config: dict[str, Any]) -> None:
        self.config = config
        path = self.log_dir / f"{self.name}.config.json"
        path.write_text(json.dumps(config))
        with self._lock:  # mpremote needs the port to itself
            if self._serial is not None:
                self._serial.close()
                self._serial = None
            try:
                self._deploy(self.port_path, path)
            finally:
                self._open()

    def start(self, cut_at_op: int = 0) -> None:
        if cut_at_op:
            raise DutError(f"{self.name}: a real board cannot be cut inside a chosen flash operation")
        with self._power:
            self._begin_boot()
            self._cut_requested = False
            # A boot is a power cycle: from a running or idle board as from one whose power is off.
            self.switch.cut()
            self.switch.restore()

    def power_cut(self) -> None:
        with self._power:
            self.switch.cut()
            self._cut_requested = True  # only now: wait_boot() must not start the next boot while this one cuts

    def wait_boot(self, timeout: float) -> BootEnd:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.console.text()
            if self._cut_requested:
                self.cuts += 1
                return BootEnd("power-cut", None, None, text)
            summary = parse_summary(text)
            if summary is not None:
                return BootEnd("done", 0, summary, text)
            if any(marker in text for marker in FAILURE_MARKERS):
                time.sleep(0.3)  # the rest of the message
                return BootEnd("failed", None, None, self.console.text())
            time.sleep(0.05)
        raise DutError(
            f"{self.name}: boot {self.boots} did not finish its run within {timeout:.0f} s; "
            f"console log {self.console.path}"
        )

    def close(self) -> None:
        self._stop.set()
        self._reader.join(2)
        with self._lock:
            if self._serial is not None:
                self._serial.close()
                self._serial = None


class _Lines:
    """The modem lines of a SerialDut's console port, whichever port object is open now."""

    def __init__(self, dut: SerialDut) -> None:
        self.dut = dut

    def setDTR(self, value: bool) -> None:
        if self.dut._serial is not None:
            self.dut._serial.dtr = value

    def setRTS(self, value: bool) -> None:
        if self.dut._serial is not None:
            self.dut._serial.rts = value


def _mpremote_deploy(port: str, config: Path, install: str) -> None:
    from host_bridge.firmware_build import romfs_image, stage_firmware
    from host_bridge.realboard import check_config, deploy_commands, run_commands

    check_config(config)
    root = stage_firmware()
    code = romfs_image(root) if install == "romfs" else install if install == "frozen" else None
    cmd = deploy_commands(port, root, config, resume=False, reset=False, code=code)
    run_commands([cmd], dry_run=False, what="mpremote")
