"""End-to-end confirmation, the recorder's half (docs/confirmation.md specifies the message): per board, per
boot, which messages the store holds durably, so that the board can send again what a broker lost after
acknowledging it. The board's half is firmware/dmqtt/confirm.py.

`Ledger` is what the recorder knows: per device and boot, the first seq not yet stored (every one below it is)
and the stored seqs above it; what it last told the board (so that a message it reported missing and then got is
counted as repaired); which devices have news. Its state outlives the recorder's restarts in the write-ahead
log's header (host_bridge/recorder/store.py)."""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field
from typing import Any

from dmqtt_telemetry.promises import missing_ranges

VERSION = 1
BOOTS_LISTED = 8  # boots of a device in one confirmation (a board maps 16): those with news first, then the newest
RANGES_LISTED = 4  # missing ranges listed per boot (the lowest first; the next confirmation lists the rest)
BOOTS_KEPT = 16  # boots remembered per device (as many as a board maps): an older boot's re-send is stored again
_HEADER = struct.Struct(">BIB")
_ENTRY = struct.Struct(">IIIB")
_RANGE = struct.Struct(">II")


@dataclass
class BootLedger:
    """One boot of one device: seqs below `stored` are all in the store; `above` holds the stored ones above it.
    `told`: the `top` of the last confirmation sent for this boot (a seq below it that arrives later was missing
    when the board was told)."""

    stored: int = 0
    above: set[int] = field(default_factory=set)
    told: int = 0

    @property
    def top(self) -> int:
        """One past the highest stored seq."""
        return max(self.above) + 1 if self.above else self.stored

    def has(self, seq: int) -> bool:
        return seq < self.stored or seq in self.above

    def add(self, seq: int) -> None:
        if seq == self.stored:
            self.stored += 1
            while self.stored in self.above:
                self.above.discard(self.stored)
                self.stored += 1
        elif seq > self.stored:
            self.above.add(seq)

    def missing(self, limit: int = RANGES_LISTED) -> list[tuple[int, int]]:
        """The first `limit` ranges of seqs missing below the top, as (first, last)."""
        return missing_ranges(sorted(self.above), self.stored, limit)


@dataclass(frozen=True)
class Entry:
    """One boot in a confirmation."""

    boot: int
    stored: int
    top: int
    missing: tuple[tuple[int, int], ...] = ()


def encode(stamp: int, entries: list[Entry]) -> bytes:
    """A confirmation message (docs/confirmation.md): version, stamp, then per boot its counts and gaps."""
    out = bytearray(_HEADER.pack(VERSION, stamp & 0xFFFFFFFF, len(entries)))
    for e in entries:
        out += _ENTRY.pack(e.boot, e.stored, e.top, len(e.missing))
        for first, last in e.missing:
            out += _RANGE.pack(first, last)
    return bytes(out)


def decode(data: bytes) -> tuple[int, list[Entry]]:
    """The stamp and entries of a confirmation; ValueError when it is not one."""
    try:
        version, stamp, count = _HEADER.unpack_from(data, 0)
        if version != VERSION:
            raise ValueError(f"confirmation version {version}")
        off = _HEADER.size
        entries = []
        for _ in range(count):
            boot, stored, top, n = _ENTRY.unpack_from(data, off)
            off += _ENTRY.size
            ranges = tuple(_RANGE.unpack_from(data, off + _RANGE.size * k) for k in range(n))
            off += _RANGE.size * n
            entries.append(Entry(boot, stored, top, ranges))
    except struct.error as exc:
        raise ValueError(f"a truncated confirmation: {exc}") from None
    if off != len(data):
        raise ValueError(f"{len(data) - off} bytes after the confirmation")
    return stamp, entries


def stamp_now() -> int:
    """A confirmation's stamp: the recorder's clock in tenths of a second, modulo 2^32 (a board compares stamps
    by serial-number arithmetic: newer within 6.8 years). The wall clock rather than a counter, so that a new
    recorder (another output folder) is newer than the one before it."""
    return int(time.time() * 10) & 0xFFFFFFFF


