"""The mark of a copy sent again on purpose: the board's end-to-end confirmation writes it (firmware/dmqtt/confirm.py)
as the recorder, the campaigns and the audit read it (dmqtt_telemetry.format.RESENT_MARK), on the wire only in
MQTT 5.0 and only for such a copy."""

from __future__ import annotations

from dmqtt import codec_host as codec
from dmqtt import confirm, journal_ring
from dmqtt_telemetry.format import RESENT_MARK
from tests.unit.dmqtt.test_session import drain
from tests.unit.nor import NorPartition


def wire(version: int) -> list[codec.Packet]:
    """A message accepted, then sent again by end-to-end confirmation's repair (its journaled PUB requeued as
    ConfirmingSession does it): the PUBLISH packets of both, in order."""
    session = confirm.ConfirmingSession(journal_ring.RingJournal(NorPartition(4), 512), version, 8, 8, 4)
    session.open()
    pid = session.accept(b"sensors/b/telemetry", b"{}", 2)
    n = session.journal.read(session._addr[session._find(pid)])
    assert not session.resent_props(session.journal.record)  # a first copy: no mark
    session._requeue(session.journal.record[:n])
    session.connected(True)
    return drain(session)


def test_only_a_copy_sent_again_carries_the_mark_and_only_in_mqtt5() -> None:
    first, again = wire(codec.V5)
    assert not first.props and again.props == {codec.USER_PROPERTY: [RESENT_MARK]}
    assert first.payload == again.payload and first.pid != again.pid
    assert not any(p.props for p in wire(codec.V311))  # 3.1.1 has no place for it
