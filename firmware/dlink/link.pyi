# The signatures of dlink/link.py (one end of the serial link: docs/link-protocol.md), for type checkers.
from typing import Final

from dlink.frame import Decoder

_Bytes = bytes | bytearray | memoryview

RESETTING: Final[int]
UP: Final[int]
MIN_PAYLOAD: Final[int]
WINDOW: Final[int]

def full_frame_ms(baud: int) -> int: ...
def timeout_for(baud: int) -> int: ...

class Link:
    epoch: int
    window: int
    max_timeout_ms: int
    clean_timeout_ms: int
    min_timeout_ms: int
    timeout_ms: int
    min_payload: int
    payload: int
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
    bytes_in: list[int]
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
