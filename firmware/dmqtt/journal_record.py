# The journal's records, byte for byte as docs/journal.md specifies them: the framing every backend writes
# (type, length, body, CRC-32) and the bodies the session fills and reads. Both journals (journal_ring.py, the
# ring; journal_file.py, the file) and the session import this module and nothing of each other, so the layout
# has one owner; wake.py frames PUB records too, held to this module's byte for byte by its tests.
# Multi-byte fields are big-endian.

import struct
from binascii import crc32

from dmqtt.errors import JournalError

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


# The layout version in every sector header and file header. 2 added HANDLED and the message in RX; 3 added
# EPOCH and CONFIRMED and the confirmation's tail of META (end-to-end confirmation, docs/confirmation.md); 4 added
# the receive number (RX's flags bit 3 and the u32 after them; META's fourth field) and PUB's resent flag (its
# bit 3). A reader takes 1 to 3 as well (format 1's RX records are pid-only: messages delivered before they were
# journaled); a journal holds records of several formats after an update, so each record says its own layout.
FORMAT = const(4)
_OLDEST_FORMAT = const(1)

# Record types (0x00 and 0xFF never are: erased flash and sealed padding).
PUB = const(1)  # an accepted QoS 1/2 message: pid, flags, serial, mark, topic, payload
REL = const(2)  # QoS 2 flow got PUBREC: pid, serial; resume by sending PUBREL
DONE = const(3)  # flow finished (PUBACK, PUBCOMP, or refused): pid
RX = const(4)  # incoming QoS 2 PUBLISH accepted, before the application sees it: pid, flags, topic, payload
RXDONE = const(5)  # incoming QoS 2 released by PUBREL: pid
META = const(6)  # snapshot: next pid, serial, mark
MARK = const(7)  # application progress mark (QoS 0 publishes): mark
HANDLED = const(8)  # the application's handler returned for an incoming QoS 2 message: pid
EPOCH = const(9)  # the application's epoch (a board's boot) starts at an acceptance serial: epoch, serial
CONFIRMED = const(10)  # the recorder has stored every message up to this serial (or the board gave it up): serial
_LAST_TYPE = const(10)

OVERHEAD = const(7)  # framing around a body: type (1) + length (2) + CRC-32 (4)
PID_RECORD = const(2 + OVERHEAD)  # a record whose body is a packet id (DONE, RXDONE): framed in views made once
AT_TORN = const(-1)  # what a reader finds instead of a body length
AT_ERASED = const(-2)

# Bodies. PUB: pid u16, flags u8 (bits 0-1 QoS, bit 2 retain, bit 3 resent: format 4), serial u32, mark u32,
# topic length u16, topic, payload. REL: pid u16, serial u32. RX: pid u16, flags u8 (bits 0-1 QoS, bit 2 retain,
# bit 3 numbered), the receive number u32 when numbered (format 4), topic length u16, topic, payload (format 1:
# pid only). DONE, RXDONE, HANDLED: pid u16. META: next pid u16, serial u32, mark u32, receive number u32 (format
# 4), then with confirmation on: confirmed serial u32, epoch count u8, that many (epoch u32, first serial u32,
# stored u32).
# META's length tells the formats apart: 10 or 15 + 12k bytes before format 4, 14 or 19 + 12k since (length
# mod 12: 10 or 3 before, 2 or 7 since). MARK, CONFIRMED: u32.
# EPOCH: epoch u32, first serial u32 [, stored u32: the recorder stores it whole]. (The confirmation's bodies
# and META's tail are written and read by dmqtt/confirm.py, the one module that uses them: a board without
# confirmation never loads that code. RX's body likewise by dmqtt/inbox.py, but for the receive number that
# replay counts from.)
PUB_HEADER = const(13)
_RETAIN = const(4)
_NUMBERED = const(8)  # RX's flags: the receive number follows them (dmqtt/inbox.py writes it)
META_SIZE = const(14)


