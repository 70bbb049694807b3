# The cheap wake (docs/low-power.md, "The cheap wake"): a reading journaled at a wake from deep sleep without
# opening the journal. A board that sleeps between readings and sends them in batches spends most of its wakes
# journaling one reading; opening the whole journal (replaying every sector, building the session) at each of
# them costs more than the reading. So the wake that last had the whole session (a sending wake, before its deep
# sleep: keep()) leaves a hint in RTC memory, which keeps its bytes through deep sleep: where the ring's head
# ends, and the session's counters. journal() checks the hint against the flash and programs one PUB record
# there, byte for byte what Session.accept() writes; only when the check fails, or at a power-on (RTC memory is
# lost with the power), does it open the whole journal, as the client would, and append through the session.
#
# The hint is never the truth. Before it programs anything, journal() reads the head sector's header (byte for
# byte the hint's: the sector was not reclaimed and opened again), the record that ends where the hint says the
# head ends (its length ends there and its CRC holds), and the span the new record takes (erased). That catches
# what a reset that keeps RTC memory (a watchdog, a panic, a brown-out) leaves half written, a hint the journal
# outgrew, and RTC memory an application wrote over.
#
# RTC memory (machine.RTC().memory(), 2,048 bytes on the ESP32 port), as this library lays it out:
#   byte 0       0xD0 | the client's flags (dmqtt/client.py owns them: a connection was up when the board last
#                went to sleep, that was said); another high nibble: RTC memory is not laid out by this library
#   bytes 1, 2   the hint's length (u16, big-endian): _HINT bytes, or 0 (no hint: the next journal() opens the
#                whole journal)
#   the hint     _HINT bytes (below)
#   the rest     the application's (memory()), kept by every write of this module and of the client
#
# A second writer of PUB records (journal_record.py owns the layout, docs/journal.md specifies it): the record is
# framed here so that a sampling wake loads this module and no journal module, and tests/unit/dmqtt/test_wake.py
# holds it to Session.accept()'s record byte for byte. hint() reads the ring's and the session's private state: a
# method on RingJournal and Session would be heap on every ring board, for a hint made only before a deep sleep.

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


# The built-ins by their u-names: MicroPython looks for `struct` and `binascii` on the filesystem before it takes
# the built-in (they are extensible), a search a u-name skips. On a wake that loads a module or two, those
# searches were a sixth of its flash reads (tools/bench_energy.py counts a wake's reads).
try:
    import ustruct as struct
    from ubinascii import crc32
except ImportError:  # CPython (the host's tests)
    import struct  # type: ignore[no-redef]
    from binascii import crc32

_SECTOR_SIZE = const(4096)
_SECTOR_HEADER = const(16)
_ERASED = const(0xFF)
_PUB = const(1)  # journal_record.PUB
_DONE = const(3)  # journal_record.DONE: its body the packet id
_DONE_TOTAL = const(9)  # journal_record.PID_RECORD: a DONE record framed
_OVERHEAD = const(7)  # journal_record.OVERHEAD: type u8, length u16, body, CRC-32
_AT_PAD = const(-3)  # journal_ring's read of a padding byte (0x00)
_PUB_HEADER = const(13)  # journal_record.PUB_HEADER: pid u16, flags u8, serial u32, mark u32, topic length u16

_MAGIC = const(0xD0)  # RTC memory's byte 0, high nibble: laid out by this library
_FLAGS = const(0x0F)  # its low nibble: the client's
_FRAME = const(3)  # byte 0 and the hint's length
_FORMAT = const(1)  # the hint's first byte: its layout
# The hint, big-endian: format u8, head sector u16, offset u16 (where the next record goes in it), prev u16 (where
# the record before that starts; it ends at offset), the session's last packet id u16, how many ids after it are
# known free u16 (Session.allocate_pid's run), the acceptance serial u32, the progress mark u32, the flows in
# flight u16, the sequence number of the oldest sector holding a live record u32 (a sending wake's open replays
# from there: resume()), then the head sector's 16-byte header.
_LAYOUT = ">BHHHHHIIHI"
_AT_SECTOR = const(1)
_AT_OFFSET = const(3)
_AT_PID = const(7)
_AT_SERIAL = const(11)
_AT_MARK = const(15)
_AT_BUSY = const(19)
_AT_FIRST = const(21)
_AT_HEADER = const(25)
_HINT = const(41)
_SEQ_IN_HEADER = const(8)  # the sector header's sequence number (u32 at byte 8: docs/journal.md)

