"""The bridge's /healthz and its present gauge: a bridge whose configured boards' ports are all missing relays
nothing, so /healthz says degraded (503) and each board's dmqtt_bridge_board_present is 0; once a port appears
(here a pseudo-terminal behind the configured path) the board is present and /healthz is healthy again."""

from __future__ import annotations

import os
import pty
import time
from collections.abc import Callable
from pathlib import Path

from host_bridge.bridge.metrics import families, health
from host_bridge.bridge.relay import BoardPort, Bridge
from host_bridge.net import Destination


def present(bridge: Bridge) -> dict[str, float]:
    family = next(f for f in families(bridge) if f.name == "dmqtt_bridge_board_present")
    return {s.labels["board"]: s.value for s in family.samples}


def test_no_board_present_is_degraded_and_a_port_that_appears_is_present(tmp_path: Path) -> None:
    link = tmp_path / "ttyBOARD"
    bridge = Bridge([BoardPort("a", str(link))], Destination.parse("127.0.0.1:1"), [], None)
    master, slave = pty.openpty()
    bridge.start()
    try:
        ok, why = health(bridge, after_s=60)
        assert not ok and why.startswith("degraded: no board present behind the 1 configured"), why
        assert present(bridge) == {"a": 0}
        link.symlink_to(os.ttyname(slave))  # the board plugged in: its session opens it within a second
        deadline = time.monotonic() + 30
        while not health(bridge, after_s=60)[0]:
            assert time.monotonic() < deadline, "the port never counted as present"
            time.sleep(0.05)
        assert present(bridge) == {"a": 1}
    finally:
        bridge.stop()
        os.close(master)
        os.close(slave)


def port_boards(bridge: Bridge) -> dict[str, float]:
    family = next(f for f in families(bridge) if f.name == "dmqtt_bridge_port_boards")
    return {s.labels["port"]: s.value for s in family.samples}


def test_every_configured_port_and_pattern_has_a_series_present_or_not(tmp_path: Path) -> None:
    """A pattern nothing matches, and a port not plugged in, each have their series at 0; a port that appears
    behind the pattern counts 1 there (a vanished board's alert is written on this series: docs/metrics.md)."""
    fixed, pattern = tmp_path / "ttyFIXED", str(tmp_path / "usb-*")
    bridge = Bridge(
        [BoardPort("fixed", str(fixed)), BoardPort("usb", pattern)], Destination.parse("127.0.0.1:1"), [], None
    )
    master, slave = pty.openpty()
    bridge.start()
    try:
        assert port_boards(bridge) == {str(fixed): 0, pattern: 0}
        (tmp_path / "usb-board1").symlink_to(os.ttyname(slave))
        bridge.scan()  # (the hotplug thread's step, taken here)
        deadline = time.monotonic() + 30
        while port_boards(bridge)[pattern] != 1:
            assert time.monotonic() < deadline, port_boards(bridge)
            time.sleep(0.05)
        assert port_boards(bridge)[str(fixed)] == 0
    finally:
        bridge.stop()
        os.close(master)
        os.close(slave)


def test_a_pattern_with_nothing_plugged_in_is_degraded_too(tmp_path: Path) -> None:
    """Only a hotplug pattern configured, and nothing matches it: no session at all, and still nothing relayed."""
    bridge = Bridge([BoardPort("usb", str(tmp_path / "usb-*"))], Destination.parse("127.0.0.1:1"), [], None)
    bridge.start()
    try:
        ok, why = health(bridge, after_s=60)
        assert not ok and why.startswith("degraded: no board present"), why
        master, slave = pty.openpty()
        (tmp_path / "usb-1").symlink_to(os.ttyname(slave))  # a board plugged in, matching the pattern
        bridge.scan()
        deadline = time.monotonic() + 30
        while not health(bridge, after_s=60)[0]:
            assert time.monotonic() < deadline, "the plugged-in board never counted as present"
            time.sleep(0.05)
    finally:
        bridge.stop()
        os.close(master)
        os.close(slave)


def missing(bridge: Bridge) -> dict[str, float]:
    family = next(f for f in families(bridge) if f.name == "dmqtt_bridge_board_missing_seconds")
    return {s.labels["board"]: s.value for s in family.samples}


def test_one_board_gone_from_behind_a_pattern_stays_missing_until_it_is_back_or_a_reload(tmp_path: Path) -> None:
    """Three boards behind a pattern, one unplugged: the pattern still has two, so only the gone board's own
    series tells (dmqtt_bridge_board_missing_seconds, what BoardGone alerts on), /healthz says degraded naming it
    once it has been away longer than --health-after, and STATUS names it. Plugged back in, it is no longer
    missing; unplugged again and a reload given, it is forgotten (a board removed on purpose)."""
    ptys = [pty.openpty() for _ in range(3)]
    for i, (_, slave) in enumerate(ptys):
        (tmp_path / f"usb-{i}").symlink_to(os.ttyname(slave))
    entry = BoardPort("usb", str(tmp_path / "usb-*"))
    bridge = Bridge([entry], Destination.parse("127.0.0.1:1"), [], None)
    bridge.start()

    def until(check: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 30
        while not check():
            assert time.monotonic() < deadline, what
            time.sleep(0.05)

    try:
        until(lambda: len(bridge.boards()) == 3 and all(s.present for s in bridge.boards()), "3 boards never open")
        assert missing(bridge) == {} and health(bridge, after_s=0.5)[0]
        (tmp_path / "usb-1").unlink()  # unplugged
        bridge.scan()
        assert set(missing(bridge)) == {"usb-1"} and port_boards(bridge)[entry.path] == 2
        assert health(bridge, after_s=60)[0]  # (away less than --health-after)
        until(lambda: not health(bridge, after_s=0.5)[0], "never degraded")
        assert health(bridge, after_s=0.5)[1] == "degraded: 1 boards missing for more than 0.5 s: usb-1"
        assert bridge.status() == "serving 2 boards; missing: usb-1"
        (tmp_path / "usb-1").symlink_to(os.ttyname(ptys[1][1]))  # back
        bridge.scan()
        until(lambda: missing(bridge) == {} and health(bridge, after_s=0.5)[0], "back, still missing")
        (tmp_path / "usb-1").unlink()
        bridge.scan()
        assert set(missing(bridge)) == {"usb-1"}
        bridge.apply([entry])  # systemctl reload: what is wanted now
        assert missing(bridge) == {} and bridge.status() == "serving 2 boards"
    finally:
        bridge.stop()
        for master, slave in ptys:
            os.close(master)
            os.close(slave)