class Ledger:
    """What the recorder has stored, per device and boot, and which devices are owed a confirmation."""

    def __init__(self) -> None:
        self.devices: dict[str, dict[int, BootLedger]] = {}
        self.dirty: set[str] = set()
        self.news: dict[str, set[int]] = {}  # per device, the boots stored into since its last confirmation
        self.turn: dict[str, int] = {}  # per device, the older boot listed last in turn
        self.heard: dict[str, float] = {}  # per device, when it last had news (time.monotonic())

    def stored(self, dev: str, boot: int, seq: int, redelivered: bool = False) -> tuple[bool, bool]:
        """Note a delivery of (dev, boot, seq) -> (already stored: a re-send, repaired: stored now after the board
        was told it was missing). `redelivered`: the broker's own retransmission to the recorder (DUP set: the
        broker sets it on its outgoing PUBLISH independently of the incoming one [MQTT-3.3.1-3]); a copy of a
        stored message that the broker sends again after the recorder reconnected is no news from the board, so
        it does not take one of the few places in a confirmation from the boots a board is asking about."""
        boots = self.devices.setdefault(dev, {})
        book = boots.get(boot)
        if book is None:
            if boots and boot < min(boots) and len(boots) >= BOOTS_KEPT:
                return False, False  # older than every boot kept: stored, neither deduplicated nor confirmed
            book = boots[boot] = BootLedger()
            while len(boots) > BOOTS_KEPT:
                del boots[min(boots)]
        if book.has(seq):
            if not redelivered:
                self._news(dev, boot)  # the board sends it again: it did not have the last confirmation
            return True, False
        self._news(dev, boot)
        book.add(seq)
        return False, seq < book.told

    def _news(self, dev: str, boot: int) -> None:
        self.dirty.add(dev)
        self.heard[dev] = time.monotonic()
        self.news.setdefault(dev, set()).add(boot)

    def recent(self, seconds: float) -> set[str]:
        """The devices that had news within the last `seconds`."""
        since = time.monotonic() - seconds
        return {dev for dev, at in self.heard.items() if at >= since}

    def confirmation(self, dev: str, stamp: int) -> bytes:
        """The confirmation for `dev`, noting what it tells, BOOTS_LISTED boots in all: those with news, oldest
        first (a board's confirmed point waits on its oldest unconfirmed boot, and a board that sends a boot's
        messages again is asking about it); then those with a gap, oldest first (what the board must send
        again, however long ago); then the newest but one place, which goes to the older boots in turn."""
        boots = self.devices.get(dev, {})
        news = sorted(b for b in self.news.pop(dev, set()) if b in boots)
        if len(news) > BOOTS_LISTED:  # the rest go in the next one
            self.news[dev] = set(news[BOOTS_LISTED:])
            self.dirty.add(dev)
        listed = set(news[:BOOTS_LISTED])
        gaps = sorted(b for b, book in boots.items() if book.above)
        newest = sorted(boots, reverse=True)
        self._fill(listed, [*gaps, *newest[: BOOTS_LISTED - 2]])
        # One older boot in turn, of those not listed already: a board whose confirmed point waits at a boot the
        # recorder would not list otherwise (confirmed whole while an older one held it back, then forgotten in
        # a reboot) hears of it in a few confirmations, whichever boot it is.
        older = [b for b in sorted(boots) if b not in listed]
        turn = [b for b in older if b > self.turn.get(dev, -1)] or older
        if turn and len(listed) < BOOTS_LISTED:
            self.turn[dev] = turn[0]
            listed.add(turn[0])
        self._fill(listed, newest)
        entries = []
        for boot in sorted(listed):
            book = boots[boot]
            book.told = max(book.told, book.top)
            entries.append(Entry(boot, book.stored, book.top, tuple(book.missing())))
        return encode(stamp, entries)

    @staticmethod
    def _fill(listed: set[int], boots: list[int]) -> None:
        """Add `boots` to `listed`, in order, while a confirmation has room."""
        for boot in boots:
            if len(listed) == BOOTS_LISTED:
                return
            listed.add(boot)

    def snapshot(self) -> dict[str, Any]:
        return {
            dev: {str(boot): [b.stored, sorted(b.above), b.told] for boot, b in boots.items()}
            for dev, boots in self.devices.items()
        }

    @classmethod
    def restore(cls, state: dict[str, Any]) -> Ledger:
        ledger = cls()
        for dev, boots in state.items():
            ledger.devices[dev] = {int(boot): BootLedger(v[0], set(v[1]), v[2]) for boot, v in boots.items()}
        return ledger
