"""Boards plugged in and out of a running `host-bridge run` (a port pattern, as /dev/serial/by-id/usb-* or the
udev names of tools/udev are given): pseudo-terminals appear under a watched folder while three virtual boards
publish, one goes and comes back. Each is served within a second or so of appearing; the one unplugged ends its
session alone and resumes when plugged again; the others' sessions are never touched; no accepted message is
lost."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.subscriber import Subscriber
from host_bridge.processes import ManagedProcess
from tests.conftest import REPO
from tests.integration.boards import check_promises, summary
from tests.integration.test_bridge import serial_board
from tests.integration.test_bridge_service import until

COUNT = 100


def test_boards_plugged_in_and_out_are_served_alone_and_lose_nothing(tmp_path: Path) -> None:
    ports = tmp_path / "ports"
    ports.mkdir()
    with Mosquitto(tmp_path / "broker", persistence=True) as broker:
        observer = Subscriber(broker.address, "hotplug-observer", "sensors/#")
        boards = [
            serial_board(tmp_path / f"b{i}", f"hotplug-{i}", 1, COUNT, publish={"interval_ms": 20}) for i in range(3)
        ]
        bridge = ManagedProcess(
            [sys.executable, "-m", "host_bridge", "run", "--broker", broker.address, "--stats-every", "0",
             "--port", str(ports / "board-*")],
            tmp_path / "bridge.log",
            cwd=REPO,
        )  # fmt: skip
        try:
            bridge.wait_for("event=start")
            for board in boards:
                board.start()
            for i, board in enumerate(boards):  # plugged in one after the other, while they publish
                os.symlink(os.path.realpath(str(board.serial_link)), ports / f"board-{i}")
                plugged = time.monotonic()
                until(lambda i=i: f"board=board-{i} event=port_open" in bridge.text(), f"board-{i} never served")
                # Served at the next scan of the pattern (every 0.5 s); the bound only catches a port never scanned.
                assert time.monotonic() - plugged < 30
            until(lambda: sum(r.topic == "sensors/hotplug-1/telemetry" for r in observer.records) >= 20, "b1 silent")
            (ports / "board-1").unlink()  # unplugged
            until(lambda: "board=board-1 event=stopped" in bridge.text(), "board-1's session did not end")
            time.sleep(1.0)  # its board keeps journaling meanwhile
            os.symlink(os.path.realpath(str(boards[1].serial_link)), ports / "board-1")  # plugged again
            until(lambda: bridge.text().count("board=board-1 event=port_open") == 2, "board-1 not served again")
            for board in boards:
                assert board.process is not None
                out, _ = board.process.communicate(timeout=120)
                assert board.wait() == 0 and summary(out.decode())["total"] == COUNT, out.decode()[-2000:]
            for i in range(3):
                check_promises(observer, f"hotplug-{i}", 1, COUNT)  # QoS 1: every accepted message, at least once
        finally:
            observer.close()
            for board in boards:
                board.close()
            code = bridge.stop()
    log = bridge.text()
    assert code == 0, log[-3000:]
    for untouched in ("board-0", "board-2"):
        assert log.count(f"board={untouched} event=port_open") == 1, log[-3000:]
        assert log.index(f"board={untouched} event=stopped") > log.index("signal=SIGTERM"), log[-3000:]
    assert log.count("board=board-1 event=stopped") == 2  # unplugged, then at exit
