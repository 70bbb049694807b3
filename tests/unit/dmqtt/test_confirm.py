"""End-to-end confirmation on the board (dmqtt.confirm, sans-I/O on CPython over both journals): what a
confirmation confirms, what it reports missing is sent again from the journal with its own serial, nothing before
the timeout, the state after a reboot, the journal's cost, and the host's encoder read back (docs/confirmation.md).
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dmqtt import codec_host as codec
from dmqtt import journal_record as rec
from dmqtt import journal_ring
from dmqtt.confirm import ConfirmingSession
from dmqtt.session import Session
from host_bridge.recorder.confirmation import BOOTS_KEPT, Entry, Ledger, decode, encode
from tests.conftest import VECTORS
from tests.unit.dmqtt.test_session import Store, ack, drain, store_factory
from tests.unit.nor import NorPartition


class Clock:
    def __init__(self) -> None:
        self.now = 1000

    def advance(self, ms: int) -> None:
        self.now += ms


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    c = Clock()
    monkeypatch.setattr(time, "ticks_ms", lambda: c.now, raising=False)
    monkeypatch.setattr(time, "ticks_diff", lambda a, b: a - b, raising=False)
    monkeypatch.setattr(time, "ticks_add", lambda a, b: a + b, raising=False)
    yield c


@pytest.fixture(params=["ring", "file"])
def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    # A file journal that does not compact within a test: a compaction gives up what is unconfirmed.
    return store_factory(request.param, tmp_path, compact_bytes=1 << 20)


def confirming(store: Any, epoch: int, timeout_s: int = 5, hold: bool = False) -> ConfirmingSession:
    """A session with confirmation, as ConfirmingClient makes it, after its journal is open and it is connected."""
    session = ConfirmingSession(store, codec.V311, 8, 32, 16)
    session.current_epoch = epoch
    session.timeout_ms = timeout_s * 1000
    session.hold = hold
    session.open()
    session.connected(True)
    return session


def boot(new_store: Store, epoch: int, timeout_s: int = 5) -> ConfirmingSession:
    return confirming(new_store(), epoch, timeout_s)


def send(session: Session, epoch: int, seqs: range, qos: int = 1) -> None:
    for seq in seqs:
        session.accept(b"sensors/b", b'{"boot": %d, "seq": %d}' % (epoch, seq), qos)


def ack_all(session: Session) -> list[bytes]:
    """Acknowledge every PUBLISH the session sends, the window's worth at a time until it sends no more; their
    payloads."""
    payloads: list[bytes] = []
    while packets := [p for p in drain(session) if p.type == codec.PUBLISH]:
        for packet in packets:
            payloads.append(bytes(packet.payload))
            ack(session, codec.PUBACK, packet.pid)
    return payloads


def three_boots_of_five() -> ConfirmingSession:
    """Boots 1, 2 and 3 on one flash, five messages each, all acknowledged; the session of boot 3."""
    part = NorPartition(8)
    for boot in (1, 2, 3):
        session = confirming(journal_ring.RingJournal(part, record_max=512), boot)
        send(session, boot, range(5))
        ack_all(session)
    return session


def confirmed(*entries: Entry, stamp: int = 100) -> bytes:
    return encode(stamp, list(entries))


def records(session: Session, rtype: int) -> list[bytes]:
    found: list[bytes] = []
    session.journal.scan(lambda t, body, addr: found.append(bytes(body)) if t == rtype else None)
    return found


def test_a_confirmation_moves_the_floor_and_it_outlives_a_reboot(new_store: Store, clock: Clock) -> None:
    session = boot(new_store, 7)
    for part in (range(30), range(30, 40)):  # (32 slots)
        send(session, 7, part)
        ack_all(session)
    assert session.unconfirmed() == 40
    session.take(confirmed(Entry(7, 20, 20)))
    session.tend()
    assert session.unconfirmed() == 20 and session.floor == 20
    assert records(session, rec.CONFIRMED) == []  # a move of less than 32: not worth a record of its own
    session.take(confirmed(Entry(7, 36, 36), stamp=101))
    session.tend()
    assert [rec.mark_of(b) for b in records(session, rec.CONFIRMED)] == [36]
    assert records(session, rec.EPOCH) == [struct.pack(">II", 7, 1)]
    session = boot(new_store, 8)
    assert session.floor == 36 and session.unconfirmed() == 4
    # The old boot's numbers still map after the reboot: its last four are confirmed by name.
    session.take(confirmed(Entry(7, 40, 40)))
    assert session.unconfirmed() == 0


def test_a_reported_gap_is_sent_again_from_the_journal_with_its_own_serial(new_store: Store, clock: Clock) -> None:
    session = boot(new_store, 3)
    send(session, 3, range(8), qos=2)
    for packet in drain(session):
        ack(session, codec.PUBREC, packet.pid)
    for packet in drain(session):
        ack(session, codec.PUBCOMP, packet.pid)
    session.take(confirmed(Entry(3, 2, 8, ((2, 4),))))
    session.tend()
    again = drain(session)
    assert [bytes(p.payload) for p in again] == [b'{"boot": 3, "seq": %d}' % s for s in (2, 3, 4)]
    assert all(p.qos == 2 and not p.dup for p in again)
    assert session.resent == 3 and session.floor == 2
    # The copies are journaled flows like any other, with the serials of the messages they carry.
    serials = [rec.serial_of(rec.PUB, b) for b in records(session, rec.PUB)]
    assert serials == [1, 2, 3, 4, 5, 6, 7, 8, 3, 4, 5]


def test_nothing_is_sent_again_before_the_timeout_then_everything_unconfirmed(new_store: Store, clock: Clock) -> None:
    session = boot(new_store, 1, timeout_s=5)
    send(session, 1, range(5))
    ack_all(session)
    session.tend()  # arms the deadline
    clock.advance(4999)
    session.tend()
    assert drain(session) == [] and session.late == 0
    clock.advance(1)
    session.tend()
    assert len(ack_all(session)) == 5 and session.late == 1 and session.resent == 5
    # A late confirmation of the first sends still counts: the store has them, whichever copy it got.
    session.take(confirmed(Entry(1, 5, 5)))
    session.tend()
    assert session.unconfirmed() == 0
    clock.advance(60000)
    session.tend()
    assert drain(session) == [] and session.late == 1


def test_an_older_confirmation_never_undoes_a_newer_one(new_store: Store, clock: Clock) -> None:
    session = boot(new_store, 2)
    send(session, 2, range(6))
    ack_all(session)
    session.take(confirmed(Entry(2, 6, 6), stamp=200))
    session.take(confirmed(Entry(2, 1, 6, ((1, 5),)), stamp=199))  # late, from before
    session.tend()
    assert session.unconfirmed() == 0 and drain(session) == []
    # Stamps compare modulo 2^32 (serial-number arithmetic): newer goes on past the wrap.
    for stamp in (0x40000000, 0x80000000, 0xC0000000, 3):
        session.take(confirmed(Entry(2, 6, 6), stamp=stamp))
        assert session.stamp == stamp
    session.take(confirmed(Entry(2, 6, 6), stamp=0xC0000001))
    assert session.stamp == 3


def test_messages_the_journal_no_longer_holds_are_given_up_and_counted(clock: Clock) -> None:
    session = confirming(journal_ring.RingJournal(NorPartition(4), record_max=512), 1, timeout_s=1)
    for seq in range(200):  # about five sectors of records: the ring reuses the oldest
        session.accept(b"sensors/b", b"x" * 40 + b"%d" % seq, 1)
        ack_all(session)
    held = [rec.serial_of(rec.PUB, body) for body in records(session, rec.PUB)]
    session.tend()
    clock.advance(1000)
    session.tend()
    again = ack_all(session)
    assert session.late == 1
    # What the ring no longer held is given up, counted; the lowest it holds go again, one batch (8) for now.
    assert session.dropped == min(held) - 1 > 0 and session.floor == min(held) - 1
    assert again == [b"x" * 40 + b"%d" % (s - 1) for s in range(min(held), min(held) + 8)]
    # The recorder stores them and no more (the broker lost the rest): on with the next batch at once, from the
    # lowest the ring still holds (sending again takes room too).
    session.take(confirmed(Entry(1, min(held) + 7, min(held) + 7)))
    still = sorted({rec.serial_of(rec.PUB, body) for body in records(session, rec.PUB)} - set(range(min(held) + 8)))
    session.tend()
    assert ack_all(session) == [b"x" * 40 + b"%d" % (s - 1) for s in still[:8]]
    # It had more than that: the sweep stops, the timeout watches the rest.
    session.take(confirmed(Entry(1, still[7] + 20, still[7] + 20), stamp=101))
    session.tend()
    assert ack_all(session) == [] and session.resent == 16


def test_hold_keeps_unconfirmed_messages_and_refuses_new_ones_instead(clock: Clock) -> None:
    from dmqtt.errors import QueueFull

    session = confirming(journal_ring.RingJournal(NorPartition(4), record_max=512), 1, 1, hold=True)
    with pytest.raises(QueueFull):
        for seq in range(400):
            session.accept(b"sensors/b", b"x" * 40 + b"%d" % seq, 1)
            ack_all(session)
    accepted = session.serial
    assert 0 < accepted < 400
    session.take(confirmed(Entry(1, accepted, accepted)))
    session.tend()
    session.accept(b"sensors/b", b"after", 1)  # confirmed: the ring may reuse their space again
    assert session.dropped == 0


def test_the_recorders_ledger_and_the_encoding() -> None:
    ledger = Ledger()
    for seq in (0, 1, 2, 5, 6, 9):
        assert ledger.stored("b", 4, seq) == (False, False)
    message = ledger.confirmation("b", 77)
    stamp, entries = decode(message)
    assert stamp == 77 and entries == [Entry(4, 3, 10, ((3, 4), (7, 8)))]
    assert len(message) == 6 + 13 + 16
    assert ledger.stored("b", 4, 3) == (False, True)  # reported missing, then stored: repaired
    assert ledger.stored("b", 4, 3) == (True, False)  # a second copy: already stored
    assert ledger.stored("b", 4, 12) == (False, False)  # above what the board was told: new
    restored = Ledger.restore(ledger.snapshot())
    assert restored.devices == ledger.devices


def test_the_board_reads_what_the_recorder_writes(new_store: Store, clock: Clock) -> None:
    session = boot(new_store, 9)
    send(session, 9, range(4))
    ack_all(session)
    ledger = Ledger()
    for seq in (0, 1, 3):
        ledger.stored("b", 9, seq)
    session.take(ledger.confirmation("b", 5))
    session.tend()
    assert session.floor == 2 and [bytes(p.payload) for p in drain(session)] == [b'{"boot": 9, "seq": 2}']


def test_a_power_cut_between_the_acknowledgement_and_the_confirmation(clock: Clock) -> None:
    """At every flash operation from the first message to the journaled confirmation, the power goes: after the
    reboot each message the broker had acknowledged is confirmed by the recorder's next confirmation, or, when
    the store lacks it, sent again from flash after the timeout; never lost, never given up."""
    from tests.unit.nor import PowerCut

    def run(part: NorPartition, acknowledged: list[bytes]) -> None:
        session = confirming(journal_ring.RingJournal(part, record_max=512), 1, timeout_s=1)
        send(session, 1, range(6))
        acknowledged += ack_all(session)
        session.take(confirmed(Entry(1, 3, 3)))  # the recorder has the first three
        session.tend()  # journals the floor
        send(session, 1, range(6, 8))
        acknowledged += ack_all(session)

    total = NorPartition(8)
    run(total, [])
    for cut in range(1, total.ops + 1):
        part = NorPartition(8, seed=cut)
        part.cut_at = part.ops + cut
        acknowledged: list[bytes] = []
        with pytest.raises(PowerCut):
            run(part, acknowledged)
        part.cut_at = 0
        session = confirming(journal_ring.RingJournal(part, record_max=512), 2, timeout_s=1)
        accepted = session.serial
        assert session.floor in (0, 3) and session.unconfirmed() == accepted - session.floor, cut
        # The store lacks whatever is past the first three: the board finds it on flash after the timeout.
        session.take(confirmed(Entry(1, min(3, accepted), min(3, accepted)), stamp=200))
        session.tend()
        clock.advance(1000)
        again: list[bytes] = []
        while True:
            session.tend()
            got = ack_all(session)
            if not got:
                break
            again += got
        # Sent again: what the store lacks (and flows the cut left unacknowledged, resent as the session resends
        # them), each a message the board had accepted.
        lacking = {b'{"boot": 1, "seq": %d}' % s for s in range(3, accepted)}
        assert lacking <= set(again) <= {b'{"boot": 1, "seq": %d}' % s for s in range(accepted)}, (cut, again)
        assert set(acknowledged) - {b'{"boot": 1, "seq": %d}' % s for s in range(3)} <= set(again), cut
        assert session.dropped == 0, cut
        session.take(confirmed(Entry(1, accepted, accepted), stamp=300))
        assert session.unconfirmed() == 0, cut


CONFIRMATION_VECTORS = json.loads((VECTORS / "confirmation.json").read_text())


@pytest.mark.parametrize("vector", CONFIRMATION_VECTORS["messages"], ids=lambda v: v["name"])
def test_the_vectors_encode_and_decode(vector: dict[str, Any]) -> None:
    entries = [Entry(b, s, t, tuple((first, last) for first, last in r)) for b, s, t, r in vector["entries"]]
    assert encode(vector["stamp"], entries).hex() == vector["hex"]
    assert decode(bytes.fromhex(vector["hex"])) == (vector["stamp"], entries)


@pytest.mark.parametrize("vector", CONFIRMATION_VECTORS["invalid"], ids=lambda v: v["name"])
def test_what_is_not_a_confirmation_is_refused_and_ignored(vector: dict[str, Any], clock: Clock) -> None:
    data = bytes.fromhex(vector["hex"])
    with pytest.raises(ValueError):
        decode(data)
    session = confirming(journal_ring.RingJournal(NorPartition(8), record_max=512), 1)
    send(session, 1, range(3))
    ack_all(session)
    session.take(data)  # the board neither fails nor takes anything from it
    assert session.floor == 0 and session.stamp == -1


def test_the_board_reads_the_vectors_as_the_recorder_means_them(clock: Clock) -> None:
    """Boots 3 and 4 with ten messages each: vector 2 confirms boot 3 and the first two of boot 4, and the board
    sends boot 4's seq 2-4 again (the first gap listed; the next confirmation lists the rest)."""
    part = NorPartition(8)
    for boot in (3, 4):
        session = confirming(journal_ring.RingJournal(part, record_max=512), boot)
        send(session, boot, range(10))
        ack_all(session)
    session.take(bytes.fromhex(CONFIRMATION_VECTORS["messages"][1]["hex"]))
    assert session.floor == 12
    session.tend()
    assert [bytes(p.payload) for p in drain(session)] == [b'{"boot": 4, "seq": %d}' % s for s in (2, 3, 4)]


