# The ring journal's head as a sampling wake sees it (docs/low-power.md, "A sampling wake"): one PUB record
# appended where a hint says the head ends, checked against the flash first. The hint is the journal's position
# and the session's counters as the last wake left them (kept in RTC memory by sampler.py); it is never the
# truth: the check reads the head's header (byte for byte what the hint holds), the record that ends where the
# hint says the head ends (its CRC), and the span the new record will take (erased), and a wake whose check
# fails opens the whole journal instead (dmqtt/journal_ring.py), which replays, seals a torn record and appends
# there. That catches what a reset that keeps RTC memory (a watchdog, a panic, a brown-out) leaves half written,
# and a hint that the application's own RTC writes spoiled.
#
# A second writer of PUB records (journal_record.py owns the layout, docs/journal.md specifies it): the record is
# framed here so that a sampling wake loads this module and not the journal's modules, and
# tests/unit/dmqtt/test_ring_tail.py holds it to Session.accept()'s record byte for byte. hint() reads the ring's
# and the session's private state: a method on RingJournal and Session would be heap on every ring board, for a
# hint made only when a batching board goes to sleep.

import struct
from binascii import crc32, hexlify, unhexlify

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


_SECTOR_SIZE = const(4096)
_SECTOR_HEADER = const(16)
_ERASED = const(0xFF)
_PUB = const(1)  # journal_record.PUB
_OVERHEAD = const(7)  # journal_record.OVERHEAD: type u8, length u16, body, CRC-32
_PUB_HEADER = const(13)  # journal_record.PUB_HEADER: pid u16, flags u8, serial u32, mark u32, topic length u16

# The hint: a list, in this order (RTC memory holds it as JSON; docs/low-power.md).
_SECTOR = const(0)  # the head sector
_HEADER = const(1)  # its header, hex: the head has not been reclaimed and opened again since
_OFFSET = const(2)  # where the next record goes in it
_PREV = const(3)  # where the record before that starts (it ends at OFFSET)
_NEXT_PID = const(4)  # the session's last packet id handed out
_FREE_PIDS = const(5)  # how many ids after it are known free (Session.allocate_pid's run)
_SERIAL = const(6)  # the last acceptance serial
_MARK = const(7)  # the application's progress mark
_BUSY = const(8)  # slots holding a flow (Session.outstanding())
_FIRST = const(9)  # the sequence number of the oldest sector holding a live record (board_open.resume)


def hint(session):
    """The hint for the next sampling wake, from a session whose journal is the ring, or None (the file journal,
    records staged by group commit, a head ending in sealed padding): that wake opens the whole journal."""
    ring = session.journal
    head = getattr(ring, "_head", -1)
    if head < 0 or ring._staged:
        return None
    off = prev = _SECTOR_HEADER
    while off < ring._offset:
        n = ring._read_at(head, off, _SECTOR_SIZE - off)
        if n < 0:
            return None  # padding sealed over a torn record: the whole open knows what to do with it
        prev = off
        off += n + _OVERHEAD
    if off != ring._offset or prev == off:
        return None
    ring._read(head, ring._hdr, 0)
    free = session._free_pids if session.next_pid == session._free_after else 0
    first = ring._after(0)
    while first != head and not session.holds(first * _SECTOR_SIZE, (first + 1) * _SECTOR_SIZE):
        first = ring._after(ring._seq[first])
    return [head, hexlify(ring._hdr).decode(), off, prev, session.next_pid, free, session.serial, session.mark,
            session.outstanding(), ring._seq[first]]  # fmt: skip


def append(part, hint, slots, topic, payload, qos):
    """Journal a QoS 1/2 message at the head the hint names, as Session.accept() would (the next packet id, serial
    and mark), and move the hint on; returns the messages now in flight. With nothing written, and the caller to
    open the whole journal: -1 when the flash does not say what the hint says; 0 when the record does not fit in
    the head (a new head is the whole journal's to open), or no slot or known-free packet id is left."""
    sector, offset, prev = hint[_SECTOR], hint[_OFFSET], hint[_PREV]
    if hint[_BUSY] >= slots or not hint[_FREE_PIDS] or prev < _SECTOR_HEADER:
        return 0
    tlen = len(topic)
    n = _PUB_HEADER + tlen + len(payload)
    total = n + _OVERHEAD
    if offset + total > _SECTOR_SIZE:
        return 0  # a new head: its header, snapshot and maybe a reclaim are the whole journal's to write
    buf = bytearray(max(total, offset - prev, _SECTOR_HEADER))
    view = memoryview(buf)
    part.readblocks(sector, view[:_SECTOR_HEADER], 0)
    if view[:_SECTOR_HEADER] != unhexlify(hint[_HEADER]):
        return -1
    # The record before the tail: whole, and ending exactly there.
    size = offset - prev
    part.readblocks(sector, view[:size], prev)
    whole = crc32(view[: size - 4]) == struct.unpack_from(">I", buf, size - 4)[0]
    if ((buf[1] << 8) | buf[2]) + _OVERHEAD != size or not whole:
        return -1
    # The span the new record takes: erased. A program a reset cut short leaves bits cleared anywhere in it.
    part.readblocks(sector, view[:total], offset)
    for i in range(total):
        if buf[i] != _ERASED:
            return -1
    pid = hint[_NEXT_PID] % 0xFFFF + 1  # never 0: after 65535 comes 1 [MQTT-2.3.1-1]
    buf[0] = _PUB
    struct.pack_into(">HHBIIH", buf, 1, n, pid, qos, hint[_SERIAL] + 1, hint[_MARK] + 1, tlen)
    buf[3 + _PUB_HEADER : 3 + _PUB_HEADER + tlen] = topic
    buf[3 + _PUB_HEADER + tlen : 3 + n] = payload
    struct.pack_into(">I", buf, 3 + n, crc32(view[: 3 + n]))
    part.writeblocks(sector, view[:total], offset)  # the durability point: NOR flash has no write cache
    hint[_OFFSET] = offset + total
    hint[_PREV] = offset
    hint[_NEXT_PID] = pid
    hint[_FREE_PIDS] -= 1
    hint[_SERIAL] += 1
    hint[_MARK] += 1
    hint[_BUSY] += 1
    return hint[_BUSY]
