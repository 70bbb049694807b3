"""A journal in a format this firmware does not know: one written by newer firmware (a downgrade) is refused with
a JournalError that says what to do, never erased as foreign data (its messages are the newer firmware's to
resume); a sector header torn mid-program, whatever its format byte, is foreign data as before. Older formats
are read (format 1: tests/unit/dmqtt/test_session.py)."""

from __future__ import annotations

import struct
from binascii import crc32
from pathlib import Path

import pytest

from dmqtt import journal_record as rec
from dmqtt.errors import JournalError
from dmqtt.journal_file import FileJournal
from dmqtt.journal_ring import RingJournal
from dmqtt.session import Session
from tests.unit.nor import SECTOR, NorPartition


def written(part: NorPartition) -> None:
    session = Session(RingJournal(part, 512))
    session.open()
    session.accept(b"t/1", b"kept", 1)


def set_format(part: NorPartition, sector: int, version: int, fix_crc: bool) -> None:
    at = sector * SECTOR
    header = bytearray(part.data[at : at + 16])
    assert header[:4] == b"DMQJ" and header[4] == rec.FORMAT
    header[4] = version
    if fix_crc:
        struct.pack_into(">I", header, 12, crc32(bytes(header[:12])) & 0xFFFFFFFF)
    part.data[at : at + 16] = header


def test_a_ring_written_by_newer_firmware_is_refused_not_erased() -> None:
    part = NorPartition(4)
    written(part)
    set_format(part, 0, rec.FORMAT + 1, fix_crc=True)
    before = bytes(part.data)
    with pytest.raises(JournalError) as refused:
        Session(RingJournal(part, 512)).open()
    assert f"format {rec.FORMAT + 1} is newer than {rec.FORMAT}: flash newer firmware or erase it" in str(refused.value)
    assert bytes(part.data) == before, "the newer firmware's journal was written to"


def test_a_torn_header_is_foreign_data_whatever_its_format_byte() -> None:
    part = NorPartition(4)
    written(part)
    set_format(part, 0, rec.FORMAT + 1, fix_crc=False)  # a program cut short: the CRC does not match
    journal = RingJournal(part, 512)
    Session(journal).open()
    assert any("without a valid header" in note for note in journal.notes), journal.notes


def test_a_journal_file_written_by_newer_firmware_is_refused_not_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "mqtt.journal"
    session = Session(FileJournal(str(path), 512))
    session.open()
    session.accept(b"t/1", b"kept", 1)
    data = bytearray(path.read_bytes())
    data[4] = rec.FORMAT + 1
    path.write_bytes(bytes(data))
    with pytest.raises(JournalError, match="is newer than"):
        Session(FileJournal(str(path), 512)).open()
    assert path.read_bytes() == bytes(data) and not path.with_name("mqtt.journal.corrupt").exists()
