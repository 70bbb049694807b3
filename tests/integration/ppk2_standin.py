"""A Nordic Power Profiler Kit II on a pseudo-terminal, for `host-bridge charge` without the kit: it answers the
metadata request with a calibration, and between AVERAGE_START and AVERAGE_STOP plays a current trace as the
kit's 4-byte samples (the ADC value in bits 0-13, its range in bits 14-16), as fast as they are read: the tool
counts samples at the kit's 100 kHz, not the host's time."""

from __future__ import annotations

import os
import pty
import select
import struct
import threading
import tty
from collections.abc import Iterator

GET_META_DATA, AVERAGE_START, AVERAGE_STOP = 0x19, 0x06, 0x07
RATE_HZ = 100_000
RESISTORS = (1031.64, 101.65, 10.15, 0.94, 0.043)  # ohms, ranges 0-4, as a calibration gives them
ADC_VOLTS_PER_COUNT = 1.8 / 163840  # the kit's ADC, per count of the 16-bit value (the 14 bits times 4)
# The calibration: a linear one (no second-order gain, no offsets), so that a sample's current is exactly its
# ADC value over its range's resistor.
LINEAR = (("GS", 0), ("GI", 1), ("O", 0), ("S", 0), ("I", 0), ("UG", 1))
METADATA = (
    "Calibrated: 0\n"
    + "".join(f"R{i}: {r}\n" for i, r in enumerate(RESISTORS))
    + "".join(f"{k}{i}: {v}\n" for k, v in LINEAR for i in range(5))
    + "HW: 9173\nIA: 56\nEND\n"
)


def sample(ua: float) -> bytes:
    """One sample of `ua` microamperes, in the lowest range that holds it."""
    for rng, ohms in enumerate(RESISTORS):
        counts = round(ua * 1e-6 * ohms / ADC_VOLTS_PER_COUNT / 4)
        if counts < 1 << 14:
            return struct.pack("<I", counts | rng << 14)
    raise ValueError(f"{ua} uA is more than the kit measures")


def samples(trace: list[tuple[float, float]]) -> Iterator[bytes]:
    """(seconds, microamperes) segments as the kit's sample stream, a segment at a time."""
    for seconds, ua in trace:
        yield sample(ua) * round(seconds * RATE_HZ)


class StandInPpk2:
    """The kit on a pty: `path` is what the tool opens."""

    def __init__(self, trace: list[tuple[float, float]], answers: bool = True) -> None:
        self._master, slave = pty.openpty()
        tty.setraw(slave)
        self.path = os.ttyname(slave)
        self._slave = slave
        self._trace = trace
        self._answers = answers
        self._stop = threading.Event()
        self.commands: list[int] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        playing: Iterator[bytes] | None = None
        pending = b""
        while not self._stop.is_set():
            writable = [self._master] if playing is not None or pending else []
            ready_r, ready_w, _ = select.select([self._master], writable, [], 0.05)
            if ready_r:
                try:
                    got = os.read(self._master, 64)
                except OSError:
                    return
                self.commands.extend(got)
                if self._answers and GET_META_DATA in got:
                    pending += METADATA.encode()
                if AVERAGE_START in got:
                    playing = samples(self._trace)
                if AVERAGE_STOP in got:
                    playing = None
            if ready_w:
                if not pending and playing is not None:
                    pending = next(playing, b"")
                    if not pending:
                        playing = None
                if pending:
                    try:
                        sent = os.write(self._master, pending[:4096])
                    except OSError:
                        return
                    pending = pending[sent:]

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        os.close(self._master)
        os.close(self._slave)
