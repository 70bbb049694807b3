"""The virtual board's flash: an image file of NOR flash (erased bytes read 0xFF), the counters the emulation
keeps beside it (FLASH.stats, per partition, surviving power cuts), and the lock that gives one flash file one
board (FLASH.owner names the holder)."""

from __future__ import annotations

import argparse
import fcntl
import os
import struct
import sys
from pathlib import Path

from host_bridge.boards.definition import SECTOR, Partition
from host_bridge.errors import VBoardError

COUNTERS = ("blocks_read", "bytes_programmed", "program_ops", "blocks_erased", "program_violations")


def create_flash(path: Path, size: int) -> None:
    """A new, fully erased flash image (NOR flash reads 0xFF when erased)."""
    if size % SECTOR:
        raise VBoardError(f"flash size {size} is not a multiple of {SECTOR}")
    with open(path, "wb") as f:
        chunk = b"\xff" * (1 << 16)
        for _ in range(size // len(chunk)):
            f.write(chunk)
        f.write(b"\xff" * (size % len(chunk)))


def extend_flash(path: Path, size: int) -> None:
    """`size` erased bytes more at the end of a flash image."""
    with open(path, "ab") as f:
        f.write(b"\xff" * size)


def stats_path(flash: Path) -> Path:
    return flash.with_name(flash.name + ".stats")


def read_stats(flash: Path, partitions: list[Partition]) -> dict[str, dict[str, int]]:
    """Flash counters per partition, as the board wrote them (they survive a power cut)."""
    raw = stats_path(flash).read_bytes() if stats_path(flash).exists() else b""
    out: dict[str, dict[str, int]] = {}
    width = 4 * len(COUNTERS)
    for i, part in enumerate(partitions):
        chunk = raw[i * width : (i + 1) * width]
        values = struct.unpack("<5I", chunk) if len(chunk) == width else (0,) * len(COUNTERS)
        out[part.label] = dict(zip(COUNTERS, values, strict=False))
    return out


def parse_size(text: str) -> int:
    """Bytes from "4096", "110k" or "4M"; ValueError saying what a size looks like for anything else."""
    units = {"k": 1024, "m": 1024 * 1024}
    value = text.strip().lower()
    scale = units.get(value[-1:], 1)
    digits = value[:-1] if scale != 1 else value
    if not digits.isdigit() or int(digits) == 0:
        raise ValueError(f"{text!r} is not a size: give bytes, or a number with k or M (110k, 4M)")
    return int(digits) * scale


def size_argument(text: str) -> str:
    """An argparse type for a size: the text as given, once it reads as one (the board takes sizes as text)."""
    try:
        parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


class FlashLock:
    """The exclusive lock on a flash file: one board per flash, as one flash chip has one ESP32.

    flock() locks belong to the open file description, so the descriptor held here is also passed to each boot's
    process: the lock lasts while either the owner (the VirtualBoard) or a running board holds it. Who holds it
    is written beside the flash (FLASH.owner) so that a refusal can name the holder."""

    def __init__(self, flash: Path) -> None:
        self.flash = flash
        self.owner_path = flash.with_name(flash.name + ".owner")
        self.fd = os.open(flash, os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            holder = self.owner_path.read_text().strip() if self.owner_path.exists() else "another process"
            raise VBoardError(
                f"{flash} is in use by {holder}: one flash file has one board (two boards on one flash corrupt "
                "it); stop that board first, or give this one its own --flash"
            ) from None
        self.note(f"pid {os.getpid()} ({' '.join(sys.argv[:3])})")

    def note(self, holder: str) -> None:
        self.owner_path.write_text(holder + "\n")

    def release(self) -> None:
        if self.fd >= 0:
            self.owner_path.unlink(missing_ok=True)
            os.close(self.fd)  # the lock goes with the last descriptor: a running board still holds its copy
            self.fd = -1
