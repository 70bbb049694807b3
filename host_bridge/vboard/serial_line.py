"""The virtual board's UART: a pseudo-terminal pair relayed to a host-side pty, paced to a baud rate (8N1: ten bit
times per byte) and, when asked, noisy (flipped bits, dropped and inserted bytes), and unpluggable like a USB
serial adapter."""

from __future__ import annotations

import os
import pty
import random
import select
import threading
import time
import tty
from dataclasses import dataclass
from pathlib import Path


@dataclass
class LineFaults:
    """What the emulated serial line does to bytes in flight, per direction."""

    baud: int = 0  # 0: no pacing
    bit_error_rate: float = 0.0
    drop_rate: float = 0.0  # probability that a byte is lost
    garbage_rate: float = 0.0  # probability that a random byte is inserted before a byte
    seed: int = 0


# Behind schedule by more than this, the line was idle rather than late.
_IDLE_S = 0.05


class _Direction(threading.Thread):
    """Copies bytes from one pty master to another, paced at baud/10 bytes per second (8N1: ten bit times
    per byte) and with the configured faults."""

    def __init__(self, src: int, dst: int, faults: LineFaults, seed: int, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.src, self.dst, self.stop = src, dst, stop
        self.rng = random.Random(seed)
        self.due = 0.0
        self.bytes_moved = 0
        self.set_faults(faults)

    def set_faults(self, faults: LineFaults) -> None:
        self.faults = faults
        self.rate = faults.baud / 10.0
        # Probability that a byte has at least one flipped bit.
        self.p_flip = 1.0 - (1.0 - faults.bit_error_rate) ** 8

    def run(self) -> None:
        while not self.stop.is_set():
            src = self.src
            if src < 0:  # unplugged: nothing comes from the host side
                self.stop.wait(0.05)
                continue
            try:
                ready, _, _ = select.select([src], [], [], 0.05)
                if not ready:
                    continue
                data = os.read(src, 4096)
            except (OSError, ValueError):
                continue  # the host side is being unplugged or replugged
            if data:
                self._send(self._damage(data))

    def _damage(self, data: bytes) -> bytes:
        f = self.faults
        if not (self.p_flip or f.drop_rate or f.garbage_rate):
            return data
        out = bytearray()
        for byte in data:
            if f.garbage_rate and self.rng.random() < f.garbage_rate:
                out.append(self.rng.randrange(256))
            if f.drop_rate and self.rng.random() < f.drop_rate:
                continue
            if self.p_flip and self.rng.random() < self.p_flip:
                byte ^= 1 << self.rng.randrange(8)
            out.append(byte)
        return bytes(out)

    def _send(self, data: bytes) -> None:
        if not self.rate:
            self._write(data)
            return
        # Bytes leave in slices of about 5 ms of line time, each written when its last bit would arrive. A sleep
        # that wakes late (a loaded host) is caught up on the next slices, so the rate holds over a burst; only a
        # line idle for longer than a few slices starts afresh (an idle line gives no credit).
        step = max(1, int(self.rate / 200))
        for i in range(0, len(data), step):
            piece = data[i : i + step]
            now = time.monotonic()
            if now - self.due > _IDLE_S:
                self.due = now
            self.due += len(piece) / self.rate
            delay = self.due - now
            if delay > 0:
                time.sleep(delay)
            self._write(piece)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self.dst < 0:
                return  # unplugged: what the board sends is lost, as on a pulled cable
            try:
                n = os.write(self.dst, view)
            except BlockingIOError:
                select.select([], [self.dst], [], 0.05)
                continue
            except OSError:
                return
            view = view[n:]
            self.bytes_moved += n


class SerialLine:
    """Two pty pairs and a relay: the board opens `board_path`, the host opens `host_path`. With `link`, the
    host end is also reachable by that fixed path (a symlink, as /dev/serial/by-id gives a real adapter), which
    unplug() removes and replug() brings back on a new pty, as a USB serial adapter that is pulled out and
    plugged in again."""

    def __init__(self, faults: LineFaults, link: Path | None = None) -> None:
        self.faults = faults
        self.link = link
        self._board_master, self._board_slave = pty.openpty()
        tty.setraw(self._board_slave)
        self.board_path = os.ttyname(self._board_slave)
        self._host_master, self._host_slave = self._open_host()
        self._stop = threading.Event()
        self.to_host = _Direction(self._board_master, self._host_master, faults, faults.seed * 2 + 1, self._stop)
        self.to_board = _Direction(self._host_master, self._board_master, faults, faults.seed * 2 + 2, self._stop)
        self.to_host.start()
        self.to_board.start()

    def _open_host(self) -> tuple[int, int]:
        master, slave = pty.openpty()
        tty.setraw(slave)
        self.host_path = os.ttyname(slave)
        if self.link is not None:
            tmp = self.link.with_name(self.link.name + ".new")
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(self.host_path)
            tmp.replace(self.link)
        return master, slave

    def set_faults(self, faults: LineFaults) -> None:
        """What the line does to bytes from now on (both directions)."""
        self.faults = faults
        self.to_host.set_faults(faults)
        self.to_board.set_faults(faults)

    def unplug(self) -> None:
        """The host end disappears: its device node goes, the host's open port fails."""
        self.to_host.dst = self.to_board.src = -1
        if self.link is not None:
            self.link.unlink(missing_ok=True)
        for fd in (self._host_master, self._host_slave):
            os.close(fd)

    def replug(self) -> None:
        self._host_master, self._host_slave = self._open_host()
        self.to_host.dst = self.to_board.src = self._host_master

    def close(self) -> None:
        self._stop.set()
        self.to_host.join(1)
        self.to_board.join(1)
        # The link before the ptys: once they are closed, their numbers go to the next pty opened on this
        # machine, which a host still looking for this port (a bridge reopening it) would find through a link
        # left behind.
        if self.link is not None:
            self.link.unlink(missing_ok=True)
        for fd in (self._board_master, self._board_slave, self._host_master, self._host_slave):
            try:
                os.close(fd)
            except OSError:
                pass
