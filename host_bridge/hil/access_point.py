"""Access points: how the bench takes away the WiFi its boards on TCP join, and gives it back. One interface, two
implementations, as the power switch has three (host_bridge.hil.power):

- the virtual access point (host_bridge.vboard.wifi.AccessPoint), shared by a test's virtual boards: down at
  once, its stations notice after the beacon timeout, as a chip's do; or down at a board's own event (its join,
  its Nth accepted message), which the board waits on, so that the outage lands there whatever the host's load;
- CommandAccessPoint: a command the user gives (`--hil-ap-cmd 'smartplug lab-ap {action}'`, {action} down or
  up), for real boards: a smart plug on the access point, a script that disables its radio.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from typing import Protocol

from host_bridge.errors import HostBridgeError
from host_bridge.vboard.events import EventSpec


class AccessPointError(HostBridgeError):
    """The access point could not be taken down or brought back."""


class AccessPointSwitch(Protocol):
    def down(self) -> None:
        """The access point goes away."""

    def up(self) -> None:
        """The access point is back."""

    def outage(self, seconds: float) -> None:
        """Down for `seconds` (the call waits them out), then up."""

    def outage_at(self, on: EventSpec, seconds: float) -> None:
        """Down for `seconds` from the moment a board reaches event `on` (host_bridge/vboard/events.py)."""


class CommandAccessPoint:
    """An external command that turns the access point off (`{action}` down) and on (up)."""

    def __init__(self, template: str, timeout: float = 60) -> None:
        if not shlex.split(template):
            raise AccessPointError("--hil-ap-cmd is empty")
        self.template = template
        self.timeout = timeout

    def _run(self, action: str) -> None:
        argv = [part.format(action=action) for part in shlex.split(self.template)]
        try:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout)
        except FileNotFoundError:
            raise AccessPointError(f"access point command {argv[0]!r} not found: check --hil-ap-cmd") from None
        except subprocess.TimeoutExpired:
            raise AccessPointError(f"access point command {shlex.join(argv)} took over {self.timeout:.0f} s") from None
        if result.returncode:
            raise AccessPointError(
                f"access point command {shlex.join(argv)} failed ({result.returncode}): {result.stderr.strip()[-300:]}"
            )

    def down(self) -> None:
        self._run("down")

    def up(self) -> None:
        self._run("up")

    def outage(self, seconds: float) -> None:
        self.down()
        try:
            time.sleep(seconds)
        finally:
            self.up()

    def outage_at(self, on: EventSpec, seconds: float) -> None:
        raise AccessPointError(
            f"an outage at a board's event ({on}) needs the virtual access point: with a real one the bench watches "
            "the board's console and calls outage() (docs/hil-bench.md)"
        )
