# The ring journal's boot half (RingJournal.open calls it): reading the sectors' headers, replaying the records to
# the owner, sealing a head a power cut tore, finishing an interrupted reclaim. It runs once per boot, so the ring
# loads it for that and drops it after: on a deployed board (.mpy files in the filesystem) a module's code holds
# the heap for as long as it is loaded. The sector layout and the records are journal_ring.py's and
# journal_record.py's (docs/journal.md).

from dmqtt.journal_ring import ERASED, PAD, SECTOR


def open_ring(ring, owner):
    """RingJournal.open: every sector's header read, the records replayed to the owner in age order, a torn
    head sealed, a reclaim a power cut interrupted finished."""
    ring._owner = owner
    foreign = 0
    for i in range(ring._count):
        ring._read(i, ring._hdr, 0)
        seq = ring._header_seq(ring._hdr)
        ring._seq[i] = seq
        if not seq and ring._hdr[0] != ERASED:
            foreign += 1  # torn, interrupted erase, or not ours: reinitialised when the ring reaches it
    if foreign:
        ring.notes.append("journal: %d sector(s) without a valid header will be erased before use" % foreign)
    i = ring._after(0)
    while i >= 0:
        end, clean = ring._replay_sector(i, owner.replay)
        younger = ring._after(ring._seq[i])
        if younger < 0:
            ring._head = i
            ring._offset = end
            if not clean:
                ring.notes.append("journal: torn record at sector %d offset %d ignored" % (i, end))
                ring._offset = _seal_torn(ring, i, end)
        elif not clean:
            # Only the head can end in a torn record (a cut mid-program); elsewhere the flash was damaged.
            ring.notes.append(
                "journal: damaged record at 0x%x; the rest of sector %d skipped"
                " (its flows resume from older copies or are lost)" % (i * SECTOR + end, i)
            )
        i = younger
    if not ring._free():
        ring._reclaim_oldest()  # a power cut interrupted a reclaim: finish it before anything is written


def _seal_torn(ring, sector, start):
    """Program the torn bytes from `start` to the last non-erased byte of the head sector to 0x00 (padding,
    which replay skips), so that appends can continue after them. Clearing bits is always allowed on NOR
    flash, and sealing again after a cut during the seal only clears more: it is idempotent."""
    chunk = len(ring._rbuf)
    last = start - 1
    off = start
    while off < SECTOR:
        n = min(chunk, SECTOR - off)
        view = ring._rmv[:n]
        ring._read(sector, view, off)
        for k in range(n - 1, -1, -1):
            if view[k] != ERASED:
                last = off + k
                break
        off += n
    off = start
    while off <= last:
        n = min(chunk, last + 1 - off)
        for k in range(n):
            ring._rbuf[k] = PAD
        ring._write(sector, ring._rmv[:n], off)
        off += n
    return last + 1
