# The session's receive side for incoming QoS 2 messages: exactly once to the application (docs/client.md,
# "Receiving"), sans-I/O like the session whose slots it works on. Loaded at the first incoming QoS 2 PUBLISH or
# PUBREL, or when the journal holds a message the handler has not returned from: a board that only publishes (a
# battery board's sending wake) never loads it, nor spends its heap.
#
# The RX record's body is this module's to write and read (docs/journal.md), but for its receive number, which
# the session's replay counts from (journal_record.rx_number).

import struct

from dmqtt import codec
from dmqtt import journal_record as rec
from dmqtt.errors import ProtocolError, explain

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


# RX: pid u16, flags u8 (bits 0-1 QoS, bit 2 retain, bit 3 numbered), receive number u32 (when numbered, since
# format 4), topic length u16, topic, payload. Format 1's RX is the pid alone.
_HEADER = const(9)
_OLD_HEADER = const(5)  # formats 2 and 3: no receive number
_RETAIN = const(4)
_NUMBERED = const(8)  # (journal_record.rx_number reads it)

# Failures in words: numbers into client_text.TEXT (session.py's).
_T_RX_MAX = const(14)
_T_RX_LARGE = const(15)


def _text(rule):
    return explain("dmqtt.client_text", rule)


def publish(session, topic, pid, payload, retain, dup):
    """An incoming QoS 2 PUBLISH: the message, its packet id and its receive number go to the journal together
    before anyone sees it; the handler gets it (again after a reboot) until it has returned, and its return is
    journaled. PUBREC follows; a resend of a message already had is only acknowledged."""
    j = session.rx_find(pid)
    if j < 0:
        j = session.rx_find(0)
        if j < 0:
            raise ProtocolError(_text(_T_RX_MAX), codec.RECEIVE_MAXIMUM_EXCEEDED)
        wire = topic.encode()
        body = session.journal.body
        tlen = len(wire)
        n = _HEADER + tlen + len(payload)
        if n > len(body):
            raise ProtocolError(_text(_T_RX_LARGE))
        session.fresh = -1  # journal.body is about to hold another record
        struct.pack_into(">HBIH", body, 0, pid, 2 | _NUMBERED | (_RETAIN if retain else 0), session.received + 1, tlen)
        body[_HEADER : _HEADER + tlen] = wire
        body[_HEADER + tlen : n] = payload
        session.rx_addr[j] = session.journal.commit(rec.RX, n)
        session.received += 1  # once on flash: a cut before leaves the number to the next message
        session.rx_pids[j] = pid
        session.rx_handled[j] = 0
        session.rx_number = session.received
        session.hand_over(j, topic, payload, retain, dup)
    elif not session.rx_handled[j]:
        deliver(session, j)  # a resend of one whose handler raised: its number is on flash
    session.owe(codec.PUBREC, pid, codec.SUCCESS)


def deliver(session, j):
    """Give the application the message of receive slot j again, from its RX record, flagged dup."""
    n = session.journal.read(session.rx_addr[j])
    body = session.journal.record[:n]
    number = session.rx_number = rec.rx_number(body)
    start = _HEADER if number else _OLD_HEADER  # (a numbered message's number is 1 or more)
    end = start + ((body[start - 2] << 8) | body[start - 1])
    session.hand_over(j, codec.decode_utf8(body[start:end]), body[end:], bool(body[2] & _RETAIN), True)


def deliver_pending(session):
    """Every message the handler has not returned from (a power cut or an exception came first)."""
    for j in range(len(session.rx_pids)):
        if session.rx_pids[j] and not session.rx_handled[j]:
            deliver(session, j)


def release(session, j):
    """PUBREL for receive slot j: RXDONE goes to the journal before PUBCOMP lets the broker reuse the id."""
    pid = session.rx_pids[j]
    session.journal_pid(rec.RXDONE, pid)
    session.rx_pids[j] = 0
    session.owe(codec.PUBCOMP, pid, codec.SUCCESS)
