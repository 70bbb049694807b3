"""Figure 8 of BENCHMARKS.md: a virtual board's boot, from the host starting it to its first PUBLISH arriving at
the broker, since every power-cut campaign waits for it once per cut (a reboot on a flash that holds the
firmware); and the first boot on a new flash, which formats it and installs the firmware's files. The board runs
the real application (config, boot counter, journal open, CONNECT) against a one-connection broker in this
process that answers CONNACK and timestamps the first PUBLISH. The bare interpreter start (a MicroPython that
only exits) is measured in the same run as the floor.

    python tools/bench_boot.py [--quick]          (part of make bench)"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench_report import Goal, Section, table, verdict

from dmqtt import codec_host as codec
from host_bridge.boards.definition import BoardDefinition
from host_bridge.hil.virtual_dut import VirtualDut
from host_bridge.vboard.runner import micropython_command

GOAL_MS = 150


class FirstPublish:
    """Listens on 127.0.0.1; answers CONNACK and keeps the monotonic time of each client's first PUBLISH."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.seen: dict[str, float] = {}
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                self._first_publish(conn)
            except OSError:
                pass  # the board was switched off mid-connection: the next one is due
            finally:
                conn.close()

    def _first_publish(self, conn: socket.socket) -> None:
        decoder = codec.PacketDecoder(codec.V311, 1 << 16)
        client = ""
        while data := conn.recv(4096):
            for packet in decoder.packets(data):
                if packet.type == codec.CONNECT:
                    decoder = codec.PacketDecoder(packet.version, 1 << 16)
                    client = packet.client_id
                    conn.sendall(codec.encode_connack(False, 0, packet.version))
                elif packet.type == codec.PUBLISH:
                    self.seen.setdefault(client, time.monotonic())
                    return

    def close(self) -> None:
        self.sock.close()


def boot_to_first_publish(broker: FirstPublish, board: BoardDefinition, name: str, folder: Path) -> float:
    """Milliseconds from starting the board on its flash file (name.flash: a reboot when it exists) to its first
    PUBLISH at the broker."""
    broker.seen.pop(name, None)
    dut = VirtualDut(name, board, flash=folder / f"{name}.flash", console_log=folder / f"{name}.log")
    try:
        dut.configure({"client_id": name, "broker": broker.address, "publish": {"qos": 1, "count": 1}})
        start = time.monotonic()
        dut.start()
        deadline = time.monotonic() + 30
        while name not in broker.seen and time.monotonic() < deadline:
            time.sleep(0.001)
        if name not in broker.seen:
            raise SystemExit(f"{name}: no PUBLISH within 30 s; console: {folder / f'{name}.log'}")
        return (broker.seen[name] - start) * 1000
    finally:
        dut.close()


def figure(quick: bool) -> dict[str, Any]:
    boots = 3 if quick else 15
    board = BoardDefinition.load("sim")
    with tempfile.TemporaryDirectory() as tmp:
        broker = FirstPublish()
        first, times = [], []
        try:
            for i in range(boots):
                # A new flash file: the boot formats LittleFS and installs the firmware's files, as the first boot
                # after `host-bridge deploy`. The next boot on it is what a power-cut campaign pays per cut.
                first.append(boot_to_first_publish(broker, board, f"boot-{i}", Path(tmp)))
                times.append(boot_to_first_publish(broker, board, f"boot-{i}", Path(tmp)))
        finally:
            broker.close()
        bare = []
        for _ in range(boots):
            start = time.monotonic()
            subprocess.run([*micropython_command(), "-c", "pass"], check=True)
            bare.append((time.monotonic() - start) * 1000)
    return {
        "boots": boots,
        "first_publish_ms": {
            "median": statistics.median(times),
            "max": max(times),
            "all": [round(t, 1) for t in times],
        },
        "first_boot_ms": statistics.median(first),
        "bare_interpreter_ms": statistics.median(bare),
        "goal_ms": GOAL_MS,
    }


# -- the report (tools/bench_boot.md) ---------------------------------------------------------------------------


def report(fig: dict[str, Any], figures: dict[str, Any]) -> Section:
    first = fig["first_publish_ms"]
    ok = first["median"] <= fig["goal_ms"]
    rows = [
        [f"first PUBLISH, median of {fig['boots']} reboots", f"{first['median']:.0f}"],
        ["first PUBLISH, slowest", f"{first['max']:.0f}"],
    ]
    if "first_boot_ms" in fig:
        rows.append(["first boot on a new flash (formats it, installs the .mpy files)", f"{fig['first_boot_ms']:.0f}"])
    rows += [
        ["bare interpreter start and exit (floor)", f"{fig['bare_interpreter_ms']:.0f}"],
        ["goal", f"<= {fig['goal_ms']}: {verdict(ok)}"],
    ]
    goal = Goal("8", "first PUBLISH after a reboot, median (ms)", f"<= {fig['goal_ms']}", f"{first['median']:.0f}", ok)
    values = {"table": table(["", "ms"], rows), "bare_ms": f"{fig['bare_interpreter_ms']:.0f}",
              "median_ms": f"{first['median']:.0f}"}  # fmt: skip
    return Section(values, [goal])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    result = figure(args.quick)
    first = result["first_publish_ms"]
    print(
        f"virtual board boot to first PUBLISH: median {first['median']:.0f} ms, max {first['max']:.0f} ms over "
        f"{result['boots']} boots (goal {GOAL_MS} ms); a bare interpreter start {result['bare_interpreter_ms']:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
