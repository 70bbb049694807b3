"""Synthetic serial boards: many boards in one CPython process, no MicroPython. Each is the board's end of a
pseudo-terminal that speaks the serial link with the firmware's own code (dlink.link.Link, dlink.control) and
MQTT 3.1.1 with the codec's encoders (dmqtt.codec_host): it opens its broker connection through the bridge (O,
then CONNECT), then publishes QoS 1 telemetry on a fixed schedule and takes the PUBACKs. What it costs is the link
and codec in CPython, a fraction of a MicroPython board's process, so that `host-bridge run` with hundreds of
them measures the bridge (tools/bench_bridge_alone.py).

Each message's payload is the board application's telemetry shape ({"dev", "boot", "seq", "t", ...}) with `t`
the host's CLOCK_MONOTONIC in ms when the message was made: an observer at the broker takes arrival minus `t` as the
relay latency (the link's pacing at the baud rate, the bridge, the broker).

    python tools/synthetic_boards.py --boards 64 --print-ports     (the ports, then runs until Ctrl-C)"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import time
import tty
from dataclasses import dataclass, field

from dlink import control, frame
from dlink.link import Link
from dmqtt import codec_host as codec

TOPIC = "sensors/{dev}/telemetry"


def now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(eq=False)  # (hashed by identity: the fleet keys its timers by board)
class SyntheticBoard:
    name: str
    baud: int
    interval_ms: int
    count: int
    pad: int = 40  # telemetry of about the board application's size (86 bytes)
    sent: int = 0
    acked: int = 0
    connected: bool = False
    _opened: bool = False
    _next_at: int = 0
    _rx: bytearray = field(default_factory=lambda: bytearray(4096))
    _out: bytearray = field(default_factory=bytearray)  # MQTT bytes the link has not taken yet

    def __post_init__(self) -> None:
        self.master, self._slave = os.openpty()
        tty.setraw(self._slave)
        os.set_blocking(self.master, False)
        self.port = os.ttyname(self._slave)
        self.link = Link(int.from_bytes(os.urandom(2), "big") or 1, self.baud)
        self._decoder = codec.PacketDecoder(codec.V311)
        self._lines = control.Lines()
        self._topic = TOPIC.format(dev=self.name)

    @property
    def done(self) -> bool:
        return self.acked >= self.count

    def readable(self, now: int) -> None:
        try:
            data = os.read(self.master, len(self._rx))
        except (BlockingIOError, OSError):
            return  # nothing yet, or the bridge has not opened the port (EIO)
        self.link.feed(data, now)

    def tend(self, now: int) -> int:
        """Take what the link received, send what is due; -> ms until this board next needs tending."""
        link = self.link
        buf = self._rx
        while n := link.readinto(frame.CONTROL, buf):
            for byte in buf[:n]:
                line = self._lines.push(byte)
                if line is not None and control.decode(line)[0] == control.OPENED:
                    self._out += codec.encode_connect(self.name, codec.V311, 60, True)
        while n := link.readinto(frame.MQTT, buf):
            for packet in self._decoder.packets(buf[:n]):
                if packet.type == codec.CONNACK:
                    self.connected = True
                    self._next_at = now
                elif packet.type == codec.PUBACK:
                    self.acked += 1
        if link.up and not self._opened:
            self._opened = link.send(frame.CONTROL, control.encode(control.OPEN)) > 0
        wait = self.interval_ms
        if self.connected and self.sent < self.count:
            late = now - self._next_at
            if late >= 0:
                self._publish(now)
                self._next_at += self.interval_ms
                late -= self.interval_ms
            wait = max(0, -late)
        while self._out and (n := link.send(frame.MQTT, self._out)):
            del self._out[:n]
        while (chunk := link.poll(now)) is not None:
            try:
                os.write(self.master, chunk)
            except (BlockingIOError, OSError):
                break  # the pty is full, or nobody has the port open yet: the link retransmits
        wake = link.next_wakeup(now)
        return min(wait, wake) if wake >= 0 else wait

    def _publish(self, now: int) -> None:
        body = {"dev": self.name, "boot": 1, "seq": self.sent, "t": now, "reading": 20.0, "pad": "x" * self.pad}
        self._out += codec.encode_publish(self._topic, json.dumps(body).encode(), 1, self.sent % 65535 + 1)
        self.sent += 1

    def close(self) -> None:
        for fd in (self.master, self._slave):
            try:
                os.close(fd)
            except OSError:
                pass


class Fleet:
    """Synthetic boards served by one loop (run(), in the caller's thread)."""

    def __init__(self, boards: int, baud: int = 115200, interval_ms: int = 200, count: int = 100, tag: str = "syn"):
        self.boards = [SyntheticBoard(f"{tag}{i:03d}", baud, interval_ms, count) for i in range(boards)]
        self._selector = selectors.DefaultSelector()
        for board in self.boards:
            self._selector.register(board.master, selectors.EVENT_READ, board)
        self._due = dict.fromkeys(self.boards, 0)  # when each board next needs tending (ms)

    @property
    def ports(self) -> dict[str, str]:
        return {b.name: b.port for b in self.boards}

    def run(self, deadline_s: float) -> bool:
        """Serve every board until all of them have their messages acknowledged (True) or the deadline passes."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            self._turn()
            if all(b.done for b in self.boards):
                return True
        return False

    def linger(self, seconds: float) -> None:
        """Go on serving the boards' links (acks, nothing new to publish) for `seconds`: a board that stopped
        reading while its peer still had frames in flight would make the peer time out and send them again."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._turn()

    def _turn(self) -> None:
        """One round: read what the ports have, then tend the boards that are due."""
        now = now_ms()
        soonest = min(self._due.values())
        for key, _ in self._selector.select(max(0, soonest - now) / 1000 if soonest > now else 0):
            board = key.data
            board.readable(now_ms())
            self._due[board] = 0
        now = now_ms()
        for board, at in self._due.items():
            if at <= now:
                self._due[board] = now + max(1, board.tend(now))

    def close(self) -> None:
        self._selector.close()
        for board in self.boards:
            board.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--boards", type=int, default=8)
    parser.add_argument("--baud", type=int, default=115200)
    parser.add_argument("--interval-ms", type=int, default=200)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=3600)
    args = parser.parse_args()
    fleet = Fleet(args.boards, args.baud, args.interval_ms, args.count)
    print(" ".join(f"--port {name}={path}" for name, path in fleet.ports.items()), flush=True)
    try:
        fleet.run(args.seconds)
    except KeyboardInterrupt:
        pass
    finally:
        fleet.close()


if __name__ == "__main__":
    main()
