# The signatures of dlink/control.py (the link's control lines: docs/link-protocol.md), for type checkers.
from typing import Final

OPEN: Final[str]
CLOSE: Final[str]
OPENED: Final[str]
REFUSED: Final[str]
NODES: Final[str]
KINDS: Final[str]
MAX_LINE: Final[int]

class ControlError(ValueError): ...

def encode(kind: str, text: str = "") -> bytes: ...
def decode(line: bytes) -> tuple[str, str]: ...

class Lines:
    dropped: int
    def __init__(self) -> None: ...
    def push(self, byte: int) -> bytes | None: ...
    def reset(self) -> None: ...