class Framing:
    """The buffers every backend frames records in: `body` (where the owner writes a record's body before
    commit) and a read buffer; seal() and check() are the framing rules."""

    record_type = 0  # the type of the record read() read last (set there: no slot per instance before)

    def __init__(self, record_max):
        self.record_max = record_max
        self._buf = bytearray(record_max + OVERHEAD)
        self._mv = memoryview(self._buf)
        self.body = self._mv[3 : 3 + record_max]  # the owner writes a record's body here, then commit()
        self._rbuf = bytearray(record_max + OVERHEAD)  # reads and carried-forward copies
        self._rmv = memoryview(self._rbuf)
        # What read() read: its body at the start of `record` (a view of the read buffer made once: a view, and a
        # tuple with the type, per read were objects per message sent from the journal), its type record_type.
        self.record = self._rmv[3 : 3 + record_max]
        # A record whose body is a packet id (DONE, and the other acknowledgements' records: one or two per
        # message) framed in views made once: its CRC's and its program's slices would be two objects each.
        self._pid_crc = self._mv[: PID_RECORD - 4]
        self._pid_record = self._mv[:PID_RECORD]
        self.notes = []  # what open() found and repaired, for the console

    def _seal(self, view, rtype, n):
        """Frame a body already in view[3:3+n] (view: _mv or _rmv, so that the CRC's slice is the only object
        made); returns the record's total length."""
        if n > self.record_max:
            raise JournalError("record of %d bytes exceeds the journal's %d" % (n, self.record_max))
        view[0] = rtype
        view[1] = n >> 8
        view[2] = n & 0xFF
        # binascii.crc32 is unsigned on both interpreters: no mask (on a chip a value of 2^30 and up is a heap
        # integer, and a mask would make a second one).
        struct.pack_into(">I", view, 3 + n, crc32(self._pid_crc if n == 2 and view is self._mv else view[: 3 + n]))
        return n + OVERHEAD

    def _check(self, length_limit):
        """Validate the record in the read buffer (header already read): -> body length, or AT_TORN."""
        buf = self._rbuf
        rtype = buf[0]
        n = (buf[1] << 8) | buf[2]
        if rtype < PUB or rtype > _LAST_TYPE or n > self.record_max or n + OVERHEAD > length_limit:
            return AT_TORN
        k = 3 + n
        want = (buf[k] << 24) | (buf[k + 1] << 16) | (buf[k + 2] << 8) | buf[k + 3]  # no unpack_from tuple
        if crc32(self._rmv[:k]) != want:
            return AT_TORN
        return n


# -- bodies --------------------------------------------------------------------------------------------------


def pid_of(body):
    """The packet id every record but META and MARK starts with."""
    return (body[0] << 8) | body[1]


def put_pid(body, pid):
    body[0] = pid >> 8
    body[1] = pid & 0xFF
    return 2


def pub_size(topic_len, payload_len):
    return PUB_HEADER + topic_len + payload_len


def put_pub(body, pid, qos, retain, serial, mark, topic, payload):
    """Fill a PUB body (the caller checked pub_size against the journal's record size); returns its length."""
    tlen = len(topic)
    struct.pack_into(">HBIIH", body, 0, pid, qos | (_RETAIN if retain else 0), serial, mark, tlen)
    body[PUB_HEADER : PUB_HEADER + tlen] = topic
    n = PUB_HEADER + tlen + len(payload)
    body[PUB_HEADER + tlen : n] = payload
    return n


def pub_qos(body):
    return body[2] & 0x03


def pub_retain(body):
    return bool(body[2] & _RETAIN)


def pub_mark(body):
    return struct.unpack_from(">I", body, 7)[0]


def pub_topic(body):
    return body[PUB_HEADER : PUB_HEADER + ((body[11] << 8) | body[12])]


def pub_payload(body, n):
    """The payload of a PUB body of n bytes (body may run on past them: the journal's read view)."""
    return body[PUB_HEADER + ((body[11] << 8) | body[12]) : n]


def serial_of(rtype, body):
    """The acceptance serial a PUB or REL carries (it tells a flow from a later one reusing its packet id)."""
    return struct.unpack_from(">I", body, 3 if rtype == PUB else 2)[0]


def known_format(version):
    """Whether a (valid) sector or file header's format is one this firmware reads. A newer format is refused
    with JournalError rather than taken for foreign data and erased: its messages are a newer firmware's to
    resume (CHANGELOG.md)."""
    if version > FORMAT:
        raise JournalError("format %d is newer than %d: flash newer firmware or erase it" % (version, FORMAT))
    return version >= _OLDEST_FORMAT


def rx_number(body):
    """The receive number of an RX body (0 before format 4 numbered them), which replay counts from."""
    return struct.unpack_from(">I", body, 3)[0] if len(body) >= 9 and body[2] & _NUMBERED else 0


def put_rel(body, pid, serial):
    struct.pack_into(">HI", body, 0, pid, serial)
    return 6


def put_meta(body, next_pid, serial, mark, received):
    struct.pack_into(">HIII", body, 0, next_pid, serial, mark, received)
    return META_SIZE


def meta_size(body):
    """Where a META body's confirmation tail starts: after the receive number (format 4) or the mark (before)."""
    return META_SIZE if len(body) % 12 in (2, 7) else 10


def meta(body):
    """-> (next pid, serial, mark, receive number: 0 before format 4)"""
    received = struct.unpack_from(">I", body, 10)[0] if meta_size(body) == META_SIZE else 0
    return struct.unpack_from(">HII", body) + (received,)


def put_mark(body, mark):
    struct.pack_into(">I", body, 0, mark)
    return 4


def mark_of(body):
    return struct.unpack_from(">I", body, 0)[0]
