"""The part of a scripted transport that every test of the board's client on CPython shares (the broker's bytes,
read by the client); the time functions it needs are the micropython_time fixture (tests/unit/conftest.py)."""

from __future__ import annotations

from dmqtt import codec_host as codec


class ScriptedInbox:
    """What the broker sent and the client has not read yet (`inbox`), read as a non-blocking socket is."""

    def __init__(self, first: bytes = b"") -> None:
        self.inbox = bytearray(first)

    def readinto(self, buf: bytearray | memoryview) -> int | None:
        if not self.inbox:
            return None
        n = min(len(buf), len(self.inbox))
        buf[:n] = self.inbox[:n]
        del self.inbox[:n]
        return n


class Broker(ScriptedInbox):
    """A broker in memory (MQTT 3.1.1 unless told): CONNACK first (with `connack_props` on 5.0); what the client
    sends, decoded (`sent`); with `acking`, a PUBACK for every QoS 1 PUBLISH as soon as it is written."""

    def __init__(self, acking: bool = False, version: int = codec.V311, connack_props: dict | None = None) -> None:
        super().__init__(codec.encode_connack(False, 0, version, connack_props))
        self.acking = acking
        self.version = version
        self.sent: list[codec.Packet] = []
        self._decoder = codec.PacketDecoder(version, 1 << 16)

    def send(self, buf: bytearray, start: int, end: int) -> int:
        for packet in self._decoder.packets(bytes(buf[start:end])):
            self.sent.append(packet)
            if self.acking and packet.type == codec.PUBLISH and packet.qos == 1:
                self.inbox += codec.encode_ack(codec.PUBACK, packet.pid, 0, self.version)
        return end - start

    def wait(self, timeout_ms: int, writable: bool = False) -> bool:
        return writable or bool(self.inbox)

    def close(self) -> None:
        pass

    def publishes(self) -> list[tuple[str, bytes]]:
        return [(p.topic, bytes(p.payload)) for p in self.sent if p.type == codec.PUBLISH]
