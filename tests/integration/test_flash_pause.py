"""A sector erase on the chip stalls its UART: with the flash timing model on, the virtual board's UART keeps only
its 128-byte receive FIFO of what arrives during a program or erase (host_bridge/vboard/shims/machine.py). A board
that receives while it publishes loses bytes to each erase unless it pauses its bridge first (the link's PAUSE,
QUIET and RESUME frames, docs/link-protocol.md)."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.vboard import LineFaults, VirtualBoard
from tests.integration.boards import summary
from tests.integration.test_bridge import BAUD, BridgeProcess

OVERFLOW = "uart receive FIFO overflowed"


@pytest.mark.parametrize("pause", [False, True])
def test_an_erase_loses_what_overflows_the_fifo_unless_the_bridge_pauses(tmp_path: Path, pause: bool) -> None:
    client_id = f"erase-{'pause' if pause else 'nopause'}"
    config = {
        "client_id": client_id,
        "transport": "serial",
        "uart": {"id": 1, "baud": BAUD, "pause": pause},
        # 300 messages of 100 bytes fill a few of the ring's 4 KB sectors: each one erased on the way (45 ms).
        "publish": {"topic": "sensors/{client_id}/telemetry", "qos": 1, "count": 300, "payload_bytes": 100},
        "subscribe": [{"topic": "cmd/{client_id}", "qos": 0}],
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    board = VirtualBoard(
        flash=tmp_path / "board.flash",
        config=tmp_path / "config.json",
        faults=LineFaults(baud=BAUD),
        serial_link=tmp_path / "ttyBOARD",
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        flash_timing=True,
    )
    stop = threading.Event()
    with Mosquitto(tmp_path / "broker") as broker:
        bridge = BridgeProcess(tmp_path, {client_id: str(tmp_path / "ttyBOARD")}, broker.address)
        host, port = broker.address.split(":")
        commands = mqtt.Client(CallbackAPIVersion.VERSION2, f"{client_id}-commands")
        commands.connect(host, int(port))
        commands.loop_start()

        def send_commands() -> None:  # 60-byte commands every 20 ms: 3 KB/s toward the board
            while not stop.wait(0.02):
                commands.publish(f"cmd/{client_id}", b"c" * 60, qos=0)

        sender = threading.Thread(target=send_commands)
        try:
            bridge.wait_for("event=start")
            sender.start()
            board.start()
            assert board.process is not None
            out = board.process.communicate(timeout=120)[0].decode(errors="replace")
            assert board.wait() == 0, out
        finally:
            stop.set()
            if sender.is_alive():
                sender.join()
            commands.loop_stop()
            commands.disconnect()
            board.close()
            assert bridge.stop() == 0
    link = summary(out)["link"]
    pauses = [int(w.split("=")[1]) for w in bridge.text().split() if w.startswith("flash_pauses=")]
    if pause:
        assert OVERFLOW not in out and link["crc_errors"] == 0, out[-3000:]
        assert max(pauses) > 0  # the bridge paused for each erase
    else:
        assert OVERFLOW in out and link["crc_errors"] > 0  # frames cut short by the lost bytes
        assert max(pauses, default=0) == 0
