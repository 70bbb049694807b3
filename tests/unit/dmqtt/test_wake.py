"""The cheap wake (dmqtt/wake.py): one PUB record where the hint says the ring's head ends, byte for byte what
Session.accept() writes, and nothing written when the flash does not say what the hint says (a reset that kept RTC
memory but cut a program short, a stale or spoiled hint); RTC memory as the library lays it out (the client's
byte, the hint, the application's bytes, each kept when another is written); and journal() and mark(), the
public calls, on a chip's RTC memory and partition: at the hint, and whole when there is none or it fails."""

from __future__ import annotations

import copy
import struct
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from dmqtt import codec_host as codec
from dmqtt import journal_ring
from dmqtt import wake as tail
from dmqtt.errors import QueueFull
from dmqtt.journal_file import FileJournal
from dmqtt.session import Session
from tests.unit.dmqtt.test_session import ack, drain
from tests.unit.nor import NorPartition, PowerCut

SLOTS = 32
TOPIC = b"sensors/shed-1/telemetry"
# The hint's fields: (offset, struct format), as docs/low-power.md gives them.
SECTOR, OFFSET, PREV, NEXT_PID, FREE_PIDS, SERIAL, MARK, BUSY = (
    (1, ">H"), (3, ">H"), (5, ">H"), (7, ">H"), (9, ">H"), (11, ">I"), (15, ">I"), (19, ">H"))  # fmt: skip
HEADER = (25, "16s")


def field(hint: bytes | bytearray, which: tuple[int, str]) -> object:
    return struct.unpack_from(which[1], hint, which[0])[0]


def spoiled(hint: bytes | bytearray, which: tuple[int, str], value: object) -> bytearray:
    out = bytearray(hint)
    struct.pack_into(which[1], out, which[0], value)
    return out


def awake(part: NorPartition) -> Session:
    """A sending wake's session: the whole journal opened."""
    session = Session(journal_ring.RingJournal(part, 512), 5, 0, SLOTS, 16)
    session.open()
    return session


def sending_wake(part: NorPartition, readings: int, acked: int) -> bytearray:
    """Readings accepted and sent, the first `acked` of them acknowledged; the hint the wake leaves its sleep."""
    session = awake(part)
    for n in range(readings):
        session.accept(TOPIC, b"reading %d" % n, 1, mark=session.mark + 1)
    session.connected(True)
    for packet in drain(session)[:acked]:
        ack(session, codec.PUBACK, packet.pid)
    found = tail.hint(session)
    assert found is not None
    return bytearray(found)


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
    stale = bytearray(hint)
    part.cut_at = part.ops + 1
    with pytest.raises(PowerCut):
        tail.append(part, hint, SLOTS, TOPIC, b"x" * cut, 1)
    part.cut_at = 0
    before = bytes(part.data)
    start = int(field(stale, SECTOR)) * 4096 + int(field(stale, OFFSET))  # type: ignore[call-overload]
    torn = any(b != 0xFF for b in part.data[start:][: cut + 40])
    if torn:
        assert tail.append(part, stale, SLOTS, TOPIC, b"again", 1) == -1
        assert part.data == before  # nothing written
    session = awake(part)  # the whole open: the torn record sealed, or nothing there
    assert session.outstanding() == 2
    session.accept(TOPIC, b"again", 1, mark=session.mark + 1)
    assert awake(part).outstanding() == 3


def test_a_head_with_sealed_padding_still_gives_a_hint_once_a_record_follows_it() -> None:
    """The whole open after a torn append seals its bytes (padding); the wakes after it keep appending at a hint
    (a node's reading goes to its gateway at its wake only when it does) once a record ends the head again."""
    part = NorPartition(6, seed=3)
    hint = sending_wake(part, readings=3, acked=1)
    part.cut_at = part.ops + 1
    with pytest.raises(PowerCut):
        tail.append(part, hint, SLOTS, TOPIC, b"x" * 30, 1)
    part.cut_at = 0
    session = awake(part)  # the whole open: the torn bytes sealed
    start = int(field(hint, SECTOR)) * 4096 + int(field(hint, OFFSET))  # type: ignore[call-overload]
    assert part.data[start] == 0x00, "the cut left nothing to seal: pick another seed"
    assert tail.hint(session) is None  # the head ends in padding: no record ends where the next one goes
    session.accept(TOPIC, b"after the seal", 1, mark=session.mark + 1)
    found = tail.hint(session)
    assert found is not None
    after = bytearray(found)
    assert tail.append(part, after, SLOTS, TOPIC, b"at the hint", 1) == 4
    resumed = awake(part)
    resumed.connected(True)
    assert [p.payload for p in drain(resumed)][-2:] == [b"after the seal", b"at the hint"]