# The whole session, when a wake had to open it (journal(), mark()), for the rest of the wake.
_session = None
# The hint as the last journal() at it left it (last(), done()), for the rest of the wake.
_appended = [None]


def _rtc():
    import machine

    return machine.RTC()


def _layout(memory):
    """Where the application's bytes start in RTC memory (0: it is not laid out by this library), and whether a
    hint of this format precedes them."""
    if len(memory) < _FRAME or memory[0] & 0xF0 != _MAGIC:
        return 0, False
    n = (memory[1] << 8) | memory[2]
    app = _FRAME + n
    return min(app, len(memory)), n == _HINT and len(memory) >= app and memory[_FRAME] == _FORMAT


def _store(hint, memory=None):
    """RTC memory with this hint (None: none), the client's flags and the application's bytes kept."""
    rtc = _rtc()
    if memory is None:
        memory = rtc.memory()
    app = _layout(memory)[0]
    flags = memory[0] & _FLAGS if app else 0
    n = len(hint) if hint is not None else 0
    rtc.memory(bytes((_MAGIC | flags, n >> 8, n & 0xFF)) + (hint or b"") + memory[app:])


def memory(data=None):
    """The application's part of RTC memory: what it holds, or, given `data` (bytes), that written with the hint
    and the client's byte kept. ValueError when both pass RTC memory's 2,048 bytes. Write RTC memory only through
    this: bytes written over the hint make the next wake open the whole journal. Lost at a power cut."""
    # (One copy of RTC memory read, one written: the end of a sending wake calls this on a heap its imports and
    # connection left in pieces.)
    rtc = _rtc()
    current = rtc.memory()
    app = _layout(current)[0]
    if data is None:
        return current[app:]
    rtc.memory((current[:app] if app else bytes((_MAGIC, 0, 0))) + data)


def _hint():
    """The hint in RTC memory at a wake from deep sleep (a bytearray), or None (a power-on, a reset of another
    cause: the application ran since, so the hint may be behind the journal)."""
    import machine

    if machine.reset_cause() != machine.DEEPSLEEP_RESET:
        return None
    current = _rtc().memory()
    return bytearray(current[_FRAME : _FRAME + _HINT]) if _layout(current)[1] else None


def resume():
    """Where the last wake left the ring journal, for a sending wake's open (open_journal(resume=...)): (the head
    sector, its sequence number, the oldest live sector's), or None at a power-on or without a hint; the open uses
    it only when the flash bears it out (dmqtt.journal.replay_from)."""
    hint = _hint()
    return None if hint is None else point(hint)


def point(hint):
    """Where a hint (bytes) says the ring's open may resume: (the head sector, its sequence number, the oldest
    live sector's)."""
    return (
        struct.unpack_from(">H", hint, _AT_SECTOR)[0],
        struct.unpack_from(">I", hint, _AT_HEADER + _SEQ_IN_HEADER)[0],
        struct.unpack_from(">I", hint, _AT_FIRST)[0],
    )


def mark():
    """The progress mark: readings journaled so far (MQTTClient.mark), from the hint; without one, from the whole
    journal, opened for this wake (the journal() that follows appends through it)."""
    hint = _hint()
    if hint is not None:
        return struct.unpack_from(">I", hint, _AT_MARK)[0]
    return _whole(32, None).mark