def test_a_message_acknowledged_after_the_clock_started_gets_its_own_timeout(new_store: Store, clock: Clock) -> None:
    session = boot(new_store, 1, timeout_s=5)
    send(session, 1, range(5))
    ack_all(session)
    session.tend()  # the clock starts for these five
    clock.advance(3000)
    send(session, 1, range(5, 8))
    ack_all(session)
    clock.advance(2000)
    session.tend()
    assert ack_all(session) == [b'{"boot": 1, "seq": %d}' % s for s in range(5)]
    clock.advance(4999)
    session.tend()
    assert ack_all(session) == []
    clock.advance(1)
    session.tend()  # five seconds after the clock started again: all eight are due; the batch after the last goes
    assert ack_all(session) == [b'{"boot": 1, "seq": %d}' % s for s in range(5, 8)]


def test_the_recorder_lists_the_boots_with_news_then_gaps_then_the_newest_and_one_in_turn() -> None:
    ledger = Ledger()
    for boot in range(1, 13):
        ledger.stored("b", boot, 0)
    newest = [7, 8, 9, 10, 11, 12]

    def listed(stamp: int) -> list[int]:
        return [e.boot for e in decode(ledger.confirmation("b", stamp))[1]]

    assert listed(1) == [1, 2, 3, 4, 5, 6, 7, 8]  # news in all: the oldest eight (as many as a board maps)
    assert "b" in ledger.dirty  # and the rest at the next confirmation, with the first older boot in turn
    assert listed(2) == [1, 6, *newest]
    assert listed(3) == [2, 6, *newest]  # no news: the six newest, the next older boot in turn, the newest
    ledger.stored("b", 1, 0)  # a board sends boot 1's message again: it is asking about boot 1
    assert listed(4) == [1, 3, *newest]
    # The broker delivering a stored message again to the recorder (DUP set) is no news of its boot.
    ledger.stored("b", 2, 0, redelivered=True)
    assert listed(5) == [4, 6, *newest]
    # A boot with a gap is listed however old, for as long as the gap lasts: the board must send it again.
    ledger.stored("b", 2, 5)  # seq 1-4 of boot 2 missing
    assert listed(6) == [2, 5, *newest]
    assert listed(7) == [2, 6, *newest]
    assert listed(8) == [1, 2, *newest]  # the turn goes round the older boots not listed otherwise


