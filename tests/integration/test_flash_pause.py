"""A sector erase on the chip stalls its UART: with the flash timing model on, the virtual board's UART keeps only
its 128-byte receive FIFO of what arrives during a program or erase (host_bridge/vboard/shims/machine.py). A board
that receives while it publishes loses bytes to each erase unless it pauses its bridge first (the link's PAUSE,
QUIET and RESUME frames, docs/link-protocol.md). The run is figure 12's (tools/bench_stalls.py), on the wire: a
observer at the broker, commands toward the board every 20 ms, the bridge's counters."""

from __future__ import annotations

from pathlib import Path

import pytest

from host_bridge.broker.mosquitto import Mosquitto
from tools.bench_stalls import serial_run


@pytest.mark.parametrize("pause", [False, True])
def test_an_erase_loses_what_overflows_the_fifo_unless_the_bridge_pauses(tmp_path: Path, pause: bool) -> None:
    with Mosquitto(tmp_path / "broker") as broker:
        # 300 messages of 100 bytes fill a few of the ring's 4 KB sectors: each one erased on the way (45 ms).
        run = serial_run(tmp_path, broker, 115200, pause, flash_timing=True, count=300)
    assert run["delivered"] == 300 and run["commands_received"] > 0, run
    if pause:
        assert run["fifo_bytes_lost"] == 0 and run["board_crc_errors"] == 0, run
        assert run["flash_pauses"] > 0, run  # the bridge paused for each erase
    else:
        assert run["fifo_bytes_lost"] > 0, run
        # What the loss did on the wire: frames cut short (the board's CRC errors), or lost whole (the bridge sent
        # them again).
        assert run["board_crc_errors"] + run["bridge_retransmissions"] > 0, run
        assert run["flash_pauses"] == 0, run
