"""The part of a scripted transport that every test of the board's client on CPython shares (the broker's bytes,
read by the client); the time functions it needs are the micropython_time fixture (tests/unit/conftest.py)."""

from __future__ import annotations


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
