"""The client on CPython over a scripted transport: what arrived before a connection failed under a write is
still read. A broker that closes on a message it refuses (Mosquitto 2.0 on 3.1.1, for an ACL denial) sends its
acknowledgement first; when our next message is unread on its side its close is a reset, and then our write
fails with the acknowledgement still in the socket (Linux keeps it readable: measured). Unread, the flow is
resent, refused and lost again at every reconnect: a board that never completes its run."""

from __future__ import annotations

import errno

import pytest

from dmqtt import codec_host as codec
from dmqtt.client import MQTTClient
from dmqtt.journal_ring import RingJournal
from tests.unit.host_client import ScriptedInbox
from tests.unit.nor import NorPartition

pytestmark = pytest.mark.usefixtures("micropython_time")


class ResetAfterAck(ScriptedInbox):
    """A transport whose peer answers CONNACK, then PUBACKs the first PUBLISH and resets: every later write
    fails with ECONNRESET, the PUBACK waiting to be read."""

    def __init__(self) -> None:
        super().__init__(codec.encode_connack(False, 0, codec.V311))
        self.publishes = 0
        self.reset = False

    def send(self, buf: bytearray, start: int, end: int) -> int:
        if self.reset:
            raise OSError(errno.ECONNRESET, "Connection reset by peer")
        data = bytes(buf[start:end])
        if data[0] >> 4 == codec.PUBLISH:
            self.publishes += 1
            if self.publishes == 1:
                pid = int.from_bytes(data[-2 - len(b"m0") : -len(b"m0")], "big")
                self.inbox += codec.encode_ack(codec.PUBACK, pid, 0, codec.V311)
                self.reset = True
        return len(data)

    def wait(self, timeout_ms: int, writable: bool = False) -> bool:
        return writable or bool(self.inbox)

    def close(self) -> None:
        pass


def test_an_acknowledgement_that_arrived_before_the_reset_is_not_lost() -> None:
    client = MQTTClient("salvage", RingJournal(NorPartition(4), 512), codec.V311, window=8)
    client.open()
    transport = ResetAfterAck()
    client.connect(transport)
    first = client.publish(b"t/1", b"m0", 1)
    assert client.outstanding() == 1 and transport.reset  # sent; the PUBACK is waiting, unread
    lost: list[str] = []
    client.on_disconnect = lambda code, reason: lost.append(reason)
    client.publish(b"t/1", b"m1", 1)  # accepted into the journal (publish() says so), then the write fails
    assert not client.connected and lost and "connection lost while sending" in lost[0]
    assert client.published == 1 and client.outstanding() == 1, "the first flow's PUBACK was not read"
    assert first not in [client.session._pid[i] for i in range(32) if client.session._state[i]]
