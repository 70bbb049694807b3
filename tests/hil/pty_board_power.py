"""A stand-in for a USB hub's port power (`--hil-power-cmd` in the tests): power-cycles a pty-backed board.

The board is MicroPython running the firmware behind socat, its console on a pty reached through a fixed link
path, like a real board's /dev/serial/by-id name. Cutting power ends socat (the pty, and with it the port,
disappears, as a board's USB-Serial/JTAG port does at reset); restoring starts a new one on the same link path
after a short delay. Usage: pty_board_power.py STATE_DIR [off] (state.json there: link path, command,
environment); with `off`, the power stays off (the test's clean-up)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def processes_of(state_dir: Path) -> list[int]:
    """socat and the board behind it: every process whose environment carries this board's marker (socat's
    child runs in a session of its own, on the pty, so a process group does not reach it)."""
    marker = f"PTY_BOARD={state_dir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def power_off(state_dir: Path, link: Path) -> None:
    # The device node goes with the power, and first: socat gets no chance to remove its link, and a link left
    # behind while the kills below run would name a pty number that the kernel hands to the next pty opened on
    # this machine (another test's board), which the DUT's reader, looking for its port again, would open.
    link.unlink(missing_ok=True)
    # Again until none is left: the board's shell may fork its next program between a scan and the kill, and
    # a survivor would be a second board on the same flash.
    while pids := processes_of(state_dir):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)


def main(state_dir: Path) -> int:
    state = json.loads((state_dir / "state.json").read_text())
    link = Path(state["link"])
    power_off(state_dir, link)
    if len(sys.argv) > 2 and sys.argv[2] == "off":
        return 0
    time.sleep(0.3)  # the port stays away for a moment, as a USB device re-enumerating
    # After its run the program ends, but a real board stays powered with its port open (idle, REPL): so does
    # this one, by sleeping on in the same shell.
    # The half second before it is the ROM and second-stage bootloader's time, in which the host opens the port
    # that has just appeared (output before that is lost, on a native USB port as here).
    program = "sleep 0.5; " + " ".join(state["command"]) + "; exec sleep 86400"
    subprocess.Popen(
        ["socat", f"PTY,link={link},raw,echo=0", f"SYSTEM:{program},pty,raw,echo=0"],
        env={**os.environ, **state["env"], "PTY_BOARD": str(state_dir)},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 5
    while not link.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return 0 if link.exists() else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
