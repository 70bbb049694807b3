"""A serial board with end-to-end confirmation is the configuration whose boot comes nearest its heap: every
module's code is loaded (deployed .mpy files), with the link's buffers and the confirmation's state. It boots,
queues messages offline, loses its power, and boots again over that journal, with 6 KB less heap than the
board has. The heap figure (tests/hil/test_heap_budget.py) measures the run's low point after collections, not the
boot's peak; this guards the peak. (In 0.6.0, loading the journal's replay only for the boot made this boot fail for
want of a 1.3 KB block: it needed 139 KB where it had needed 122.)"""

from __future__ import annotations

from pathlib import Path

from dboard import console
from host_bridge.vboard.flash_image import parse_size
from host_bridge.vboard.serial_line import LineFaults
from tests.integration.boards import SIM, read_until, start_board

# What the boot leaves spare moves with the emulation's own allocations, the checkout's path among them (vboot.py
# runs from source under its full path): measured for 0.14.0, this checkout boots with 7 KB spare and not 7.5, a
# fresh clone under /tmp with 8.5 and not 9.5 (0.13.0: 9 and not 9.5 here). 6 KB keeps the guard below both, and
# still catches a boot that needs a kilobyte and a half more (CHANGELOG 0.14.0).
SPARE = int(6 * 1024)


def test_a_serial_board_with_confirmation_boots_twice_with_6_kb_to_spare(tmp_path: Path) -> None:
    heap = parse_size(SIM.heap_without_wifi) - SPARE
    config = {
        "client_id": "boot-heap",
        "transport": "serial",
        "uart": {"id": 1, "baud": 115200},
        "mqtt_version": "3.1.1",
        "publish": {"topic": "sensors/{client_id}/telemetry", "qos": 1, "count": 20, "payload_bytes": 100},
        "confirm": {"timeout_s": 5},
    }
    # No bridge on the line: QoS 1 messages are accepted into the journal (the offline queue).
    for wait in (console.ACCEPTED % (1, 2), console.BOOT.split(":")[0] % 2 + ":"):
        board = start_board(tmp_path, config, heap=str(heap), faults=LineFaults(115200))
        try:
            out = read_until(board, lambda said, wait=wait: (wait in said and said.endswith("\n")) or "Error" in said)
            assert "Error" not in out, out
        finally:
            board.close()  # the power cut: the next boot replays what this one journaled
    resumed = next(line for line in out.splitlines() if line.startswith("boot 2:"))
    assert int(resumed.split()[2]) >= 3, out  # the second boot resumed what the first accepted (at least three)
