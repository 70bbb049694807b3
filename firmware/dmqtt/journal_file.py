# The journal's file backend, for boards whose partition table has no journal partition: an append-only file
# on LittleFS, compacted into a new file renamed over the old one. Same records as the ring (docs/journal.md);
# a module of its own so that boards with the ring never load it.

import os

from dmqtt.errors import JournalError
from dmqtt.journal_record import AT_ERASED, AT_TORN, FORMAT, META, OVERHEAD, Framing, known_format

if False:  # type checkers only: MicroPython has no typing module
    from typing import Any

    from dmqtt.interfaces import JournalOwner

_FILE_MAGIC = b"DMQF"


class FileJournal(Framing):
    """Append-only journal file on LittleFS, compacted into a new file renamed over the old one."""

    def __init__(self, path, record_max=1024, compact_bytes=16384):
        super().__init__(record_max)
        self.path = path
        self._tmp = path + ".tmp"
        self._compact_bytes = compact_bytes
        self._file: Any = None
        self._size = 0
        self._owner: JournalOwner = None  # type: ignore[assignment]  # the session: given to open(), before any use

    def open(self, owner):
        self._owner = owner
        try:
            os.remove(self._tmp)  # a compaction that a power cut interrupted: the old file is still whole
            self.notes.append("journal: removed an interrupted compaction")
        except OSError:
            pass
        try:
            f = open(self.path, "r+b")
        except OSError:
            f = None
        if f is not None:
            magic = f.read(8)
            if magic[:4] != _FILE_MAGIC or not known_format(magic[4]):
                f.close()
                f = None
                os.rename(self.path, self.path + ".corrupt")
                self.notes.append("journal: %s is not a journal, moved aside to .corrupt" % self.path)
        if f is None:
            self._create(self.path)
            f = open(self.path, "r+b")
        self._file = f
        end, clean = self._replay(owner.replay)
        self._size = end
        if not clean:
            self.notes.append("journal: torn record at offset %d ignored" % end)
            self.compact()  # rewrite without the torn tail, so appends land after valid records only

    def _create(self, path):
        with open(path, "wb") as f:
            f.write(_FILE_MAGIC + bytes([FORMAT, 0, 0, 0]))

    def _replay(self, visit):
        off = 8
        while True:
            n = self._read_at(off)
            if n == AT_ERASED:
                return off, True
            if n < 0:
                return off, False
            visit(self._rbuf[0], self.record[:n], off)
            off += n + OVERHEAD

    def _read_at(self, off):
        f = self._file
        f.seek(off)
        head = self._rmv[0:3]
        got = f.readinto(head)
        if not got:
            return AT_ERASED
        if got < 3:
            return AT_TORN
        n = (self._rbuf[1] << 8) | self._rbuf[2]
        if n > self.record_max:
            return AT_TORN
        if f.readinto(self._rmv[3 : n + OVERHEAD]) != n + 4:
            return AT_TORN
        return self._check(n + OVERHEAD)

    def commit(self, rtype, n, defer=False):
        total = self._seal(self._mv, rtype, n)
        if self._size + total > self._compact_bytes:
            self.compact()  # before the append: the owner has not yet recorded where this record lives
        addr = self._size
        f = self._file
        try:
            f.seek(addr)
            f.write(self._mv[:total])
            if not defer:
                f.flush()  # LittleFS commits the new size atomically here: this is the durability point
        except OSError as exc:  # a full or failing filesystem is a journal error, not a connection error
            raise JournalError("journal file write failed at %s offset %d (%s)" % (self.path, addr, exc))
        self._size += total
        return addr

    def sync(self):
        """Flush deferred records (group commit): one LittleFS commit for all of them."""
        try:
            self._file.flush()
        except OSError as exc:
            raise JournalError("journal file flush failed at %s (%s)" % (self.path, exc))

    def compact(self):
        try:
            self._compact()
        except OSError as exc:
            raise JournalError("journal file compaction failed at %s (%s)" % (self._tmp, exc))

    def _compact(self):
        self.sync()
        owner = self._owner
        self._create(self._tmp)
        out = open(self._tmp, "r+b")
        pos = 8
        off = 8
        moves = []
        while off < self._size:
            n = self._read_at(off)
            if n < 0:
                break
            if owner.is_live(self._rbuf[0], self.record[:n], off):
                out.seek(pos)
                out.write(self._rmv[: n + OVERHEAD])
                moves.append((off, pos))
                pos += n + OVERHEAD
            off += n + OVERHEAD
        # Built in the read buffer: self._buf may hold the record whose commit started this compaction.
        total = self._seal(self._rmv, META, owner.snapshot(self.record))
        out.seek(pos)
        out.write(self._rmv[:total])
        out.flush()
        out.close()
        self._file.close()
        os.rename(self._tmp, self.path)  # atomic on LittleFS: the old file or the new one, never neither
        self._file = open(self.path, "r+b")
        self._size = pos + total
        for old, new in moves:
            n = self.read(new)
            owner.moved(self.record_type, self.record[:n], old, new)

    def tend(self):
        """Idle-time work: none (LittleFS erases as it sees fit)."""

    def scan(self, visit):
        """Call visit(type, body, offset) for every valid record, oldest first."""
        self.sync()
        self._replay(visit)

    def read(self, addr):
        """As the ring's: the body's length; its type in record_type, its body at the start of record."""
        n = self._read_at(addr)
        if n < 0:
            raise JournalError("journal record at %d is unreadable" % addr)
        self.record_type = self._rbuf[0]
        return n