def journal(topic, payload, qos=1, max_messages=32, session=None):
    """Journal one QoS 1/2 message at a wake that does not send, as MQTTClient.publish() would with mark=mark() +
    1: on flash when this returns, sent by the next connection. Returns the messages waiting. topic: bytes or
    str; payload: bytes. max_messages: the client's (the journal's slots). QueueFull when every slot holds a
    message: the application sends first. `session`: a function that makes the session the whole open replays
    into (max_messages -> an unopened Session), for an application whose client makes its own (end-to-end
    confirmation's); the hint is used only with a plain session's journal."""
    if isinstance(topic, str):
        topic = topic.encode()
    hint = _hint() if _session is None else None
    if hint is not None:
        try:
            import esp32

            part = esp32.Partition.find(esp32.Partition.TYPE_DATA, label="mqttlog")
            left = append(part[0], hint, max_messages, topic, payload, qos) if part else 0
        except OSError:
            left = 0  # the whole open says what the flash did, as a journal error
        if left > 0:
            _store(hint)
            _appended[0] = hint
            return left
        if left < 0:
            print("dmqtt.wake: the journal is not where the last wake left it: opening it whole")
    whole = _whole(max_messages, session)
    whole.accept(topic, payload, qos, False, whole.mark + 1)
    keep(whole)
    return whole.outstanding()


def _whole(max_messages, make):
    """The whole journal opened, once a wake: the power-on's way, and the way when the hint fails."""
    global _session
    if _session is None:
        if make is None:
            from dmqtt.journal import open_journal
            from dmqtt.session import Session

            _session = Session(open_journal(), 5, 0, max_messages, 16)
        else:
            _session = make(max_messages)
        for note in _session.open():
            print(note)
    return _session


def keep(client):
    """Before a deep sleep (after settle()): the hint for the wakes that follow, from the client's session (an
    MQTTClient, an AsyncClient's .client, or a Session), into RTC memory. None is kept when the journal is the
    file (a board without the mqttlog partition) or holds records staged by group commit: those wakes open the
    whole journal."""
    _store(hint(getattr(client, "session", client)))


def hint(session):
    """The hint (bytes) for the next wake, from a session whose journal is the ring, or None: the file journal,
    records staged by group commit, a head ending in sealed padding, a session that keeps more than messages
    (end-to-end confirmation's epochs, which only the whole session writes)."""
    ring = session.journal
    head = getattr(ring, "_head", -1)
    if head < 0 or ring._staged or getattr(session, "hold", None) is not None:
        return None
    off = prev = end = _SECTOR_HEADER
    while off < ring._offset:
        n = ring._read_at(head, off, _SECTOR_SIZE - off)
        if n == _AT_PAD:
            off += 1  # bytes of a torn record the whole open sealed: skipped as the ring skips them
            continue
        if n < 0:
            return None
        prev = off
        off = end = off + n + _OVERHEAD
    if end != ring._offset or prev == end:
        return None  # (the head ends in padding: no record ends where the next one goes)
    ring._read(head, ring._hdr, 0)
    free = session._free_pids if session.next_pid == session._free_after else 0
    first = ring._after(0)
    while first != head and not session.holds(first * _SECTOR_SIZE, (first + 1) * _SECTOR_SIZE):
        first = ring._after(ring._seq[first])
    out = bytearray(_HINT)
    struct.pack_into(_LAYOUT, out, 0, _FORMAT, head, off, prev, session.next_pid, free, session.serial, session.mark,
                     session.outstanding(), ring._seq[first])  # fmt: skip
    out[_AT_HEADER:] = ring._hdr
    return bytes(out)