def test_a_hint_the_flash_does_not_bear_out_appends_nothing() -> None:
    part = NorPartition(6)
    hint = sending_wake(part, readings=4, acked=4)
    before = bytes(part.data)
    offset, prev, sector = (int(field(hint, f)) for f in (OFFSET, PREV, SECTOR))  # type: ignore[call-overload]
    for which, value, found in [
        (HEADER, bytes(16), -1),  # the head was reclaimed and opened again since
        (OFFSET, offset + 10, -1),  # past the end: no record ends there
        (OFFSET, offset - 10, -1),  # inside the last record
        (PREV, prev + 1, -1),
        (SECTOR, (sector + 1) % 6, -1),
        (FREE_PIDS, 0, 0),  # no packet id known free: the session must look
        (BUSY, SLOTS, 0),  # every slot taken: the application sends first
    ]:
        assert tail.append(part, spoiled(hint, which, value), SLOTS, TOPIC, b"r", 1) == found, which
        assert bytes(part.data) == before, which
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


# -- RTC memory and the public calls, on a chip's machine and esp32 modules ---------------------------------------


class FakeRTC:
    memory_bytes = b""

    def memory(self, data: bytes | None = None) -> bytes | None:
        if data is None:
            return FakeRTC.memory_bytes
        if len(data) > 2048:
            raise ValueError("buffer too long")
        FakeRTC.memory_bytes = bytes(data)
        return None


