"""The ring journal's erase-ahead: the erase that opening a sector needs is done while the application waits in
poll(), not inside a publish(). On a chip an erase takes tens of milliseconds with the flash cache off; a
publish() that met one would stall the application that long. Counted on an in-memory NOR partition with the
client over a broker that acknowledges at once."""

from __future__ import annotations

import pytest

from dmqtt import codec_host as codec
from dmqtt.client import MQTTClient
from dmqtt.errors import JournalError
from dmqtt.journal_ring import RingJournal
from tests.unit.host_client import Broker
from tests.unit.nor import NorPartition

pytestmark = pytest.mark.usefixtures("micropython_time")


def run(poll_ms: int, messages: int = 600, size: int = 200) -> tuple[int, int, int, int]:
    """(erases inside publish(), erases inside poll(), sectors opened, most programs inside one publish()) over
    `messages` QoS 1 messages of `size` bytes, the application polling `poll_ms` between them (0: it never
    waits)."""
    flash = NorPartition(6)
    client = MQTTClient("ahead", RingJournal(flash, 512), codec.V311, window=8)
    client.open()
    client.connect(Broker(acking=True))
    before = flash.erases
    client.poll(poll_ms)  # the application waits once before its first message, as after any start-up
    in_publish, in_poll, most_programs = 0, flash.erases - before, 0
    for n in range(messages):
        before, programs = flash.erases, flash.ops - flash.erases
        client.publish(b"sensors/ahead/t", b"%05d" % n + b"x" * (size - 5), 1, timeout_ms=1000)
        in_publish += flash.erases - before
        most_programs = max(most_programs, flash.ops - flash.erases - programs)
        before = flash.erases
        client.poll(poll_ms)
        in_poll += flash.erases - before
    return in_publish, in_poll, flash.erases, most_programs


def test_an_application_that_waits_never_meets_an_erase_in_publish() -> None:
    in_publish, in_poll, total, _ = run(poll_ms=5)
    assert total >= 20 and in_poll == total and in_publish == 0, (in_publish, in_poll, total)


@pytest.mark.parametrize("size", [107, 141, 196, 200])
def test_an_application_that_waits_programs_only_its_record_in_publish(size: int) -> None:
    """The next head (its header and META snapshot, and the reclaim of the oldest sector once the ring wraps) is
    opened while the application waits: a publish() that would have opened it programs one record, as any other
    does (the ring wraps about three times). Opened after the poll's acknowledgements are journaled: their
    records take room too, and sizes such as these found the head full after them when it was opened before."""
    assert run(poll_ms=5, size=size)[3] == 1
    assert run(poll_ms=0, size=size)[3] >= 3  # never idle: the publish() that fills the head opens the next


def test_erasing_ahead_erases_no_more_than_erasing_when_needed() -> None:
    ahead = run(poll_ms=5)
    never_idle = run(poll_ms=0)  # poll(0) is no wait: every erase falls in publish(), as before
    assert never_idle[1] == 0 and never_idle[0] == never_idle[2]
    assert ahead[2] <= never_idle[2] + 1, (ahead, never_idle)


class Recorded(NorPartition):
    """A partition that notes each erase, and can refuse them."""

    def __init__(self, sectors: int, log: list[str], failing: bool = False) -> None:
        super().__init__(sectors)
        self.log, self.failing = log, failing

    def ioctl(self, op: int, arg: int) -> int:
        if op == 6:
            self.log.append("erase")
            if self.failing:
                raise OSError(5)
        return super().ioctl(op, arg)


def test_the_ring_hushes_its_link_around_every_erase_and_after_a_failed_one_too() -> None:
    """`RingJournal.hush` (a serial board's LinkTransport.hush) is told before each sector erase and after it,
    also when the erase fails: a bridge left paused would write nothing for half a second."""
    log: list[str] = []
    flash = Recorded(6, log)
    journal = RingJournal(flash, 512)
    journal.hush = lambda start: log.append("hush" if start else "resume")
    client = MQTTClient("hushed", journal, codec.V311, window=8)
    client.open()
    client.connect(Broker(acking=True))
    for n in range(120):
        client.publish(b"sensors/hushed/t", b"%05d" % n + b"x" * 195, 1, timeout_ms=1000)
        client.poll(1)
    erases = log.count("erase")
    assert erases >= 4 and log == ["hush", "erase", "resume"] * erases
    flash.failing = True
    log.clear()
    with pytest.raises(JournalError):
        journal._erase(0)
    assert log == ["hush", "erase", "resume"]
