"""dmqtt.wifi, the WiFi supervision both faces of the client share, on CPython over a scripted station: the first
join, a drop said once, its length when the link is back, an attempt started again with a growing backoff when
the station's own retries fail, and the asyncio face that tries no connection while the link is down."""

from __future__ import annotations

import asyncio
import sys
import time
import types
from collections.abc import Iterator

import pytest

from dmqtt import wifi
from dmqtt.aio import AsyncClient
from dmqtt.journal_ring import RingJournal
from tests.unit.dmqtt.test_aio import Peer, until
from tests.unit.nor import NorPartition


class Station:
    """network.WLAN(STA_IF) as the supervision sees it: isconnected() as the test says; what it was asked."""

    def __init__(self) -> None:
        self.linked = False
        self.calls: list[tuple[object, ...]] = []

    def isconnected(self) -> bool:
        return self.linked

    def active(self, on: bool) -> None:
        self.calls.append(("active", on))

    def ifconfig(self, config: tuple[str, ...]) -> None:
        self.calls.append(("ifconfig", config))

    def connect(self, ssid: str, password: str, bssid: bytes | None = None) -> None:
        self.calls.append(("connect", ssid, password, bssid))

    def disconnect(self) -> None:
        self.calls.append(("disconnect",))

    def status(self) -> int:
        return 1010 if self.linked else 1001


class Clock:
    def __init__(self) -> None:
        self.ms = 1000

    def ticks_ms(self) -> int:
        return self.ms


@pytest.fixture
def station(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Station, Clock]]:
    sta = Station()
    clock = Clock()
    network = types.ModuleType("network")
    network.STA_IF = 0  # type: ignore[attr-defined]
    network.WLAN = lambda interface: sta  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "network", network)
    monkeypatch.setattr(time, "ticks_ms", clock.ticks_ms, raising=False)
    monkeypatch.setattr(time, "ticks_diff", lambda a, b: a - b, raising=False)
    monkeypatch.setattr(time, "ticks_add", lambda a, b: a + b, raising=False)
    events: list[object] = []
    monkeypatch.setattr(wifi, "on_up", events.append)
    monkeypatch.setattr(wifi, "on_down", lambda: events.append("down"))
    wifi.start("lab", "pw", ("10.0.0.9", "255.255.255.0", "10.0.0.1", "10.0.0.1"), b"\x02\x00\x00\x00\xaa\x01")
    sta.events = events  # type: ignore[attr-defined]
    yield sta, clock


def test_the_first_join_a_drop_and_its_length(station: tuple[Station, Clock]) -> None:
    sta, clock = station
    events = sta.events  # type: ignore[attr-defined]
    assert not wifi.check()
    assert sta.calls == [
        ("active", True),
        ("ifconfig", ("10.0.0.9", "255.255.255.0", "10.0.0.1", "10.0.0.1")),
        ("connect", "lab", "pw", b"\x02\x00\x00\x00\xaa\x01"),
    ]
    clock.ms += 300
    sta.linked = True
    assert wifi.check() and events == [None]  # the first join: on_up(None)
    assert wifi.check() and events == [None]  # said once
    sta.linked = False
    clock.ms += 5000
    assert not wifi.check() and not wifi.check()
    assert events == [None, "down"] and wifi.outages == 1  # the drop, said once
    clock.ms += 7000
    assert wifi.offline_now() == 7000
    sta.linked = True
    assert wifi.check()
    assert events == [None, "down", 7000] and (wifi.joins, wifi.offline_ms) == (2, 7000)
    assert len([c for c in sta.calls if c[0] == "connect"]) == 1  # the station rejoined by itself


def test_a_link_that_does_not_come_back_is_tried_again_with_a_growing_backoff(
    station: tuple[Station, Clock],
) -> None:
    sta, clock = station
    events = sta.events  # type: ignore[attr-defined]
    wifi.check()
    starts = [clock.ms]
    for _ in range(400):  # 100 s in steps of a quarter second, the link never up
        clock.ms += 250
        before = len(sta.calls)
        wifi.check()
        if len(sta.calls) > before and sta.calls[-1][0] == "connect":
            starts.append(clock.ms)
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    # An attempt has 15 s; then 1, 2, 4, 8 s ... (at most 30) of backoff before the next starts over (disconnect).
    assert gaps[:4] == [15000 + 1000, 15000 + 2000, 15000 + 4000, 15000 + 8000], gaps
    assert ("disconnect",) in sta.calls
    assert events == ["down"] and wifi.outages == 1  # never joined: offline since the first attempt, said once


def test_the_asyncio_face_tries_no_connection_while_the_link_is_down(
    station: tuple[Station, Clock], micropython_time: None
) -> None:
    sta, _clock = station
    opened: list[Peer] = []

    def factory() -> Peer:
        peer = Peer()
        opened.append(peer)
        return peer

    async def run() -> None:
        client = AsyncClient("aio", RingJournal(NorPartition(8), 512), idle_ms=2, version=4, keepalive=0, wifi=wifi)
        task = asyncio.create_task(client.connect(factory))
        await asyncio.sleep(0.2)
        assert not opened and not client.connected  # no link: no transport opened
        sta.linked = True
        await until(lambda: client.connected)
        assert len(opened) == 1 and client.up.is_set()
        await task
        await client.close()

    asyncio.run(run())
