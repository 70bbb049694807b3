"""Fixtures of the unit tests."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest


@pytest.fixture
def micropython_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """time.ticks_ms, ticks_diff and ticks_add, as MicroPython has them, for the board's client run on CPython."""
    monkeypatch.setattr(time, "ticks_ms", lambda: int(time.monotonic() * 1000), raising=False)
    monkeypatch.setattr(time, "ticks_diff", lambda a, b: a - b, raising=False)
    monkeypatch.setattr(time, "ticks_add", lambda a, b: a + b, raising=False)
    yield
