"""Readiness under systemd: `host-bridge run` says READY=1 once every configured port is open, or after waiting
for them saying in STATUS which boards are missing; STATUS then follows the ports (here from the main loop's
watchdog wake-ups, as under the unit's WatchdogSec)."""

from __future__ import annotations

import os
import pty
import socket
import sys
import time
from pathlib import Path

from host_bridge.processes import ManagedProcess
from tests.conftest import REPO
from tests.integration.test_bridge_service import notifications, until


def test_ready_waits_for_the_configured_ports_and_status_names_the_missing(tmp_path: Path) -> None:
    systemd = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    systemd.bind(str(tmp_path / "notify"))
    ptys = [pty.openpty() for _ in range(2)]
    (tmp_path / "ttyA").symlink_to(os.ttyname(ptys[0][1]))  # board a is plugged in, b is not (yet)
    bridge = ManagedProcess(
        [sys.executable, "-m", "host_bridge", "run", "--broker", "127.0.0.1:1", "--stats-every", "0",
         "--port", f"a={tmp_path / 'ttyA'}", "--port", f"b={tmp_path / 'ttyB'}"],
        tmp_path / "bridge.log",
        cwd=REPO,
        env={"NOTIFY_SOCKET": str(tmp_path / "notify"), "WATCHDOG_USEC": "400000"},
    )  # fmt: skip
    seen: list[str] = []

    def said(text: str) -> bool:
        seen.extend(notifications(systemd))
        return text in seen

    try:
        started = time.monotonic()
        until(lambda: said("READY=1"), "no READY", limit_s=60)
        assert time.monotonic() - started >= 5  # it waited for b's port (10 s), not only for a's
        assert "STATUS=serving 1 boards; missing: b" in seen, seen
        (tmp_path / "ttyB").symlink_to(os.ttyname(ptys[1][1]))  # b plugged in
        until(lambda: said("STATUS=serving 2 boards"), "STATUS never followed b's port")
    finally:
        bridge.stop()
        systemd.close()
        for master, slave in ptys:
            os.close(master)
            os.close(slave)
