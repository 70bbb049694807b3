# The signatures of dlink/nodes.py (node records on a gateway's MQTT channel: docs/link-protocol.md), for type checkers.
from collections.abc import Callable
from typing import Final

VERSION: Final[str]
OPEN: Final[int]
OPENED: Final[int]
REFUSED: Final[int]
CLOSE: Final[int]
DATA: Final[int]
KINDS: Final[bytes]
HEADER: Final[int]
MAX_BODY: Final[int]
MAX_NODES: Final[int]

class RecordError(ValueError): ...

def record(kind: int, node: int, body: bytes | bytearray | memoryview = b"") -> bytes: ...

class Records:
    def __init__(self) -> None: ...
    def feed(
        self,
        data: bytes | bytearray | memoryview,
        at: int,
        end: int,
        out: Callable[[int, int, memoryview], None],
    ) -> None: ...
    def reset(self) -> None: ...
