"""A sending wake's open from the hint (RingJournal.resume, dmqtt.wake.resume): it replays from the oldest sector
holding a live record instead of the oldest sector, and the session it rebuilds is the whole open's, field for
field, through a ring that has come round many times, with QoS 1 and 2 flows out and QoS 2 messages in. A hint
the flash does not bear out (a wake after it wrote the journal and was reset before it could leave a new one, a
spoiled hint) replays the whole ring."""

from __future__ import annotations

import random
from typing import Any

from dmqtt import codec_host as codec
from dmqtt import journal, journal_ring
from dmqtt import wake as tail
from dmqtt.session import Session
from tests.unit.dmqtt.test_session import ack, deliver, drain
from tests.unit.nor import NorPartition

SLOTS = 32
SECTORS = 8
TOPIC = b"sensors/shed-1/telemetry"


def resume_point(hint: bytes | None) -> tuple[int, int, int] | None:
    """Where the hint says the ring's open may resume, as a sending wake reads it (dmqtt.wake.resume): the head
    sector, its sequence number, the oldest live sector's."""
    return None if hint is None else tail.point(hint)


def opened(part: NorPartition, resume: tuple[int, int, int] | None = None) -> tuple[Session, list[int]]:
    """The session a wake opens, and the sectors its replay visited, in order."""
    ring = journal_ring.RingJournal(part, 512)
    if resume is not None:
        ring.resume = lambda seqs: journal.replay_from(seqs, resume)  # as open_journal(resume=) sets it
    visited: list[int] = []
    replay_sector = ring._replay_sector

    def counting(sector: int, visit: Any) -> tuple[int, bool]:
        visited.append(sector)
        return replay_sector(sector, visit)

    ring._replay_sector = counting  # type: ignore[method-assign]
    session = Session(ring, codec.V5, 0, SLOTS, 16)
    session.open()
    return session, visited


def state(session: Session) -> tuple[Any, ...]:
    """Everything a replay rebuilds: the flows out (by packet id), the messages in, the counters, the ring's head."""
    flows = sorted(
        (session._pid[i], session._state[i], session._qos[i], session._serial[i], session._addr[i])
        for i in range(SLOTS)
        if session._state[i]
    )
    incoming = sorted((session.rx_pids[j], session.rx_handled[j]) for j in range(16) if session.rx_pids[j])
    ring = session.journal
    counters = (session.next_pid, session.serial, session.mark, session.received, session.outstanding())
    return flows, incoming, counters, (ring._head, ring._offset)


def wake(part: NorPartition, rng: random.Random, resume: tuple[int, int, int] | None, acks: float = 0.85) -> Session:
    """A sending wake: opened (from the hint when given), a batch accepted, sent, some of it acknowledged (QoS 2
    through PUBREC, some to PUBCOMP; `acks` of them), a QoS 2 message received, those in released by chance."""
    session, _ = opened(part, resume)
    for _ in range(rng.randint(0, 12)):
        session.accept(TOPIC, bytes(rng.randint(20, 120)), rng.choice((1, 2)), mark=session.mark + 1)
    session.connected(True)
    for packet in drain(session):
        if packet.type == codec.PUBREL:
            if rng.random() < acks:
                ack(session, codec.PUBCOMP, packet.pid)
        elif rng.random() < acks:
            ack(session, codec.PUBREC if packet.qos == 2 else codec.PUBACK, packet.pid)
    for packet in drain(session):  # the PUBRELs of the flows just received
        if packet.type == codec.PUBREL and rng.random() < acks:
            ack(session, codec.PUBCOMP, packet.pid)
    if rng.random() < 0.3:
        deliver(session, codec.encode_publish(b"cmd/shed-1", b"open", 2, rng.randint(1, 400), version=codec.V5))
    for pid in session.rx_pids:
        if pid and rng.random() < acks:
            deliver(session, codec.encode_ack(codec.PUBREL, pid, 0, codec.V5))
    session.journal.tend()
    return session


def test_a_resumed_open_rebuilds_the_whole_opens_session_and_replays_less() -> None:
    rng = random.Random(49)
    part = NorPartition(SECTORS)
    hint = None
    skipped = 0
    for _ in range(300):  # the ring comes round many times
        session = wake(part, rng, hint and resume_point(hint))
        hint = tail.hint(session)
        if hint is None:
            continue
        whole, all_sectors = opened(part)
        resumed, some = opened(part, resume_point(hint))
        assert state(resumed) == state(whole)
        assert some == all_sectors[all_sectors.index(some[0]) :]  # a tail of the same walk
        skipped += len(all_sectors) - len(some)
    assert skipped > 300  # most wakes skip sectors of ended flows


def test_a_hint_the_flash_does_not_bear_out_replays_the_whole_ring() -> None:
    rng = random.Random(7)
    part = NorPartition(SECTORS)
    for _ in range(40):
        wake(part, rng, None)
    hint = tail.hint(wake(part, rng, None, acks=1))  # every flow ended: the head is the oldest live sector
    assert hint is not None
    resume = resume_point(hint)
    assert resume is not None
    head, head_seq, first = resume
    _, all_sectors = opened(part)
    _, some = opened(part, resume)
    assert len(some) < len(all_sectors)
    older = (head - 1) % SECTORS  # the sector opened before the head (the ring takes them in turn)
    spoiled_hints = (
        (head, head_seq - 1, first),
        ((head + 1) % SECTORS, head_seq, first),
        (older, head_seq - 1, head_seq - 1),  # a sector that is not the youngest, with its own sequence number
        (head, head_seq, 10**6),
    )
    for spoiled in spoiled_hints:
        _, visited = opened(part, spoiled)
        assert visited == all_sectors, spoiled
    # A wake that wrote the journal and was reset before it left a new hint: the next wake has the old one. It
    # either replays everything (the head moved on) or gives what the whole open gives.
    for _ in range(20):
        wake(part, rng, None)
        whole, all_sectors = opened(part)
        stale, visited = opened(part, resume)
        assert state(stale) == state(whole)
