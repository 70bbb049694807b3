"""dmqtt.client.Backoff: the delays between connection attempts and when the next attempt may start, on a clock
that wraps as an ESP32's ticks_ms() does (period 2**30 ms, about 12.4 days)."""

from __future__ import annotations

import time

import pytest

from dmqtt.client import Backoff

_PERIOD = 1 << 30


class WrappingTicks:
    """MicroPython's ticks functions over a clock the test moves."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, start: int) -> None:
        self.now = start
        monkeypatch.setattr(time, "ticks_ms", lambda: self.now, raising=False)
        monkeypatch.setattr(time, "ticks_add", lambda a, b: (a + b) % _PERIOD, raising=False)
        monkeypatch.setattr(time, "ticks_diff", self.diff, raising=False)

    @staticmethod
    def diff(a: int, b: int) -> int:
        return ((a - b + _PERIOD // 2) % _PERIOD) - _PERIOD // 2

    def advance(self, ms: int) -> None:
        self.now = (self.now + ms) % _PERIOD


@pytest.fixture
def ticks(monkeypatch: pytest.MonkeyPatch) -> WrappingTicks:
    return WrappingTicks(monkeypatch, start=_PERIOD - 1000)  # a wrap a second into the test


def test_a_backoff_that_never_failed_lets_an_attempt_start_at_once_and_keeps_nothing(ticks: WrappingTicks) -> None:
    backoff = Backoff()
    assert backoff.due() == 0
    backoff.reset()  # a success
    assert backoff.due() == 0
    # Its settings and counters are the class's until a connection fails (docs/firmware-style.md, rule 1).
    assert vars(backoff) == {}


def test_a_failure_delays_the_next_attempt_by_the_delay_handed_out_across_the_wrap(ticks: WrappingTicks) -> None:
    backoff = Backoff(base_ms=2000, cap_ms=8000)
    delays = []
    for attempt in range(4):
        delay = backoff.next_ms()
        ceiling = min(8000, 2000 << attempt)
        assert ceiling // 2 <= delay <= ceiling
        assert backoff.due() == delay
        ticks.advance(delay - 1)
        assert backoff.due() == 1
        ticks.advance(1)
        assert backoff.due() == 0
        delays.append(delay)
    assert backoff.attempt == 4
    assert ticks.now < 1000 + sum(delays)  # the clock wrapped under the waits


def test_a_success_long_after_the_last_failure_does_not_hold_back_the_next_attempt(ticks: WrappingTicks) -> None:
    backoff = Backoff()
    ticks.advance(backoff.next_ms())
    backoff.reset()  # connected, and stays connected for over half the ticks period
    ticks.advance(_PERIOD // 2 + 5000)
    assert backoff.due() == 0  # a retry time kept from the last failure would read as 6 days ahead
    assert backoff.attempt == 0
    first = backoff.next_ms()
    assert 250 <= first <= 500  # from base_ms again
