"""The sampling wake's append (dmqtt/ring_tail.py): one PUB record where the hint says the ring's head ends,
byte for byte what Session.accept() writes, and nothing written when the flash does not say what the hint says
(a reset that kept RTC memory but cut a program short, a stale or spoiled hint)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from dmqtt import codec_host as codec
from dmqtt import journal_ring
from dmqtt import ring_tail as tail
from dmqtt.journal_file import FileJournal
from dmqtt.session import Session
from tests.unit.dmqtt.test_session import ack, drain
from tests.unit.nor import NorPartition, PowerCut

SLOTS = 32
TOPIC = b"sensors/shed-1/telemetry"
# The hint's fields, in ring_tail's order (docs/low-power.md).
SECTOR, HEADER, OFFSET, PREV, NEXT_PID, FREE_PIDS, SERIAL, MARK, BUSY = range(9)


def awake(part: NorPartition) -> Session:
    """A sending wake's session: the whole journal opened."""
    session = Session(journal_ring.RingJournal(part, 512), 5, 0, SLOTS, 16)
    session.open()
    return session


def sending_wake(part: NorPartition, readings: int, acked: int) -> list[int]:
    """Readings accepted and sent, the first `acked` of them acknowledged; the hint the wake leaves its sleep."""
    session = awake(part)
    for n in range(readings):
        session.accept(TOPIC, b"reading %d" % n, 1, mark=session.mark + 1)
    session.connected(True)
    for packet in drain(session)[:acked]:
        ack(session, codec.PUBACK, packet.pid)
    found = tail.hint(session)
    assert found is not None
    return found


def test_an_append_writes_what_accept_writes_and_the_next_open_finds_it() -> None:
    part = NorPartition(6)
    hint = sending_wake(part, readings=5, acked=3)
    twin = copy.deepcopy(part)
    assert tail.append(part, hint, SLOTS, TOPIC, b"sampled", 1)
    session = awake(twin)
    session.accept(TOPIC, b"sampled", 1, mark=session.mark + 1)
    assert part.data == twin.data  # the same record, packet id, serial and mark, at the same place
    for n in range(1, 6):  # more sampling wakes, each from the hint the last one left
        assert tail.append(part, hint, SLOTS, TOPIC, b"sampled %d" % n, 1)
    resumed = awake(part)
    assert resumed.outstanding() == 2 + 6 and resumed.mark == 11
    resumed.connected(True)
    sent = drain(resumed)
    assert [p.payload for p in sent[-6:]] == [b"sampled", *(b"sampled %d" % n for n in range(1, 6))]
    assert len({p.pid for p in sent}) == len(sent)  # no packet id twice


@pytest.mark.parametrize("cut", range(1, 40))
def test_a_cut_program_and_a_hint_that_survived_it_are_caught(cut: int) -> None:
    """A reset that keeps RTC memory (a watchdog, a brown-out) in the middle of the append's program: the next
    wake has the old hint and finds the span not erased, so it appends nothing; the whole open seals the torn
    record and journals the reading after it."""
    part = NorPartition(6, seed=cut)
    hint = sending_wake(part, readings=3, acked=1)
    stale = list(hint)
    part.cut_at = part.ops + 1
    with pytest.raises(PowerCut):
        tail.append(part, hint, SLOTS, TOPIC, b"x" * cut, 1)
    part.cut_at = 0
    before = bytes(part.data)
    torn = any(b != 0xFF for b in part.data[stale[SECTOR] * 4096 + stale[OFFSET] :][: cut + 40])
    if torn:
        assert tail.append(part, stale, SLOTS, TOPIC, b"again", 1) == -1
        assert part.data == before  # nothing written
    session = awake(part)  # the whole open: the torn record sealed, or nothing there
    assert session.outstanding() == 2
    session.accept(TOPIC, b"again", 1, mark=session.mark + 1)
    assert awake(part).outstanding() == 3


def test_a_hint_the_flash_does_not_bear_out_appends_nothing() -> None:
    part = NorPartition(6)
    hint = sending_wake(part, readings=4, acked=4)
    before = bytes(part.data)
    for field, value in [
        (HEADER, "00" * 16),  # the head was reclaimed and opened again since
        (OFFSET, hint[OFFSET] + 10),  # past the end: no record ends there
        (OFFSET, hint[OFFSET] - 10),  # inside the last record
        (PREV, hint[PREV] + 1),
        (SECTOR, (hint[SECTOR] + 1) % 6),
        (FREE_PIDS, 0),  # no packet id known free: the session must look
        (BUSY, SLOTS),  # every slot taken: the application sends first
    ]:
        spoiled = list(hint)
        spoiled[field] = value
        assert tail.append(part, spoiled, SLOTS, TOPIC, b"r", 1) == (-1 if field < FREE_PIDS else 0), field
        assert bytes(part.data) == before, field
    # The application's own bytes over the hint's place would spoil it the same ways; the plan keeps its part.
    assert tail.append(part, hint, SLOTS, TOPIC, b"y" * 5000, 1) == 0  # no room in the head: the whole journal's
    assert tail.append(part, hint, SLOTS, TOPIC, b"r", 1)


def test_a_hint_holds_only_the_ring_and_no_group_staged(tmp_path: Path) -> None:
    part = NorPartition(6)
    session = awake(part)
    assert tail.hint(session) is None  # an empty journal has no head yet
    session.accept(TOPIC, b"a", 1)
    assert tail.hint(session) is not None
    session.accept(TOPIC, b"b", 1, defer=True)
    assert tail.hint(session) is None  # staged, not on flash
    on_file = Session(FileJournal(str(tmp_path / "j")), 5, 0, SLOTS, 16)
    on_file.open()
    on_file.accept(TOPIC, b"a", 1)
    assert tail.hint(on_file) is None  # the file journal: the whole open at every sampling wake
