"""Power switches: how the bench cuts a board's power. One interface, three implementations:

- SigkillSwitch: the virtual board's power cut, SIGKILL of its process group (the flash file keeps what was
  programmed, a program or erase in flight may be left half done).
- RtsEnSwitch: the EN (reset) line of a dev kit pulled low through its auto-reset circuit, as esptool's hard
  reset does: on the ESP32-DevKitC the USB-UART bridge's RTS and DTR drive two transistors so that EN is low
  while RTS is asserted and DTR is not (and GPIO0 low, the download mode, in the opposite case, which this
  switch never sets). Holding EN low stops the chip at once; the SPI flash keeps its supply, so a flash program
  or erase that the chip had already started completes inside the flash chip. Boards with native
  USB-Serial/JTAG (S3, C3, C6) reset the same way through the peripheral's emulated RTS, and lose the port.
- CommandSwitch: an external command that cuts the power and restores it, such as `uhubctl -a cycle -p {port}`
  (a USB hub with per-port power switching) or a relay script; `{port}` and `{board}` are filled in. This is
  the only one of the three that takes the supply away from the flash chip too.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from typing import TYPE_CHECKING, Protocol

from host_bridge.errors import HostBridgeError

if TYPE_CHECKING:
    from host_bridge.vboard.runner import VirtualBoard


class PowerError(HostBridgeError):
    """The power switch could not cut or restore a board's power."""


class ModemLines(Protocol):
    """The two modem-control lines of a serial port (pyserial's Serial has them)."""

    def setDTR(self, value: bool) -> None: ...  # pyserial's names

    def setRTS(self, value: bool) -> None: ...


class PowerSwitch(Protocol):
    kind: str

    def cut(self) -> None:
        """Take the power away (the board stops at once)."""

    def restore(self) -> None:
        """Give the power back (the board boots)."""


class SigkillSwitch:
    """The virtual board's power: SIGKILL of its process group. Restoring is the next boot's start()."""

    kind = "sigkill"

    def __init__(self, board: VirtualBoard) -> None:
        self.board = board

    def cut(self) -> None:
        self.board.power_cut()

    def restore(self) -> None:
        """Nothing: a virtual board is powered by being started."""


class RtsEnSwitch:
    """EN held low by RTS through the dev kit's auto-reset circuit."""

    kind = "rts-en"
    HOLD_S = 0.1  # EN low for 100 ms, as esptool's hard reset holds it

    def __init__(self, lines: ModemLines) -> None:
        self.lines = lines

    def cut(self) -> None:
        # DTR first: with DTR and RTS both asserted the circuit releases EN again; DTR=False, RTS=True is the
        # one state that pulls EN low while leaving GPIO0 high (a normal boot on release).
        self.lines.setDTR(False)
        self.lines.setRTS(True)
        time.sleep(self.HOLD_S)

    def restore(self) -> None:
        self.lines.setRTS(False)


class CommandSwitch:
    """An external command that power-cycles the board (cut and restore in one call)."""

    kind = "command"

    def __init__(self, template: str, port: str, board: str, timeout: float = 60) -> None:
        self.argv = [part.format(port=port, board=board) for part in shlex.split(template)]
        if not self.argv:
            raise PowerError("--hil-power-cmd is empty")
        self.timeout = timeout

    def cut(self) -> None:
        try:
            result = subprocess.run(self.argv, capture_output=True, text=True, timeout=self.timeout)
        except FileNotFoundError:
            raise PowerError(f"power command {self.argv[0]!r} not found: check --hil-power-cmd") from None
        except subprocess.TimeoutExpired:
            raise PowerError(f"power command {shlex.join(self.argv)} did not finish in {self.timeout:.0f} s") from None
        if result.returncode:
            raise PowerError(
                f"power command {shlex.join(self.argv)} failed ({result.returncode}): {result.stderr.strip()[-300:]}"
            )

    def restore(self) -> None:
        """The command restores power itself (a cycle); nothing more to do."""
