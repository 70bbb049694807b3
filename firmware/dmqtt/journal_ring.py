# The ring journal: a log-structured ring on a raw flash partition (esp32.Partition, found by label), one of the
# two journal backends (docs/journal.md; dmqtt/journal.py picks one). It programs only a record's own bytes into
# erased space and erases a 4 KiB sector only when the ring comes round to it, after carrying the sector's live
# records forward. Cost per message approaches the record's size.
#
# The owner (the session) is told every valid record in log order by replay(), and is asked, when records are
# about to be erased, which ones are still live (is_live) and told where they moved (moved). Records carry a
# CRC-32: a torn record (a power cut mid-program) is detected and nothing after it in that sector is trusted.
#
# Interface: open(owner); body (memoryview to fill); commit(rtype, n) -> address; read(addr) -> the body's length,
# its type in record_type and its body at the start of record.
# The records themselves and their framing are journal_record.py's.

import struct
from array import array
from binascii import crc32

from dmqtt.errors import JournalError, QueueFull
from dmqtt.journal_record import (
    AT_ERASED,
    AT_TORN,
    FORMAT,
    META,
    META_SIZE,
    OVERHEAD,
    PID_RECORD,
    PUB,
    Framing,
    known_format,
)

if False:  # type checkers only: MicroPython has no typing module
    from typing import Any

    from dmqtt.interfaces import JournalOwner

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


_SECTOR = const(4096)
_SECTOR_HEADER = const(16)
_SECTOR_MAGIC = b"DMQJ"
_ERASED = const(0xFF)
_PAD = const(0x00)  # sealed torn bytes in the head sector: skipped one by one
_AT_PAD = const(-3)
# Room a new message must leave in the head it lands in, for the records that end flows (DONE, REL: 9 to 13
# bytes each): acknowledgements must always be writable, or a full journal could never empty.
_RESERVE = const(128)
# Group commit: at most this many bytes of records programmed at once (three records of a 100-byte message); a
# group that is larger syncs early, in more than one program, durable all the same. Half a kilobyte of heap,
# where more put group commit under the heap budget on a deployed board (docs/install-paths.md).
_STAGE = const(512)


