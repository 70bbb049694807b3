"""What each layer of the client expects of the one it is handed, as typing.Protocol classes: for type checkers
and the host (the firmware never loads this module: firmware/manifest.py leaves it out, and firmware code names
these types only in annotations and under `if False:` imports).

- Transport: what MQTTClient.connect() takes (dmqtt.transport.TCPTransport, plain or TLS; the serial link's
  dlink.transport.LinkTransport; a test's fake).
- Journal: what the session asks of a journal backend (dmqtt.journal_ring.RingJournal on a raw partition,
  dmqtt.journal_file.FileJournal on LittleFS), and JournalOwner: what a backend asks of its owner, the session
  (dmqtt.session.Session), when it replays the log at boot and when it moves live records out of a sector it
  reclaims.
- The client's hooks (MQTTClient.on_connect, on_disconnect, on_message, on_published)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

# The byte and text types the codec and the client take.
Bytes = bytes | bytearray | memoryview
Buffer = bytearray | memoryview  # writable
Text = str | bytes | bytearray | memoryview  # a topic: str, or its UTF-8 bytes
Props = dict[int, Any] | None  # MQTT 5.0 properties by id, or none


class Transport(Protocol):
    """A byte stream to the broker, non-blocking once open."""

    def send(self, buf: bytearray, start: int, end: int) -> int:
        """Write what the stream takes now of buf[start:end] (0 when it takes nothing yet); OSError when it is
        closed. Offsets rather than a slice: the client sends every packet from one buffer, allocating nothing."""
        ...

    def readinto(self, buf: bytearray | memoryview) -> int | None:
        """Read what has arrived: the byte count, None when nothing has, 0 when the peer has closed."""
        ...

    def wait(self, timeout_ms: int, writable: bool = False) -> bool:
        """Until the stream is readable (or writable) or the time is up; True when it is."""
        ...

    def close(self) -> None: ...


class JournalOwner(Protocol):
    """The session, as a journal backend sees it (docs/journal.md)."""

    def replay(self, rtype: int, body: memoryview, addr: int) -> None:
        """One valid record, in log order, at boot."""
        ...

    def is_live(self, rtype: int, body: memoryview, addr: int) -> bool:
        """Whether the record at `addr` still matters (a sector being reclaimed keeps only those)."""
        ...

    def holds(self, lo: int, hi: int) -> bool:
        """Whether a live record may lie at an address in [lo, hi): true wherever is_live could be (a sector
        being reclaimed for which this is false is not read at all)."""
        ...

    def moved(self, rtype: int, body: memoryview, old: int, new: int) -> None:
        """A live record now lives at `new`."""
        ...

    def snapshot(self, body: memoryview) -> int:
        """Write the META record's body (next packet id, serial, mark) into `body`; its length."""
        ...


class Journal(Protocol):
    """A journal backend: the owner writes a record's body into `body`, then commits it."""

    body: memoryview
    notes: list[str]

    def open(self, owner: JournalOwner) -> None:
        """Replay the log into the owner (and repair what a power cut left)."""
        ...

    def commit(self, rtype: int, n: int, defer: bool = False) -> int:
        """Seal the `n` bytes of `body` as a record of type `rtype` and program it (durable on return unless
        `defer`: then at the next sync()); its address."""
        ...

    def sync(self) -> None: ...

    def tend(self) -> None:
        """Idle-time upkeep (the ring's erase ahead), called while the application waits."""
        ...

    def scan(self, visit: Callable[[int, memoryview, int], None]) -> None:
        """visit(type, body, address) for every valid record, oldest first; visit must not read the journal."""
        ...

    # What read() read: the record's type, and its body at the start of a view of the read buffer.
    record_type: int
    record: memoryview

    def read(self, addr: int) -> int:
        """Read the record at `addr`: its body's length; its type in record_type and its body at the start of
        record (both valid until the next read)."""
        ...


class OnConnect(Protocol):
    def __call__(self, session_present: bool) -> None: ...


class OnDisconnect(Protocol):
    def __call__(self, code: int | None, reason: str) -> None: ...


class OnMessage(Protocol):
    def __call__(self, topic: str, payload: bytes, qos: int, retain: bool, dup: bool) -> None: ...


class OnPublished(Protocol):
    def __call__(self, pid: int, code: int) -> None: ...
