"""systemd's service protocol, for `Type=notify` units (tools/systemd/): READY=1 once serving, WATCHDOG=1 from the
main loop at half the unit's WatchdogSec, STOPPING=1 on the way out, STATUS= lines. The datagrams go to
$NOTIFY_SOCKET (a path, or an abstract socket when it starts with @), as sd_notify(3) sends them; without it
(not started by systemd) every call does nothing. No dependency on libsystemd."""

from __future__ import annotations

import os
import socket
import time


def notify(*fields: str) -> bool:
    """Send `fields` ("READY=1", "STATUS=...") to systemd; False when there is no one to tell."""
    target = os.environ.get("NOTIFY_SOCKET")
    if not target:
        return False
    address = "\0" + target[1:] if target.startswith("@") else target
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        try:
            # Never waiting: a manager that does not read (its queue full) must not hang the service's main loop.
            sock.sendto("\n".join(fields).encode(), socket.MSG_DONTWAIT, address)
        except OSError:
            return False  # systemd gone (the host shutting down) or not reading: the service goes on all the same
    return True


class Watchdog:
    """WATCHDOG=1 at half of $WATCHDOG_USEC, from the loop that calls due()/pet(): a hung main loop stops the
    pings and systemd restarts the service. Without $WATCHDOG_USEC (or for another process: $WATCHDOG_PID) it is
    off."""

    def __init__(self) -> None:
        usec = os.environ.get("WATCHDOG_USEC", "")
        pid = os.environ.get("WATCHDOG_PID", "")
        mine = not pid or pid == str(os.getpid())
        self.interval = int(usec) / 2e6 if usec.isdigit() and mine else None
        self._next = time.monotonic()

    def wait_s(self) -> float | None:
        """Seconds until the next ping is due (None: off)."""
        return None if self.interval is None else max(0.0, self._next - time.monotonic())

    def pet(self) -> None:
        if self.interval is not None and time.monotonic() >= self._next:
            notify("WATCHDOG=1")
            self._next = time.monotonic() + self.interval