@pytest.fixture
def chip(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    """A chip's machine (RTC memory, the reset cause: a wake from deep sleep unless a test says otherwise) and esp32
    (the mqttlog partition: 6 sectors of NOR flash) modules, as dmqtt.wake and dmqtt.journal find them."""
    FakeRTC.memory_bytes = b""
    part = NorPartition(6)
    machine = SimpleNamespace(RTC=FakeRTC, DEEPSLEEP_RESET=4, reset_cause=lambda: 4)
    partition = SimpleNamespace(TYPE_DATA=1, find=lambda kind, label: [part] if label == "mqttlog" else [])
    monkeypatch.setitem(sys.modules, "machine", machine)
    monkeypatch.setitem(sys.modules, "esp32", SimpleNamespace(Partition=partition))
    monkeypatch.setattr(tail, "_session", None)
    monkeypatch.setattr(tail, "_appended", [None])
    yield SimpleNamespace(machine=machine, part=part)


def next_wake(chip: SimpleNamespace, power_on: bool = False) -> None:
    """The board resets: RAM (the whole session this wake opened) is lost, RTC memory kept unless a power-on."""
    tail._session = None
    tail._appended[0] = None
    chip.machine.reset_cause = (lambda: 1) if power_on else (lambda: 4)
    if power_on:
        FakeRTC.memory_bytes = b""


def test_rtc_memory_keeps_the_clients_byte_the_hint_and_the_applications_bytes(chip: SimpleNamespace) -> None:
    tail.memory(b"counter=7")  # before any hint
    assert tail.memory() == b"counter=7" and FakeRTC.memory_bytes[:3] == b"\xd0\x00\x00"
    FakeRTC.memory_bytes = b"\xd3" + FakeRTC.memory_bytes[1:]  # the client's flags
    tail.keep(awake(chip.part))  # an empty journal: no head, no hint
    assert FakeRTC.memory_bytes == b"\xd3\x00\x00counter=7"
    sending_wake(chip.part, readings=3, acked=1)
    session = awake(chip.part)
    hint = tail.hint(session)
    tail.keep(session)
    assert FakeRTC.memory_bytes[:3] == b"\xd3\x00\x29" and FakeRTC.memory_bytes[3:44] == hint
    assert tail.memory() == b"counter=7"  # the hint written: the application's bytes kept
    tail.memory(b"counter=8")
    assert FakeRTC.memory_bytes[:44] == b"\xd3\x00\x29" + hint and tail.memory() == b"counter=8"
    assert tail.resume() == tail.point(hint) == (0, 1, 1)  # the head sector, its sequence number, the oldest live
    with pytest.raises(ValueError):
        tail.memory(bytes(2048))  # the two pass RTC memory's 2,048 bytes
    FakeRTC.memory_bytes = b"the application's own"  # not laid out by this library: no hint in it
    assert tail.resume() is None


def test_journal_appends_at_the_hint_and_opens_the_whole_journal_only_without_one(
    chip: SimpleNamespace, capsys: pytest.CaptureFixture[str]
) -> None:
    next_wake(chip, power_on=True)
    assert tail.mark() == 0  # no hint: the whole journal, opened for this wake
    assert tail.journal(TOPIC, b"r0", 1, SLOTS) == 1 and tail._session is not None
    for n in range(1, 5):
        next_wake(chip)
        assert tail.mark() == n
        assert tail.journal(TOPIC.decode(), b"r%d" % n, 1, SLOTS) == n + 1
        assert tail._session is None  # at the hint: no session made, no journal module's open
    assert tail.resume() is not None
    next_wake(chip, power_on=True)  # RTC memory lost: the whole open, which finds all five
    assert tail.resume() is None and tail.mark() == 5
    session = awake(chip.part)
    session.connected(True)
    assert [p.payload for p in drain(session)] == [b"r%d" % n for n in range(5)]
    assert tail.journal(TOPIC, b"r5", 1, SLOTS) == 6  # (the power-on's whole open leaves a hint)
    # A hint the flash does not bear out: the whole open instead, said, and the reading journaled all the same.
    next_wake(chip)
    FakeRTC.memory_bytes = FakeRTC.memory_bytes[:30] + b"\x00" + FakeRTC.memory_bytes[31:]  # (in the header)
    assert tail.journal(TOPIC, b"r6", 1, SLOTS) == 7 and tail._session is not None
    assert "not where the last wake left it" in capsys.readouterr().out
    next_wake(chip)
    assert tail.journal(TOPIC, b"r7", 1, SLOTS) == 8 and tail._session is None  # a good hint again


def test_a_journal_whose_slots_are_full_refuses_the_reading(chip: SimpleNamespace) -> None:
    next_wake(chip, power_on=True)
    for n in range(3):
        tail.journal(TOPIC, b"r%d" % n, 1, 3)
        next_wake(chip)
    with pytest.raises(QueueFull):
        tail.journal(TOPIC, b"r3", 1, 3)  # the application sends first
    assert awake(chip.part).outstanding() == 3


def test_done_completes_the_reading_journaled_at_the_hint_as_the_session_would(chip: SimpleNamespace) -> None:
    """A node's wake: journal() at the hint, the gateway's acknowledgement, done(): a DONE record byte for byte the
    session's for a PUBACK, and the hint moved on, so that the next wake appends after it and a whole open finds
    nothing in flight. Without a hint (the whole journal opened) there is nothing for last() and done()."""
    next_wake(chip, power_on=True)
    tail.journal(TOPIC, b"r0", 1, SLOTS)
    assert tail.last() is None and not tail.done(1)  # (the whole open: the client's to finish)
    next_wake(chip)
    assert tail.journal(TOPIC, b"r1", 2, SLOTS) == 2
    pid, serial = tail.last()  # type: ignore[misc]
    assert serial == 2
    assert tail.done(pid)
    session = awake(chip.part)
    assert session.outstanding() == 1  # r0, whose wake opened the whole journal and sent nothing
    # The record the session writes when an acknowledgement ends a flow: DONE (3), its body the packet id.
    framed = b"\x03\x00\x02" + struct.pack(">H", pid)
    assert framed + struct.pack(">I", zlib.crc32(framed)) in bytes(chip.part.data)
    next_wake(chip)
    assert tail.journal(TOPIC, b"r2", 1, SLOTS) == 2  # at the hint done() left: r0 and r2 in flight
    next_wake(chip, power_on=True)
    session = awake(chip.part)
    session.connected(True)
    assert [p.payload for p in drain(session)] == [b"r0", b"r2"]