class RingJournal(Framing):
    """Log-structured ring on a raw partition with the extended block interface (esp32.Partition)."""

    # callable(start): called before (True) and after (False) each sector erase, which stalls an ESP32 for
    # 45 ms (its flash cache is off): a serial board asks its bridge to pause meanwhile (LinkTransport.hush).
    hush = None
    # Where the last wake left the ring, set before open() by a wake that has it, or None: a function given the
    # sectors' sequence numbers (an array, by sector) that returns the number below the first sector to replay
    # (0: every sector), which dmqtt.journal.replay_from() works out from the hint. The sectors before it hold
    # only ended flows, whose state the next sector's META snapshot carries. Used once, by open().
    resume: "Any" = None

    def __init__(self, partition, record_max=1024):
        super().__init__(record_max)
        self._part = partition
        self._count = partition.ioctl(4, 0)
        if self._count < 4 or partition.ioctl(5, 0) != _SECTOR:
            raise JournalError("journal partition needs at least 4 sectors of 4096 bytes")
        # Per sector: its sequence number (0: free), and whether it is known erased since boot (no second erase
        # before use). Arrays: a 512 KiB partition has 128 sectors, and lists of them took 2 KB of heap.
        self._seq = array("I", bytes(4 * self._count))
        self._erased = bytearray(self._count)
        self._head = -1
        self._offset = _SECTOR  # write position in the head sector (_SECTOR: none open yet)
        self._hdr = bytearray(_SECTOR_HEADER)
        self._owner: JournalOwner = None  # type: ignore[assignment]  # the session: given to open(), before any use
        self._stage: Any = None  # group commit: records staged for one program, made on first use
        self._stage_mv: Any = None
        self._staged = 0
        self._last_pub = 0  # bytes of the last PUB record: tend() opens the next head when one more would not fit

    # -- flash access: a failing flash is a journal error, never mistaken for a connection error -----------

    def _failed(self, what, sector, off, exc):
        return JournalError("flash %s failed at journal offset 0x%x (%s)" % (what, sector * _SECTOR + off, exc))

    def _read(self, sector, buf, off):
        try:
            self._part.readblocks(sector, buf, off)
        except OSError as exc:
            raise self._failed("read", sector, off, exc)

    def _write(self, sector, buf, off):
        try:
            self._part.writeblocks(sector, buf, off)
        except OSError as exc:
            raise self._failed("program", sector, off, exc)

    def _erase(self, sector):
        hush = self.hush
        if hush is not None:
            hush(True)
        try:
            self._part.ioctl(6, sector)
        except OSError as exc:
            raise self._failed("erase", sector, 0, exc)
        finally:
            if hush is not None:
                hush(False)

    # -- boot ------------------------------------------------------------------------------------------------

    def open(self, owner):
        self._owner = owner
        foreign = 0
        for i in range(self._count):
            self._read(i, self._hdr, 0)
            seq = self._header_seq(self._hdr)
            self._seq[i] = seq
            if not seq and self._hdr[0] != _ERASED:
                foreign += 1  # torn, interrupted erase, or not ours: reinitialised when the ring reaches it
        if foreign:
            self.notes.append("journal: %d sector(s) without a valid header will be erased before use" % foreign)
        resume = self.resume
        self.resume = None
        i = self._after(0 if resume is None else resume(self._seq))
        while i >= 0:
            end, clean = self._replay_sector(i, owner.replay)
            younger = self._after(self._seq[i])
            if younger < 0:
                self._head = i
                self._offset = end
                if not clean:
                    self.notes.append("journal: torn record at sector %d offset %d ignored" % (i, end))
                    self._offset = self._seal_torn(i, end)
            elif not clean:
                # Only the head can end in a torn record (a cut mid-program); elsewhere the flash was damaged.
                self.notes.append(
                    "journal: damaged record at 0x%x; the rest of sector %d skipped"
                    " (its flows resume from older copies or are lost)" % (i * _SECTOR + end, i)
                )
            i = younger
        if not self._free():
            self._reclaim_oldest()  # a power cut interrupted a reclaim: finish it before anything is written

    def _seal_torn(self, sector, start):
        """Program the torn bytes from `start` to the last non-erased byte of the head sector to 0x00 (padding,
        which replay skips), so that appends can continue after them. Clearing bits is always allowed on NOR
        flash, and sealing again after a cut during the seal only clears more: it is idempotent."""
        chunk = len(self._rbuf)
        last = start - 1
        off = start
        while off < _SECTOR:
            n = min(chunk, _SECTOR - off)
            view = self._rmv[:n]
            self._read(sector, view, off)
            for k in range(n - 1, -1, -1):
                if view[k] != _ERASED:
                    last = off + k
                    break
            off += n
        off = start
        while off <= last:
            n = min(chunk, last + 1 - off)
            for k in range(n):
                self._rbuf[k] = _PAD
            self._write(sector, self._rmv[:n], off)
            off += n
        return last + 1

    def _header_seq(self, hdr):
        # The CRC first: a header torn mid-program can hold any format byte.
        if hdr[0:4] != _SECTOR_MAGIC or crc32(memoryview(hdr)[:12]) != struct.unpack_from(">I", hdr, 12)[0]:
            return 0
        if not known_format(hdr[4]):
            return 0
        return struct.unpack_from(">I", hdr, 8)[0]

    def _after(self, seq):
        """The sector next in age after sequence number `seq` (0: the oldest), -1 when none is younger. A walk
        of the ring in age order thus allocates nothing: a list of 128 sectors is 512 bytes of a chip's heap,
        which a board sending messages again from the journal would ask for at every pass."""
        found = -1
        low = 0
        for i in range(self._count):
            s = self._seq[i]
            if s > seq and (found < 0 or s < low):
                found = i
                low = s
        return found

    def _replay_sector(self, sector, visit):
        """Call visit(type, body, address) for each valid record; -> (end offset, True if it ended on erased
        flash)."""
        off = _SECTOR_HEADER
        buf = self._rbuf
        while off + OVERHEAD <= _SECTOR:
            n = self._read_at(sector, off, _SECTOR - off)
            if n == _AT_PAD:
                off += 1
                continue
            if n == AT_ERASED:
                return off, True
            if n < 0:
                return off, False  # torn: nothing after it in this sector is trusted
            visit(buf[0], self.record[:n], sector * _SECTOR + off)
            off += n + OVERHEAD
        return off, True

    def _read_at(self, sector, off, room):
        """Read the record at (sector, off) into _rbuf: its body length, or AT_TORN, AT_ERASED, _AT_PAD."""
        buf = self._rbuf
        # One read of as much as a record can take (a slice is a heap object: only where the sector ends first).
        try:
            self._part.readblocks(sector, buf if room >= len(buf) else self._rmv[:room], off)
        except OSError as exc:
            raise self._failed("read", sector, off, exc)
        if buf[0] == _PAD:
            return _AT_PAD
        if buf[0] == _ERASED and buf[1] == _ERASED and buf[2] == _ERASED:
            return AT_ERASED
        n = (buf[1] << 8) | buf[2]
        if n > self.record_max or n + OVERHEAD > room:
            return AT_TORN
        return self._check(room)

    # -- writing ---------------------------------------------------------------------------------------------

    def commit(self, rtype, n, defer=False):
        """Seal the body the owner wrote into self.body and program it; returns its address. Durable on return:
        NOR flash has no write cache, the program completes before writeblocks returns.
        defer=True (group commit) only stages the record in RAM at the address it will have; sync() programs
        every staged record in one operation. Any record committed without defer syncs first."""
        total = self._seal(self._mv, rtype, n)
        if rtype == PUB:
            # (the head has room: the common case, decided without a call)
            if self._offset + self._staged + total > _SECTOR and not self._room_for(total + self._staged):
                raise QueueFull(
                    "the journal has no room for a message of %d bytes until acknowledgements free some" % n
                )
            self._last_pub = total
        if not defer or total > _STAGE:  # (a record larger than the stage goes to flash at once: more durable)
            if self._staged:
                self.sync()
            if self._offset + total > _SECTOR:
                self._advance()
            # _append's and _write's work written out (two calls less per record): the head has room for it now.
            off = self._offset
            try:
                self._part.writeblocks(self._head, self._pid_record if total == PID_RECORD else self._mv[:total], off)
            except OSError as exc:
                raise self._failed("program", self._head, off, exc)
            self._offset = off + total
            return self._head * _SECTOR + off
        if self._stage is None:
            self._stage = bytearray(_STAGE)
            self._stage_mv = memoryview(self._stage)
        if self._staged + total > _STAGE or self._offset + self._staged + total > _SECTOR:
            self.sync()
            if self._offset + total > _SECTOR:
                self._advance()
        addr = self._head * _SECTOR + self._offset + self._staged
        self._stage_mv[self._staged : self._staged + total] = self._mv[:total]
        self._staged += total
        return addr

    def sync(self):
        """Program the staged records (group commit): the durability point of deferred commits."""
        if self._staged:
            n = self._staged
            self._staged = 0
            self._write(self._head, self._stage_mv[:n], self._offset)
            self._offset += n

    def _room_for(self, needed):
        """Whether `needed` more bytes of records fit, nothing written to find out: in the head, or in a fresh
        one. A fresh head when no other sector is free means reclaiming the oldest, whose live records (a full
        offline queue: all of them) move into it first; the message must fit beside them and the reserve."""
        if self._offset + needed <= _SECTOR or self._free() > 1:
            return True
        if self._count - self._free() < 2:
            return False
        oldest = self._after(0)
        live = 0
        off = _SECTOR_HEADER if self._owner.holds(oldest * _SECTOR, (oldest + 1) * _SECTOR) else _SECTOR
        while off + OVERHEAD <= _SECTOR:
            n = self._read_at(oldest, off, _SECTOR - off)
            if n == _AT_PAD:
                off += 1
                continue
            if n < 0:
                break
            if self._owner.is_live(self._rbuf[0], self.record[:n], oldest * _SECTOR + off):
                live += n + OVERHEAD
            off += n + OVERHEAD
        return _SECTOR_HEADER + META_SIZE + OVERHEAD + live + needed + _RESERVE <= _SECTOR

    def _append(self, record):
        if self._offset + len(record) > _SECTOR:
            raise JournalError("journal sector overflow while carrying records forward")
        addr = self._head * _SECTOR + self._offset
        self._write(self._head, record, self._offset)
        self._offset += len(record)
        return addr

    def _advance(self):
        """Open a fresh head sector. Every head starts with a META snapshot (next packet id, serial, mark), so no
        older sector is ever needed for them. When that leaves no sector free, the oldest one is reclaimed at
        once: its live records go into the fresh head, which has room for all of them (a sector's live bytes
        never exceed a sector less its own META), and it is erased; one spare is thus always free."""
        sector = self._prepare_next()
        if sector < 0:
            raise JournalError("journal partition full of live records")
        seq = max(self._seq) + 1
        self._erased[sector] = 0
        hdr = self._hdr
        hdr[0:4] = _SECTOR_MAGIC
        hdr[4] = FORMAT
        hdr[5] = hdr[6] = hdr[7] = 0
        struct.pack_into(">I", hdr, 8, seq)
        struct.pack_into(">I", hdr, 12, crc32(memoryview(hdr)[:12]))
        self._write(sector, hdr, 0)
        self._seq[sector] = seq
        self._head = sector
        self._offset = _SECTOR_HEADER
        # Built in the read buffer: self._buf may hold the owner's record whose commit opened this sector.
        total = self._seal(self._rmv, META, self._owner.snapshot(self.record))
        self._append(self._rmv[:total])
        if not self._free():
            self._reclaim_oldest()

    def _free(self):
        free = 0
        for seq in self._seq:  # array.count() is CPython-only
            if not seq:
                free += 1
        return free

    def _reclaim_oldest(self):
        """Carry the oldest sector's live records into the head, then erase it. A power cut in between leaves
        both copies; the later one wins at replay, and open() finishes the reclaim."""
        if self._count - self._free() < 2:
            raise JournalError("journal partition too small for its live records")
        oldest = self._after(0)
        owner = self._owner
        # Its records are read only if the owner may still need one: usually every flow in it ended long ago.
        off = _SECTOR_HEADER if owner.holds(oldest * _SECTOR, (oldest + 1) * _SECTOR) else _SECTOR
        while off + OVERHEAD <= _SECTOR:
            n = self._read_at(oldest, off, _SECTOR - off)
            if n == _AT_PAD:
                off += 1
                continue
            if n < 0:
                break
            old = oldest * _SECTOR + off
            body = self.record[:n]
            if owner.is_live(self._rbuf[0], body, old):
                owner.moved(self._rbuf[0], body, old, self._append(self._rmv[: n + OVERHEAD]))
            off += n + OVERHEAD
        # Its erase (tens of milliseconds) is left for tend(), off the path of the publish() that got here: until
        # then the sector is free but not erased, and _advance() erases it itself if it comes first. A power cut
        # meanwhile leaves both copies, which open() resolves as for a cut in the middle of a reclaim.
        self._seq[oldest] = 0

    def _prepare_next(self):
        """The sector the next head opens in, erased: the first free one after the head, round the ring (wear is
        spread over every sector), erased unless known erased since boot (a free sector may hold a torn header,
        old records or foreign bytes). -1 when no sector is free."""
        sector = self._head
        for _ in range(self._count):
            sector = (sector + 1) % self._count
            if not self._seq[sector]:
                if not self._erased[sector]:
                    self._erase(sector)
                    self._erased[sector] = 1
                return sector
        return -1

    def tend(self):
        """Idle-time work, so that a publish() programs its own record and nothing else. When another record the
        size of the last PUB would not fit in the head, or an empty journal has none, the next head is opened now
        (its header and META snapshot: two programs, and a reclaim if that took the last free sector), unless
        reclaiming could not make room (then publish() says QueueFull). Then the erase the head after that needs
        (45 ms on a chip, its flash cache off): never an extra one. A message the size of the last one would have
        opened the same sector at the same point, so opening early costs no erase; only an acknowledgement that
        would have fit in the old head's tail goes to the new one."""
        full = self._head < 0 or self._offset + self._last_pub > _SECTOR  # (no head yet: an empty journal)
        if full and not self._staged and self._room_for(self._last_pub):
            self._advance()
        self._prepare_next()

    def scan(self, visit):
        """Call visit(type, body, address) for every valid record, oldest first (the confirmation's re-sends
        look for messages this way; visit must not read the journal)."""
        self.sync()
        i = self._after(0)
        while i >= 0:
            self._replay_sector(i, visit)
            i = self._after(self._seq[i])

    def read(self, addr):
        """Read the record at addr: -> its body's length; its type in record_type, its body at the start of
        record (both valid until the next read)."""
        off = addr % _SECTOR
        n = self._read_at(addr // _SECTOR, off, _SECTOR - off)
        if n < 0:
            raise JournalError("journal record at 0x%x is unreadable" % addr)
        self.record_type = self._rbuf[0]
        return n
