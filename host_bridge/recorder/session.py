"""The recorder's half of its persistent MQTT session: what it must remember about packet identifiers across its
own restarts. Kept apart from the storage (host_bridge/recorder/store.py persists it in the write-ahead log's
header and records) and from the connection (host_bridge/recorder/recorder.py)."""

from __future__ import annotations

import hashlib
from typing import Any


def _digest(topic: str, payload: bytes) -> str:
    return hashlib.blake2b(topic.encode() + b"\0" + payload, digest_size=8).hexdigest()


class ReceiveSession:
    """Incoming QoS 1/2 flows as the recorder sees them.

    - `seen`: per packet id, the QoS and a digest of the last delivery stored under it. The broker sets DUP only
      when it redelivers to this recorder [MQTT-3.3.1-1]; the same id, QoS and content as the delivery already
      stored means the recorder stored it and the broker never saw the acknowledgement. A new message under a
      reused id has DUP 0 or other content.
    - `qos2_unreleased`: QoS 2 ids acknowledged with PUBREC and not yet released by PUBREL (MQTT 5.0 answers a
      PUBREL for any other id with 0x92 Packet Identifier not found)."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[int, str]] = {}
        self.qos2_unreleased: set[int] = set()

    def delivered(self, topic: str, qos: int, packet_id: int, payload: bytes, dup: bool) -> bool:
        """Note a delivery; True when it is a redelivery of the one already stored under its id."""
        if not qos:
            return False
        key = (qos, _digest(topic, payload))
        same = self.seen.get(packet_id) == key
        self.seen[packet_id] = key
        if qos == 2:
            self.qos2_unreleased.add(packet_id)
        return same and dup

    def release(self, packet_id: int) -> bool:
        """PUBREL arrived: True when the id was awaiting it."""
        known = packet_id in self.qos2_unreleased
        self.qos2_unreleased.discard(packet_id)
        return known

    def snapshot(self) -> dict[str, Any]:
        """The state as the log's header keeps it (docs/telemetry-parquet.md)."""
        return {
            "seen": {str(pid): list(v) for pid, v in self.seen.items()},
            "qos2_unreleased": sorted(self.qos2_unreleased),
        }

    @classmethod
    def restore(cls, header: dict[str, Any]) -> ReceiveSession:
        session = cls()
        session.seen = {int(pid): (v[0], v[1]) for pid, v in header["seen"].items()}
        session.qos2_unreleased = set(header["qos2_unreleased"])
        return session
