"""Two serial-link endpoints (dlink.link.Link) over a simulated line in simulated milliseconds: paced at baud/10
bytes per millisecond, with flipped bits and dropped bytes from a seeded generator, so every figure repeats
exactly; optionally a fixed delay each way after the wire, for the hosts a real link runs through (ptys, a
UART driver, processes). The link's unit tests and tools/bench_link.py drive the link through it."""

from __future__ import annotations

import collections
import random

from dlink.link import Link


class Line:
    """A serial line between two endpoints, paced at baud/10 bytes per millisecond-step, with faults."""

    def __init__(
        self,
        a: Link,
        b: Link,
        baud: int = 115200,
        ber: float = 0.0,
        drop: float = 0.0,
        seed: int = 1,
        delay_ms: int = 0,
    ) -> None:
        self.ends = (a, b)
        self.rate = baud / 10 / 1000  # bytes per ms
        self.ber, self.drop = ber, drop
        self.rng = random.Random(seed)
        self.queues: tuple[bytearray, bytearray] = (bytearray(), bytearray())
        self.credit = [0.0, 0.0]
        self.delay_ms = delay_ms
        # Bytes off the wire, each chunk with the time it reaches the other end.
        self.in_transit: tuple[collections.deque[tuple[int, bytes]], ...] = (collections.deque(), collections.deque())
        self.now = 0

    def damage(self, data: bytes) -> bytes:
        out = bytearray()
        for byte in data:
            if self.drop and self.rng.random() < self.drop:
                continue
            for bit in range(8):
                if self.ber and self.rng.random() < self.ber:
                    byte ^= 1 << bit
            out.append(byte)
        return bytes(out)

    def step(self) -> None:
        for i, end in enumerate(self.ends):
            while len(self.queues[i]) < 64:
                chunk = end.poll(self.now)
                if chunk is None:
                    break
                self.queues[i].extend(self.damage(bytes(chunk)))
        for i in range(2):
            self.credit[i] += self.rate
            n = int(self.credit[i])
            if n and self.queues[i]:
                self.credit[i] -= n
                data = bytes(self.queues[i][:n])
                del self.queues[i][:n]
                self.in_transit[i].append((self.now + self.delay_ms, data))
            elif not self.queues[i]:
                self.credit[i] = 0.0
            transit = self.in_transit[i]
            while transit and transit[0][0] <= self.now:
                self.ends[1 - i].feed(transit.popleft()[1], self.now)
        self.now += 1

    def run(self, ms: int) -> None:
        for _ in range(ms):
            self.step()


def pump(line: Line, src: Link, dst: Link, channel: int, data: bytes, limit_ms: int) -> bytes:
    """Send data from src on a channel until dst has it all or limit_ms simulated ms pass; what dst got."""
    got = bytearray()
    buf = bytearray(512)
    sent = 0
    for _ in range(limit_ms):
        if sent < len(data):
            sent += src.send(channel, data[sent : sent + 600])
        line.step()
        while n := dst.readinto(channel, buf):
            got += buf[:n]
        if len(got) >= len(data):
            break
    return bytes(got)