def test_boots_confirmed_while_an_older_one_held_the_floor_back_are_remembered(clock: Clock) -> None:
    session = three_boots_of_five()
    session.take(confirmed(Entry(1, 3, 5, ((3, 3),)), Entry(2, 5, 5), Entry(3, 5, 5)))
    assert session.floor == 3  # boot 1's seq 3 holds it back
    session.take(confirmed(Entry(1, 5, 5), stamp=101))  # later, boot 1 alone: the floor runs on through 2 and 3
    assert session.floor == 15 and session.unconfirmed() == 0


def test_a_reported_gap_comes_before_new_messages_and_before_a_sweep(clock: Clock) -> None:
    from dmqtt.errors import QueueFull

    session = confirming(journal_ring.RingJournal(NorPartition(8), record_max=512), 1, timeout_s=1)
    send(session, 1, range(10))
    ack_all(session)
    session.tend()
    clock.advance(1000)
    session.tend()  # an overdue sweep is under way...
    assert len(ack_all(session)) == 8 and session._sweep_to
    send(session, 1, range(10, 34))  # ... and new messages fill the slots: 24 of 32 taken, 8 left
    session.take(confirmed(Entry(1, 4, 10, ((4, 5),))))  # the recorder names a gap: it goes first
    with pytest.raises(QueueFull):
        session.accept(b"sensors/b", b"more", 1)  # (connected: new ones wait while the repair has no room)
    assert not session._sweep_to
    session.lost()
    session.accept(b"sensors/b", b"offline", 1)  # offline, the queue takes them as ever