def append(part, hint, slots, topic, payload, qos):
    """Journal a QoS 1/2 message at the head the hint (a bytearray) names, as Session.accept() would (the next
    packet id, serial and mark), and move the hint on; returns the messages now in flight. With nothing written,
    and the caller to open the whole journal: -1 when the flash does not say what the hint says; 0 when the record
    does not fit in the head (a new head is the whole journal's to open), or no slot or known-free packet id is
    left."""
    _, sector, offset, prev, pid, free, serial, mark, busy, _ = struct.unpack_from(_LAYOUT, hint, 0)
    if busy >= slots or not free:
        return 0
    tlen = len(topic)
    n = _PUB_HEADER + tlen + len(payload)
    total = n + _OVERHEAD
    buf = _at_head(part, hint, total)
    if isinstance(buf, int):
        return buf
    view = memoryview(buf)
    pid = pid % 0xFFFF + 1  # never 0: after 65535 comes 1 [MQTT-2.3.1-1]
    buf[0] = _PUB
    struct.pack_into(">HHBIIH", buf, 1, n, pid, qos, serial + 1, mark + 1, tlen)
    buf[3 + _PUB_HEADER : 3 + _PUB_HEADER + tlen] = topic
    buf[3 + _PUB_HEADER + tlen : 3 + n] = payload
    struct.pack_into(">I", buf, 3 + n, crc32(view[: 3 + n]))
    part.writeblocks(sector, view[:total], offset)  # the durability point: NOR flash has no write cache
    struct.pack_into(">HHHHIIH", hint, _AT_OFFSET, offset + total, offset, pid, free - 1, serial + 1, mark + 1,
                     busy + 1)  # fmt: skip
    return busy + 1


def _at_head(part, hint, total):
    """A buffer of at least `total` bytes for a record of that size at the hint's head, once the flash bears the
    hint out (the head's header, the record before the tail whole and ending there, the span erased); 0 when the
    record does not fit in the head sector, -1 when the flash does not say what the hint says."""
    _, sector, offset, prev = struct.unpack_from(">BHHH", hint, 0)
    if prev < _SECTOR_HEADER:
        return 0
    if offset + total > _SECTOR_SIZE:
        return 0  # a new head: its header, snapshot and maybe a reclaim are the whole journal's to write
    buf = bytearray(max(total, offset - prev, _SECTOR_HEADER))
    view = memoryview(buf)
    part.readblocks(sector, view[:_SECTOR_HEADER], 0)
    if view[:_SECTOR_HEADER] != memoryview(hint)[_AT_HEADER:]:
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
    return buf


def last():
    """(packet id, serial) of the message the last journal() of this wake appended at the hint: the one a node
    sends at once (dnow.node); None when journal() opened the whole journal, or nothing was journaled."""
    if _session is not None or _appended[0] is None:
        return None
    hint = _appended[0]
    return struct.unpack_from(">H", hint, _AT_PID)[0], struct.unpack_from(">I", hint, _AT_SERIAL)[0]


def done(pid):
    """The flow of packet id `pid` (last()'s) is complete: the next hop that keeps it durable has it (a node's
    gateway). A DONE record at the hint's head, byte for byte what the session writes for a PUBACK or PUBCOMP, and
    the hint moved on. Returns False, with nothing written, when the flash does not bear the hint out or the record
    does not fit in the head: the message then stays in flight, and goes again at the next sending."""
    hint = _appended[0]
    if hint is None or _session is not None:
        return False
    import esp32

    part = esp32.Partition.find(esp32.Partition.TYPE_DATA, label="mqttlog")
    try:
        buf = _at_head(part[0], hint, _DONE_TOTAL) if part else 0
    except OSError:
        buf = 0
    if isinstance(buf, int):
        return False
    _, sector, offset, _, _, _, _, _, busy, _ = struct.unpack_from(_LAYOUT, hint, 0)
    buf[0] = _DONE
    struct.pack_into(">HH", buf, 1, 2, pid)
    view = memoryview(buf)
    struct.pack_into(">I", buf, 5, crc32(view[:5]))
    part[0].writeblocks(sector, view[:_DONE_TOTAL], offset)
    struct.pack_into(">HH", hint, _AT_OFFSET, offset + _DONE_TOTAL, offset)
    struct.pack_into(">H", hint, _AT_BUSY, busy - 1)
    _store(hint)
    return True
