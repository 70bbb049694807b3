"""What each layer of the client expects of the one it is handed, as typing.Protocol classes: for type checkers
and the host (the firmware never loads this module: firmware/manifest.py leaves it out, and firmware code names
these types only in annotations and under `if False:` imports).

- Transport: what MQTTClient.connect() takes (dmqtt.transport.TCPTransport, plain or TLS; the serial link's
  dlink.transport.LinkTransport; a test's fake).
- Journal: what the session asks of a journal backend (dmqtt.journal_ring.RingJournal on a raw partition,
  dmqtt.journal_file.FileJournal on LittleFS), and JournalOwner: what a backend asks of its owner, the session
  (dmqtt.session.Session), when it replays the log at boot and when it moves live records out of a sector it
  reclaims.
- Engine: what the asyncio face (dmqtt.aio) drives of the blocking client (dmqtt.client.MQTTClient): its output
  buffer, the steps of a connection, and sending without blocking. The blocking API does not need these; they are
  public so that the two faces keep one engine's invariants through named members, not private ones.
- ReceiveSlots: the session's receive side as dmqtt.inbox and the asyncio face use it.
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


class Engine(Protocol):
    """MQTTClient as dmqtt.aio drives it. The packet being sent is tx_buf[tx_tail:tx_end]: nothing is waiting
    when tx_tail == tx_end. A connection is send_connect(), then take_connack() until it returns the session-present
    flag (None: not yet), then establish(present)."""

    tx_buf: bytearray  # the output buffer: every packet is encoded into it, one at a time
    tx_tail: int  # where the transport's next byte comes from
    tx_end: int  # the end of the packet being sent
    transport: Transport | None  # None while not connected
    last_tx: int  # ticks_ms when a byte last went (the keep-alive counts from it)
    ping_at: int  # ticks_ms of the PINGREQ awaiting its PINGRESP; -1: none
    acks: dict[int, Any]  # SUBACK and UNSUBACK answers by packet id, taken by the caller that waits for them

    def send_connect(self, transport: Transport) -> None:
        """Write CONNECT (the first packet of the connection) into the output buffer."""
        ...

    def take_connack(self) -> bool | None:
        """Read what has arrived; the session-present flag once CONNACK is in, else None. MQTTError on a refusal."""
        ...

    def establish(self, present: bool) -> bool:
        """The connection is up: the session resumed or started again, the hooks told; returns `present`."""
        ...

    def write_packet(self, n: int, packets: bool = False) -> None:
        """The first n bytes of tx_buf are the next packet to send."""
        ...

    def send_pending(self, block: bool) -> bool:
        """Send what is left of the packet being sent; True once all of it went (block: wait until it has)."""
        ...

    def pump(self) -> None:
        """Send what the session has queued, packet after packet, as far as the transport takes it now."""
        ...

    def ping_if_due(self) -> None:
        """A PINGREQ when the keep-alive asks for one; the connection failed when an earlier one went unanswered."""
        ...

    def fail(self, reason: str, code: int | None) -> None:
        """End the connection for `reason` (an MQTT 5.0 DISCONNECT with `code` first, when there is one), and raise
        MQTTError."""
        ...


class ReceiveSlots(Protocol):
    """dmqtt.session.Session as its receive side uses it (dmqtt.inbox, loaded at the first incoming QoS 2 message,
    and the asyncio face's deferring session): one slot per incoming QoS 2 message in flight, up to the Receive
    Maximum the client announces. A slot is free when its packet id is 0."""

    rx_pids: Any  # array("H"): each slot's packet id
    rx_handled: bytearray  # each slot's state: 0 not yet handled, 1 handled (journaled), 2 held by the application
    rx_addr: Any  # array("I"): each slot's RX record on the journal, then its HANDLED record
    fresh: int  # the send slot whose message is still in the journal's body buffer; -1 before that buffer is reused

    def rx_find(self, pid: int) -> int:
        """The slot holding `pid` (0: a free one), or -1."""
        ...

    def hand_over(self, j: int, topic: str, payload: Bytes, retain: bool, dup: bool) -> None:
        """Give slot j's message to the application's handler, then journal that it returned."""
        ...

    def owe(self, ptype: int, pid: int, reason: int) -> None:
        """Queue an acknowledgement (PUBREC, PUBCOMP, PUBACK) to send, in order."""
        ...

    def journal_pid(self, rtype: int, pid: int) -> int:
        """Commit a record of type `rtype` naming packet id `pid`; its address."""
        ...


class OnConnect(Protocol):
    def __call__(self, session_present: bool) -> None: ...


class OnDisconnect(Protocol):
    def __call__(self, code: int | None, reason: str) -> None: ...


class OnMessage(Protocol):
    def __call__(self, topic: str, payload: bytes, qos: int, retain: bool, dup: bool) -> None: ...


class OnPublished(Protocol):
    def __call__(self, pid: int, code: int) -> None: ...
