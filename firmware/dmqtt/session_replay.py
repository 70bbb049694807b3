# The session's boot half: replaying the journal into the slots and counters (Session.replay calls it). It runs
# once per boot, so Session.open() loads it for the replay and drops it after: on a deployed board (.mpy files in
# the filesystem) a module's code holds the heap for as long as it is loaded, and the run has better use for it.

from dmqtt import journal_record as rec
from dmqtt.session import FREE, WAIT_ACK, WAIT_COMP, _text

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


# A failure in words: a number into client_text.TEXT (session.py has the session's others).
_T_NO_SLOT = const(10)


def replay(session, rtype, body, addr):
    """Session.replay: one record of the journal, in log order, into the session's slots and counters. (In small
    functions: a board loads this at boot into a heap its buffers have cut up, and each function's code is a
    block of its own.)"""
    if rtype == rec.PUB or rtype == rec.REL:
        _flow(session, rtype, body, addr)
    elif rtype == rec.DONE:
        i = session._find(rec.pid_of(body))
        if i >= 0:
            session._state[i] = FREE
    elif rtype == rec.RX or rtype == rec.HANDLED:
        _received(session, rtype, body, addr)
    elif rtype == rec.RXDONE:
        j = session._rx_find(rec.pid_of(body))
        if j >= 0:
            session._rx_pid[j] = 0
    elif rtype == rec.META:
        session.next_pid, serial, mark = rec.meta(body)
        session.serial = max(session.serial, serial)
        session.mark = max(session.mark, mark)
    elif rtype == rec.MARK:
        session.mark = max(session.mark, rec.mark_of(body))


def _flow(session, rtype, body, addr):
    """A PUB or REL record: an outgoing flow, accepted or released."""
    pid = rec.pid_of(body)
    serial = rec.serial_of(rtype, body)
    i = session._find(pid)
    # A record carried forward can replay after a later record of the same flow (a PUB copied past its REL): the
    # serial tells the same flow from a new one that reuses the packet id.
    same_flow = i >= 0 and session._serial[i] == serial
    if i < 0:
        i = session._slot_for(pid)
        if i < 0:
            # More journaled messages than slots: max_messages was lowered since they were accepted.
            session.journal.notes.append(_text(_T_NO_SLOT, (pid, len(session._state))))
            return
    if rtype == rec.PUB:
        if not (same_flow and session._state[i] == WAIT_COMP):
            session._state[i] = WAIT_ACK  # maybe sent before the reset: resent with DUP=1 if the session lives
        session._qos[i] = rec.pub_qos(body)
        session._addr[i] = addr
        session.mark = max(session.mark, rec.pub_mark(body))
        session.next_pid = pid
    else:
        session._state[i] = WAIT_COMP
        session._rel_addr[i] = addr
        session._qos[i] = 2
    session._pid[i] = pid
    session._serial[i] = serial
    session.serial = max(session.serial, serial)


def _received(session, rtype, body, addr):
    """An RX or HANDLED record: an incoming QoS 2 message, not yet or already handled."""
    pid = rec.pid_of(body)
    j = session._rx_find(pid)
    if j < 0:
        j = session._rx_find(0)
        if j < 0:
            return
        session._rx_pid[j] = pid
    # A format 1 RX (pid only) was delivered before it was journaled: handled.
    session._rx_handled[j] = 1 if rtype == rec.HANDLED or rec.rx_message(body) is None else 0
    session._rx_addr[j] = addr
