"""A real board as a device under test: its console on a serial port, power through a PowerSwitch (RTS on EN,
an external command), firmware and config copied with mpremote; its link UART reaches the host through a second
adapter (`link_port`)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from dboard import console_host
from host_bridge.boards.definition import BoardDefinition
from host_bridge.hil.dut import BootEnd, Dut, DutError
from host_bridge.hil.power import PowerSwitch
from host_bridge.vboard.events import EventSpec


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
        wifi: dict[str, str] | None = None,
    ) -> None:
        """`switch_factory(modem_lines) -> PowerSwitch`: the switch may need this DUT's port (RTS on EN).
        `deploy(port, config_path)`: copies firmware and config (default: mpremote through realboard, as
        `install` says: .mpy files, a ROMFS image, or only config and main.py beside a frozen image)."""
        super().__init__(name, board, log_dir / f"{name}.console.log")
        self.wifi = wifi
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

    def _install_config(self, config: dict[str, Any]) -> None:
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

    def start(self, cut_at_op: int = 0, cut_in_sleep: int = 0, cut_on: EventSpec | None = None) -> None:
        if cut_on is not None:
            raise DutError(
                f"{self.name}: a real board cannot cut its own power at an event: the bench watches its console"
            )
        if cut_at_op:
            raise DutError(f"{self.name}: a real board cannot be cut inside a chosen flash operation")
        if cut_in_sleep:
            raise DutError(f"{self.name}: a real board sleeps in real time: cut it at a moment instead")
        with self._power:
            self._begin_boot()
            self._cut_requested = False
            # A boot is a power cycle: from a running or idle board as from one whose power is off.
            self.switch.cut()
            self.switch.restore()

    def power_cut(self) -> None:
        with self._power:
            self.cut_times.append(time.time())
            self.switch.cut()
            self.console.power_cut()
            self._cut_requested = True  # only now: wait_boot() must not start the next boot while this one cuts

    def wait_boot(self, timeout: float) -> BootEnd:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.console.text()
            if self._cut_requested:
                self.cuts += 1
                return BootEnd("power-cut", None, None, text)
            summary = console_host.summary(text, self.summary_keys)
            if summary is not None:
                return BootEnd("done", 0, summary, text)
            if console_host.failure(text) is not None:
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
    from host_bridge.boards.firmware_build import romfs_image, stage_firmware
    from host_bridge.boards.realboard import deploy_commands, run_commands

    root = stage_firmware()
    code = romfs_image(root) if install == "romfs" else install if install == "frozen" else None
    cmd = deploy_commands(port, root, config, resume=False, reset=False, code=code)
    run_commands([cmd], dry_run=False, what="mpremote")