def test_held_at_an_older_boot_the_recorder_has_not_listed_the_board_sends_one_of_its_messages(clock: Clock) -> None:
    session = three_boots_of_five()
    session.take(confirmed(Entry(1, 5, 5), Entry(3, 5, 5)))  # nothing of boot 2: the floor waits at its start
    session.tend()
    assert session.floor == 5 and ack_all(session) == [b'{"boot": 2, "seq": 0}']  # the recorder will list boot 2
    session.take(confirmed(Entry(2, 5, 5), stamp=101))
    assert session.unconfirmed() == 0


def test_held_at_an_older_boot_its_message_goes_before_an_overdue_sweep(clock: Clock) -> None:
    session = three_boots_of_five()
    session.tend()  # arms the deadline
    session.lost()
    clock.advance(5000)
    session.tend()  # overdue while offline: a sweep from the floor waits for the connection
    assert session._hi and session._sweep
    session.take(confirmed(Entry(1, 5, 5), Entry(3, 5, 5)))  # boot 1 stored, boot 2 not listed: held at its start
    session.connected(True)
    session.tend()
    # Boot 2's first message alone, not the sweep's batch (which would walk the ring a batch per timeout).
    assert ack_all(session) == [b'{"boot": 2, "seq": 0}']
    session.take(confirmed(Entry(2, 5, 5), stamp=101))
    assert session.unconfirmed() == 0


