"""An in-memory NOR flash partition with esp32.Partition's block interface, for fast journal tests on CPython:
program clears bits only (violations raise), erase sets a sector to 0xFF, and a power cut can be armed at the
Nth program/erase, leaving that operation half done (a program: an arbitrary subset of the bits it was
clearing; an erase: part of the sector) and raising PowerCut."""

from __future__ import annotations

import random

SECTOR = 4096


class PowerCut(Exception):
    pass


class NorPartition:
    def __init__(self, sectors: int, seed: int = 0) -> None:
        self.data = bytearray(b"\xff" * (sectors * SECTOR))
        self.sectors = sectors
        self.ops = 0
        self.cut_at = 0
        self.rng = random.Random(seed)
        self.bytes_programmed = 0
        self.erases = 0
        # What the cut landed in: ("program", its first byte: a record's type), ("erase", -1), ("work", -1).
        self.cut_op: tuple[str, int] | None = None

    def readblocks(self, block: int, buf: bytearray | memoryview, offset: int = 0) -> None:
        start = block * SECTOR + offset
        assert 0 <= start and start + len(buf) <= len(self.data)
        buf[:] = self.data[start : start + len(buf)]

    def writeblocks(self, block: int, buf: bytes | memoryview, offset: int | None = None) -> None:
        assert offset is not None, "the journal must use the extended interface (program only)"
        start = block * SECTOR + offset
        data = bytes(buf)
        assert start + len(data) <= (block + 1) * SECTOR or len(data) <= SECTOR
        self._tick()
        if self.ops == self.cut_at:
            # Cut short: each bit the program was clearing is cleared or not, at random (a page's cells are
            # programmed in parallel, so what is left is no clean prefix).
            old = self.data[start : start + len(data)]
            torn = bytes(o & ~((o & ~v) & self.rng.getrandbits(8)) & 0xFF for o, v in zip(old, data, strict=True))
            self._program(start, torn)
            self.cut_op = ("program", data[0] if data else -1)
            raise PowerCut(f"program of {len(data)} at {start} torn")
        self._program(start, data)

    def _program(self, start: int, data: bytes) -> None:
        for i, value in enumerate(data):
            old = self.data[start + i]
            if old & value != value:
                raise AssertionError(f"program over non-erased byte at {start + i}")
            self.data[start + i] = value
        self.bytes_programmed += len(data)

    def ioctl(self, op: int, arg: int) -> int:
        if op == 4:
            return self.sectors
        if op == 5:
            return SECTOR
        if op == 6:
            self._tick()
            start = arg * SECTOR
            if self.ops == self.cut_at:
                done = self.rng.randrange(SECTOR)
                self.data[start : start + done] = b"\xff" * done
                self.cut_op = ("erase", -1)
                raise PowerCut(f"erase of sector {arg}, {done} done")
            self.data[start : start + SECTOR] = b"\xff" * SECTOR
            self.erases += 1
        return 0

    def work(self, what: str) -> None:
        """An operation of the application's own (a handler writing its effect): counted, and cut like one."""
        self._tick()
        if self.ops == self.cut_at:
            self.cut_op = ("work", -1)
            raise PowerCut(what)

    def _tick(self) -> None:
        self.ops += 1
