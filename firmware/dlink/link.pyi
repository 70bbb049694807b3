# The signatures of dlink/link.py (one end of the serial link: docs/link-protocol.md), for type checkers.
from array import array
from typing import Final

from dlink.frame import Decoder

_Bytes = bytes | bytearray | memoryview

RESETTING: Final[int]
UP: Final[int]
MIN_PAYLOAD: Final[int]
WINDOW: Final[int]

def full_frame_ms(baud: int) -> int: ...
def timeout_for(baud: int) -> int: ...

class RetransmitTimer:
    frame_ms: int
    max_ms: int
    min_ms: int
    clean_ms: int
    ms: int
    srtt8: int
    rttvar4: int
    started: int
    damage_at: int
    def __init__(self, baud: int) -> None: ...
    def measured(self, rtt: int) -> None: ...
    def estimate(self) -> None: ...
    def damaging(self, now: int) -> bool: ...
    def in_force(self, now: int) -> int: ...
    def expired(self, now: int) -> bool: ...
    def probe_after(self, resent: int, probed: int, now: int) -> int: ...

class TransmitWindow:
    window: int
    min_payload: int
    payload: int
    ring: bytearray
    ring_mv: memoryview
    off: array[int]
    size: bytearray
    ch: bytearray
    state: bytearray
    first: list[int]
    order: list[int]
    last: list[int]
    probed: bytearray
    resent: bytearray
    written: int
    base: int
    next: int
    def __init__(self, window: int, min_payload: int) -> None: ...
    def take(self, channel: int, data: _Bytes, n: int) -> int: ...
    def can_take(self, channel: int) -> bool: ...
    def first_in(self, state: int) -> int: ...
    def in_flight(self) -> bool: ...
    def written_now(self, slot: int, now: int) -> bool: ...
    def again(self, slot: int, why: int) -> None: ...
    def confirm(self, ack: int, held: int) -> int: ...
    def lose_before(self, order: int) -> int: ...

class ReceiveReorder:
    window: int
    held: bytearray
    held_off: array[int]
    held_len: bytearray
    held_ch: bytearray
    has: bytearray
    top: int
    count: int
    expect: int
    rings: list[bytearray]
    head: list[int]
    length: list[int]
    bytes_in: list[int]
    def __init__(self, window: int, rx_size: int, control_size: int) -> None: ...
    def restart(self) -> None: ...
    def take(self, seq: int, ch: int, raw: _Bytes, n: int) -> bool: ...
    def readinto(self, channel: int, buf: bytearray | memoryview) -> int: ...
    def sack(self) -> memoryview | None: ...
    def deliver(self) -> None: ...

class Link:
    epoch: int
    timer: RetransmitTimer
    tx: TransmitWindow
    rx: ReceiveReorder
    state: int
    up: bool
    peer_epoch: int
    decoder: Decoder
    lines: list[str]
    noise: list[int]
    retransmissions: int
    timeouts: int
    probes: int
    peer_resets: int
    frames_out: int
    pauses: int
    quiet: bool
    bytes_out: list[int]
    def __init__(
        self,
        epoch: int,
        baud: int = 115200,
        window: int = ...,
        rx_size: int = 512,
        control_size: int = 128,
        min_payload: int = ...,
    ) -> None: ...
    def send(self, channel: int, data: _Bytes) -> int: ...
    def can_send(self, channel: int = ...) -> bool: ...
    def hush(self) -> None: ...
    def unhush(self, now: int) -> None: ...
    def pending(self) -> int: ...
    def available(self, channel: int) -> int: ...
    def readinto(self, channel: int, buf: bytearray | memoryview) -> int: ...
    def feed(self, data: _Bytes, now: int) -> None: ...
    def poll(self, now: int) -> memoryview | None: ...
    def next_wakeup(self, now: int) -> int: ...
