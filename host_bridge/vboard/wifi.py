"""The virtual access point: what a virtual board's WiFi station (the `network` shim) joins, and the relay its TCP
sockets go through (the `socket` shim), so that the host can take the access point down and bring it back.

One AccessPoint can serve several boards, as one access point serves a rack of them. Its state is a small file
the boards read ("UP GENERATION SINCE"): UP 1 or 0; GENERATION, which moves on when its stations lose it (it has
been down for longer than the beacon timeout); SINCE, the host time of its last change. Meanwhile its relay holds
still: what the boards and the broker send waits in the sockets' buffers, as frames wait in the air for a station
that has not yet noticed anything. At the beacon timeout the relay resets the boards' ends of their connections
(the shim turns that into ECONNABORTED, as lwIP aborts a station's connections) and leaves the broker's ends open
and unanswered, as a vanished station leaves them: the broker notices by its keep-alive, or when the board comes
back under the same client id.

The join model's figures, with their sources, are in docs/virtual-board.md ("WiFi"). One relay thread serves
every access point of the process (a selector over their listeners and connections, and their timers).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import selectors
import socket
import struct
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from host_bridge.errors import VBoardError
from host_bridge.vboard.events import EventSpec, Hold, answer_report, read_report

_MAGIC = b"VBAP"
_HEADER = len(_MAGIC) + 5  # generation u32, sockaddr length u8
_CHUNK = 65536


@dataclass(frozen=True)
class JoinModel:
    """How long a station takes to join, and to notice its access point is gone (docs/virtual-board.md gives
    each figure's source). `scale` multiplies the times a join and a scan take in host time (a bench that joins
    a thousand times wants less than the chip's second and a half each); the beacon timeout is not scaled."""

    join_ms: int = 1750  # a full join: scan for the AP, associate, WPA2 handshake, DHCP
    # A static IP: no DHCP. The scan remains: MicroPython's connect() takes a BSSID but no channel, and ESP-IDF
    # scans the channels until it finds the access point either way.
    fast_ms: int = 660
    scan_ms: int = 2040  # an all-channel scan that finds nothing (STAT_NO_AP_FOUND)
    beacon_ms: int = 6000  # no beacon for this long: the station has lost its access point
    channel: int = 6
    scale: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.scale <= 10:
            raise VBoardError(f"the join model's scale must be in (0, 10], not {self.scale}")
        if min(self.join_ms, self.fast_ms, self.scan_ms, self.beacon_ms) < 0:
            raise VBoardError("the join model's times cannot be negative")


@dataclass(frozen=True)
class Outage:
    """The access point down for `length` seconds: `at` seconds after it started, or (`on`) at a board's event, the
    moment the board reaches it (the board waits until the access point is down: host_bridge/vboard/events.py)."""

    at: float
    length: float
    on: EventSpec | None = None

    @classmethod
    def parse(cls, text: str) -> Outage:
        """From AT:FOR or EVENT[#N]:FOR (seconds), as `host-bridge vboard --ap-outage` takes it: `30:10`, `joined:3`,
        `accepted#40:5`."""
        when, sep, length = text.rpartition(":")
        form = "AT:FOR or EVENT[#N]:FOR (e.g. 30:10, joined:3, accepted#40:5)"
        try:
            seconds = float(length)
        except ValueError:
            seconds = 0
        if not sep or seconds <= 0:
            raise VBoardError(f"an outage is {form}, with FOR in seconds, not {text!r}")
        try:
            at = float(when)
        except ValueError:
            return cls(0.0, seconds, EventSpec.parse(when))
        if at < 0:
            raise VBoardError(f"an outage is {form}, not {text!r}")
        return cls(at, seconds)

    def __str__(self) -> str:
        return f"{self.on if self.on is not None else self.at}:{self.length}"


@dataclass
class ApStats:
    outages: int = 0  # times the access point went down
    down_s: float = 0.0  # seconds it was down, the current outage included
    stations_lost: int = 0  # outages that outlasted the beacon timeout: the stations lost it
    relayed: int = 0  # connections relayed to their destination
    refused: int = 0  # connections refused: no association, or the destination refused them
    event_outages: int = 0  # outages begun at a board's event


@dataclass(eq=False)
class _Link:
    """One station socket: the board's end, and once connected, the destination's."""

    ap: AccessPoint
    board: socket.socket
    far: socket.socket | None = None
    header: bytes = b""
    connected: bool = False
    pending: dict[str, bytes] = field(default_factory=lambda: {"board": b"", "far": b""})  # bytes for that end


class AccessPoint:
    """The access point boards join: up or down on command (down(), up(), outage()) or on a schedule (outages,
    random_outages()); SSID and password given, only that network joins (None: any name and password)."""

    def __init__(
        self,
        state: Path,
        ssid: str | None = None,
        password: str | None = None,
        model: JoinModel | None = None,
        outages: Iterable[Outage] = (),
    ) -> None:
        self.state_path = Path(state)
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        self.ssid = ssid
        self.password = password
        self.model = model or JoinModel()
        self.stats = ApStats()
        self._lock = threading.RLock()
        self._up = True
        self._generation = 0
        self._since = time.time()
        self._down_at: float | None = None  # monotonic time it went down
        self._started = time.monotonic()
        self._schedule: list[Outage] = sorted((o for o in outages if o.on is None), key=lambda o: o.at)
        self._on_events: list[Outage] = [o for o in outages if o.on is not None]
        self._event_counts: dict[tuple[str, str], int] = {}  # (board, event): events it reported
        self._holds: list[Hold] = []  # hold_at()s no board has reached yet
        self._random: tuple[float, random.Random, tuple[float, float]] | None = None
        self._next_random: float | None = None
        self._up_at: float | None = None  # monotonic time a scheduled outage ends
        self._write_state()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        # Where boards report the events an outage waits for: served while the access point is down too.
        self.control = socket.create_server(("127.0.0.1", 0))
        self.control.setblocking(False)
        self.links: set[_Link] = set()
        self.orphans: set[socket.socket] = set()  # far ends of connections whose station lost the AP
        self._lost_for: float | None = None  # the outage whose stations were lost already
        _AIR.add(self)

    # -- control ---------------------------------------------------------------------------------------------

    @property
    def is_up(self) -> bool:
        return self._up

    @property
    def generation(self) -> int:
        return self._generation

    def down(self) -> None:
        """The access point goes away: its stations notice after the beacon timeout."""
        with self._lock:
            if not self._up:
                return
            self._up = False
            self._down_at = time.monotonic()
            self._since = time.time()
            self.stats.outages += 1
            self._write_state()
        _AIR.wake()

    def up(self) -> None:
        """The access point is back: stations that lost it join again (in their join time)."""
        with self._lock:
            if self._up:
                return
            self._up = True
            assert self._down_at is not None
            self.stats.down_s += time.monotonic() - self._down_at
            self._down_at = None
            self._up_at = None
            self._since = time.time()
            self._write_state()
        _AIR.wake()

    def outage(self, seconds: float) -> None:
        """Down for `seconds` (this call waits them out), then up."""
        self.down()
        time.sleep(seconds)
        self.up()

    def outage_at(self, on: EventSpec, seconds: float) -> None:
        """Down for `seconds` from the moment a board reaches event `on` (its nth of that event; any board of
        this access point, the first to reach it). Boards see the schedule from their next boot on."""
        if seconds <= 0:
            raise VBoardError(f"an outage lasts a positive number of seconds, not {seconds}")
        with self._lock:
            self._on_events.append(Outage(0.0, seconds, on))

    def hold_at(self, on: EventSpec) -> Hold:
        """The board that reaches event `on` first waits there until `release()`: a test disturbs the run at that
        point (stops the broker, kills the bridge) before the board goes on, whatever the host's load. Boards see
        it from their next boot on, and count their events from then."""
        hold = Hold(on)
        with self._lock:
            self._holds.append(hold)
        return hold

    def _board_event(self, board: str, name: str) -> Hold | None:
        """A board reached event `name`: an outage waiting for it (this board's nth) begins now; a hold on it is
        returned, for the board's answer to wait on."""
        with self._lock:
            key = (board, name)
            self._event_counts[key] = count = self._event_counts.get(key, 0) + 1
            due = [o for o in self._on_events if o.on is not None and o.on.event == name and o.on.n == count]
            for outage in due:
                self._on_events.remove(outage)
                self.stats.event_outages += 1
                self._begin_timed(outage.length)
            for hold in self._holds:
                if hold.on == EventSpec(name, count):
                    self._holds.remove(hold)
                    return hold
        return None

    def random_outages(self, per_minute: float, seed: int = 0, lengths: tuple[float, float] = (1.0, 30.0)) -> None:
        """Outages at random, `per_minute` of them on average (exponential gaps), each of a length drawn uniformly
        from `lengths` seconds."""
        if per_minute <= 0:
            raise VBoardError(f"random outages need a positive rate per minute, not {per_minute}")
        rng = random.Random(seed)
        with self._lock:
            self._random = (per_minute, rng, lengths)
            self._next_random = time.monotonic() + rng.expovariate(per_minute / 60)
        _AIR.wake()

    def down_seconds(self) -> float:
        with self._lock:
            current = time.monotonic() - self._down_at if self._down_at is not None else 0.0
            return self.stats.down_s + current

    def environment(self) -> str:
        """VBOARD_AP, what the board's `network` and `socket` shims need to know of this access point."""
        m = self.model
        return json.dumps(
            {
                "state": str(self.state_path.resolve()),
                "port": self.port,
                "ssid": self.ssid,
                "password": self.password,
                "channel": m.channel,
                "join_ms": m.join_ms,
                "fast_ms": m.fast_ms,
                "scan_ms": m.scan_ms,
                "beacon_ms": m.beacon_ms,
                "scale": m.scale,
                "control": self.control.getsockname()[1],
                "events": sorted(
                    {o.on.event for o in self._on_events if o.on is not None} | {h.on.event for h in self._holds}
                ),
            }
        )

    def close(self) -> None:
        """Stop serving: every connection closed, the state file removed."""
        _AIR.remove(self)
        self.state_path.unlink(missing_ok=True)

    def __enter__(self) -> AccessPoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the relay thread does --------------------------------------------------------------------------

    def _write_state(self) -> None:
        tmp = self.state_path.with_name(self.state_path.name + ".tmp")
        tmp.write_text(f"{int(self._up)} {self._generation} {self._since:.6f}\n")
        os.replace(tmp, self.state_path)

    def _tick(self, now: float) -> float | None:
        """Timers due at monotonic `now`: scheduled and random outages, the beacon timeout. Returns when the next
        one falls (None: none)."""
        with self._lock:
            if self._schedule and now >= self._started + self._schedule[0].at:
                outage = self._schedule.pop(0)
                self._begin_timed(outage.length)
            if self._random is not None and self._next_random is not None and now >= self._next_random:
                rate, rng, (low, high) = self._random
                length = rng.uniform(low, high)
                self._begin_timed(length)
                self._next_random = now + length + rng.expovariate(rate / 60)
            if self._up_at is not None and now >= self._up_at:
                self.up()
            if not self._up and self._down_at is not None and self._generation_lost(now):
                self._lose_stations()
            deadlines = [
                self._started + self._schedule[0].at if self._schedule else None,
                self._next_random,
                self._up_at,
                self._down_at + self.model.beacon_ms / 1000 if self._down_at is not None else None,
            ]
        due = [d for d in deadlines if d is not None and d > now]
        return min(due) if due else None

    def _begin_timed(self, length: float) -> None:
        self.down()
        self._up_at = time.monotonic() + length

    def _generation_lost(self, now: float) -> bool:
        assert self._down_at is not None
        return now - self._down_at >= self.model.beacon_ms / 1000 and self._lost_for != self._down_at

    def _lose_stations(self) -> None:
        """The beacon timeout of this outage: the stations have lost the access point. Their ends of every
        connection are reset; the far ends stay open, unanswered, as a vanished station leaves them."""
        self._lost_for = self._down_at
        self._generation += 1
        self.stats.stations_lost += 1
        self._write_state()
        for link in list(self.links):
            _AIR.drop(link, reset_board=True)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()


def _reset(sock: socket.socket) -> None:
    """Close with a reset (RST), not a FIN: the board's socket fails rather than reads an end of stream."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    _close(sock)


def _destination(sockaddr: bytes) -> tuple[str, int]:
    """(host, port) from a MicroPython sockaddr (struct sockaddr_in: family, port big-endian, address)."""
    if len(sockaddr) < 8 or int.from_bytes(sockaddr[:2], "little") != socket.AF_INET:
        raise ValueError("not an IPv4 sockaddr")
    port = int.from_bytes(sockaddr[2:4], "big")
    return socket.inet_ntoa(sockaddr[4:8]), port


class _Air:
    """The relay thread of every access point of this process: one selector, started with the first access
    point. Every socket of the relay is touched by this thread only: the other threads change an access point's
    state and wake it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._aps: set[AccessPoint] = set()
        self._closing: list[tuple[AccessPoint, threading.Event]] = []
        self._selector = selectors.DefaultSelector()
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = socket.socketpair()

    def add(self, ap: AccessPoint) -> None:
        with self._lock:
            if self._thread is None:
                self._wake_r.setblocking(False)
                self._selector.register(self._wake_r, selectors.EVENT_READ, ("wake", None))
                self._thread = threading.Thread(target=self._run, name="vboard-air", daemon=True)
                self._thread.start()
            self._aps.add(ap)
        self.wake()

    def remove(self, ap: AccessPoint) -> None:
        """Close `ap`'s listener and connections (in the relay thread) and wait until it is done."""
        done = threading.Event()
        with self._lock:
            self._aps.discard(ap)
            self._closing.append((ap, done))
        self.wake()
        if not done.wait(10):
            raise VBoardError("the virtual access point's relay did not close its connections within 10 s")

    def wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    # -- the thread ------------------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            now = time.monotonic()
            with self._lock:
                aps = list(self._aps)
                closing, self._closing = self._closing, []
            for ap, done in closing:
                self._close_all(ap)
                done.set()
            deadlines = [d for d in (ap._tick(now) for ap in aps) if d is not None]
            self._sync(aps)
            timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else 1.0
            for key, events in self._selector.select(min(timeout, 1.0)):
                kind, obj = key.data
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    self._event(kind, obj, sock, events)
                except BlockingIOError:
                    pass  # the readiness was spurious: the next round tries again
                except OSError:
                    if isinstance(obj, _Link):
                        self.drop(obj, reset_board=False)
                    else:
                        self._forget(sock)

    def _close_all(self, ap: AccessPoint) -> None:
        for link in list(ap.links):
            self.drop(link, reset_board=False)
        for sock in [ap.listener, ap.control, *ap.orphans]:
            self._forget(sock)
        ap.orphans.clear()

    def _sync(self, aps: list[AccessPoint]) -> None:
        """What the selector watches: while an access point is up, its listener and its links; while it is
        down, its listener only (a connect made meanwhile waits for its answer as a link: the beacon timeout
        resets it, as lwIP aborts a connect when the station loses its access point, or the access point's return
        relays it, as a SYN sent again gets through after a stall) and none of its links (what is sent waits in
        the sockets); orphaned far ends, always (read to discard)."""
        for ap in aps:
            up = ap.is_up
            self._watch(ap.listener, ("listen", ap), selectors.EVENT_READ)
            self._watch(ap.control, ("control", ap), selectors.EVENT_READ)
            for link in list(ap.links):
                self._watch(link.board, ("board", link), self._interest(link, "board") if up else 0)
                if link.far is not None:
                    self._watch(link.far, ("far", link), self._interest(link, "far") if up else 0)

    @staticmethod
    def _interest(link: _Link, end: str) -> int:
        if end == "far" and not link.connected:
            return selectors.EVENT_WRITE  # the outcome of its connect
        other = "far" if end == "board" else "board"
        events = selectors.EVENT_WRITE if link.pending[end] else 0  # bytes waiting for this end
        if not link.pending[other]:
            events |= selectors.EVENT_READ  # read only what the other end has taken the last of
        return events

    def _watch(self, sock: socket.socket, data: tuple[str, object], events: int) -> None:
        try:
            key = self._selector.get_key(sock)
        except KeyError:
            if events:
                self._selector.register(sock, events, data)
            return
        if not events:
            self._selector.unregister(sock)
        elif key.events != events:
            self._selector.modify(sock, events, data)

    def _forget(self, sock: socket.socket) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(sock)
        _close(sock)

    def _event(self, kind: str, obj: object, sock: socket.socket, events: int) -> None:
        if kind == "wake":
            sock.recv(4096)
        elif kind == "listen":
            assert isinstance(obj, AccessPoint)
            board, _ = sock.accept()
            board.setblocking(False)
            obj.links.add(_Link(obj, board))
        elif kind == "control":
            assert isinstance(obj, AccessPoint)
            self._report(obj, sock)
        elif kind == "orphan":
            if not sock.recv(_CHUNK):
                assert isinstance(obj, AccessPoint)
                obj.orphans.discard(sock)
                self._forget(sock)
        else:
            assert isinstance(obj, _Link)
            self._flow(obj, kind, sock, events)

    def _flow(self, link: _Link, end: str, sock: socket.socket, events: int) -> None:
        if end == "board" and link.far is None:
            self._read_header(link)
            return
        if end == "far" and not link.connected:
            self._connected(link)
            return
        other = "far" if end == "board" else "board"
        if events & selectors.EVENT_WRITE and link.pending[end]:
            sent = sock.send(link.pending[end])
            link.pending[end] = link.pending[end][sent:]
        if events & selectors.EVENT_READ:
            data = sock.recv(_CHUNK)
            if not data:
                # An end closed: what the other end still had coming goes first, as far as it takes it now.
                far = link.far if other == "far" else link.board
                with contextlib.suppress(OSError):
                    if far is not None and link.pending[other]:
                        far.send(link.pending[other])
                self.drop(link, reset_board=False)
                return
            link.pending[other] += data

    @staticmethod
    def _report(ap: AccessPoint, listener: socket.socket) -> None:
        """A board's event: the outage it starts begins before the answer, so that the board goes on only once the
        access point is down."""
        report = read_report(listener)
        if report is not None:
            conn, name, board = report
            answer_report(conn, ap._board_event(board, name))

    def _read_header(self, link: _Link) -> None:
        data = link.board.recv(_HEADER + 255 - len(link.header))
        if not data:
            self.drop(link, reset_board=False)
            return
        link.header += data
        if len(link.header) < _HEADER:
            return
        generation, size = struct.unpack(">IB", link.header[len(_MAGIC) : _HEADER])
        if len(link.header) < _HEADER + size:
            return
        ap = link.ap
        try:
            if link.header[: len(_MAGIC)] != _MAGIC:
                raise ValueError("not a station socket")
            host, port = _destination(link.header[_HEADER : _HEADER + size])
        except ValueError:
            self._refuse(link, errno.EINVAL)
            return
        if generation != ap.generation or not ap.is_up:
            self._refuse(link, errno.EHOSTUNREACH)  # an association the access point no longer has
            return
        link.board.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        far = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        far.setblocking(False)
        far.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        link.far = far
        code = far.connect_ex((host, port))
        if code not in (0, errno.EINPROGRESS):
            self._refuse(link, code)

    def _connected(self, link: _Link) -> None:
        assert link.far is not None
        code = link.far.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            self._refuse(link, code)
            return
        link.connected = True
        link.ap.stats.relayed += 1
        link.pending["board"] = b"\x00" + link.pending["board"]

    def _refuse(self, link: _Link, code: int) -> None:
        link.ap.stats.refused += 1
        with contextlib.suppress(OSError):
            link.board.send(bytes([min(code, 255)]))
        self.drop(link, reset_board=False)

    def drop(self, link: _Link, reset_board: bool) -> None:
        """End a link: both ends closed, or (reset_board: its station lost the access point) the board's end
        reset and the far end left open and read to nothing, as a vanished station leaves it."""
        link.ap.links.discard(link)
        for sock in (link.board, link.far):
            if sock is not None:
                with contextlib.suppress(KeyError, ValueError):
                    self._selector.unregister(sock)
        if not reset_board:
            _close(link.board)
            if link.far is not None:
                _close(link.far)
            return
        _reset(link.board)
        if link.far is not None and link.connected:
            link.ap.orphans.add(link.far)
            self._selector.register(link.far, selectors.EVENT_READ, ("orphan", link.ap))
        elif link.far is not None:
            _close(link.far)


_AIR = _Air()
