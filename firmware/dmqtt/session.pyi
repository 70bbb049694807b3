# The signatures of dmqtt/session.py, for type checkers: the sans-I/O session, a JournalOwner (dmqtt.interfaces)
# to its journal.
from collections.abc import Callable
from typing import Any, Final

from dmqtt.interfaces import Bytes as _Bytes
from dmqtt.interfaces import Journal

FREE: Final[int]
QUEUED: Final[int]
WAIT_ACK: Final[int]
WAIT_COMP: Final[int]
codec: Any  # dmqtt.codec, once a connection or a delivery has loaded it; None before

class Session:
    resent_props: Callable[[_Bytes], dict[int, list[tuple[str, str]]] | None] | None
    journal: Journal
    version: int
    window_config: int
    window: int
    in_window: int  # flows holding a place in the window (PUBLISH unacknowledged, PUBREL owed or sent)
    max_qos: int
    retain_available: bool
    on_message: Callable[[str, bytes, int, bool, bool], None] | None
    on_result: Callable[[int, int], None] | None
    max_packet: int
    mark: int
    serial: int
    next_pid: int
    connected_now: bool
    retain_cleared: int
    staged: int
    defer: bool
    rx_pid: int
    rx_number: int
    received: int
    # The slots, for dmqtt.confirm's session (a subclass that sends journaled messages again as new flows).
    _pid: Any
    _state: bytearray
    _serial: Any
    _fresh: int
    def _slot_for(self, pid: int) -> int: ...
    def _queue(self, i: int, pid: int, qos: int, serial: int, addr: int) -> None: ...
    def _finish(self, i: int, reason: int) -> None: ...
    def __init__(
        self, store: Journal, version: int = ..., window: int = 8, max_messages: int = 32, rx_max: int = 16
    ) -> None: ...
    # The journal's owner (dmqtt.interfaces.JournalOwner).
    def open(self) -> list[str]: ...
    def replay(self, rtype: int, body: memoryview, addr: int) -> None: ...
    def is_live(self, rtype: int, body: memoryview, addr: int) -> bool: ...
    def holds(self, lo: int, hi: int) -> bool: ...
    def moved(self, rtype: int, body: memoryview, old: int, new: int) -> None: ...
    def snapshot(self, body: memoryview) -> int: ...
    # The client's.
    def accept(
        self,
        topic: bytes,
        payload: _Bytes,
        qos: int,
        retain: bool = False,
        mark: int | None = None,
        defer: bool = False,
    ) -> int: ...
    def returned(self) -> None: ...
    def sync(self) -> None: ...
    def note_mark(self, mark: int) -> None: ...
    def outstanding(self) -> int: ...
    def full(self) -> bool: ...
    def connected(
        self,
        session_present: bool,
        receive_max: int = 65535,
        max_qos: int = 2,
        retain_available: bool = True,
        topic_aliases: int = 0,
    ) -> None: ...
    def lost(self) -> None: ...
    def next_packet(self, buf: bytearray, at: int = 0) -> int: ...
    wire_alias: int
    def wire_topic(self, topic: bytes) -> bytes: ...
    def handle(self, ptype: int, flags: int, body: memoryview) -> None: ...
    def acked(self, ptype: int, pid: int, reason: int) -> None: ...
    def deliver_pending(self) -> None: ...
    def allocate_pid(self) -> int: ...