def test_a_boot_stored_whole_behind_the_floor_is_remembered_across_a_reboot(clock: Clock) -> None:
    part = NorPartition(8)
    for boot in (1, 2, 3):
        session = confirming(journal_ring.RingJournal(part, record_max=512), boot)
        send(session, boot, range(5))
        ack_all(session)
    session.take(confirmed(Entry(1, 3, 5, ((3, 3),)), Entry(2, 5, 5)))
    session.tend()  # boot 2 is stored whole, boot 1 still holds the floor back: journaled
    assert struct.pack(">III", 2, 6, 5) in records(session, rec.EPOCH)
    session = confirming(journal_ring.RingJournal(part, record_max=512), 4)  # a reboot
    session.take(confirmed(Entry(1, 5, 5)))  # boot 1 alone: the floor runs on through boot 2, from the flash
    assert session.floor == 10


def test_the_recorder_keeps_confirming_a_board_with_recent_news(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    ledger = Ledger()
    ledger.stored("b", 1, 0)
    ledger.stored("c", 1, 0)
    now[0] += 20
    ledger.stored("c", 1, 1)
    now[0] += 15
    assert ledger.recent(30) == {"c"}  # b's news is 35 s old: it has had its confirmations


def test_a_board_maps_as_many_boots_as_the_recorder_remembers(clock: Clock) -> None:
    """A board that loses power often reboots many times before a confirmation reaches it (make soak's chaos
    campaign: 11 boots a board while the recorder was down): none of those boots is given up for want of room in
    the epoch table while the recorder still remembers it; one boot more gives up the oldest, counted."""
    part = NorPartition(16)
    for boot in range(1, BOOTS_KEPT + 1):  # three messages a boot, acknowledged, none confirmed yet
        session = confirming(journal_ring.RingJournal(part, record_max=512), boot)
        send(session, boot, range(3))
        ack_all(session)
    assert session.dropped == 0 and session.unconfirmed() == 3 * BOOTS_KEPT
    # The recorder lists 8 boots a confirmation: two of them cover every boot.
    session.take(confirmed(*(Entry(b, 3, 3) for b in range(1, 9))))
    session.take(confirmed(*(Entry(b, 3, 3) for b in range(9, BOOTS_KEPT + 1)), stamp=101))
    assert session.unconfirmed() == 0 and session.dropped == 0
    session.tend()  # (the client's poll: the floor, moved 48 on, is journaled)
    for boot in range(BOOTS_KEPT + 1, 2 * BOOTS_KEPT + 2):  # 17 boots more, none confirmed
        session = confirming(journal_ring.RingJournal(part, record_max=512), boot)
        send(session, boot, range(3))
        ack_all(session)
    assert session.dropped == 3  # the seventeenth gave up the oldest boot's three, counted once
