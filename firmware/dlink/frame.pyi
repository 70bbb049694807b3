# The signatures of dlink/frame.py (the link's frames: docs/link-protocol.md), for type checkers.
from typing import ClassVar, Final

_Bytes = bytes | bytearray | memoryview

DATA: Final[int]
ACK: Final[int]
RESET: Final[int]
RESET_ACK: Final[int]
PAUSE: Final[int]
QUIET: Final[int]
RESUME: Final[int]
CONTROL: Final[int]
MQTT: Final[int]
CONSOLE: Final[int]
MAX_PAYLOAD: Final[int]
WIRE_MAX: Final[int]

class FrameError(Exception): ...

def encode(
    out: bytearray | memoryview, ftype: int, channel: int, seq: int, ack: int, epoch: int, payload: _Bytes = b""
) -> int: ...

class Decoder:
    """Frames and console lines out of a byte stream: after feed(), `ready` is FRAME, LINE, NOISE or 0."""

    FRAME: ClassVar[int]
    LINE: ClassVar[int]
    NOISE: ClassVar[int]
    ready: int
    frames: int
    crc_errors: int
    overflows: int
    noise_bytes: int
    noise_len: int
    ftype: int
    channel: int
    seq: int
    ack: int
    epoch: int
    payload_len: int
    raw: bytearray
    line: str
    def __init__(self) -> None: ...
    def feed(self, data: _Bytes, start: int = 0) -> int: ...
    def payload(self) -> memoryview: ...
