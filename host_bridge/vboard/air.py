"""The air the virtual boards of one host share for ESP-NOW: which board hears which, on what channel, with what
loss, delay and signal strength, and whether a radio acknowledges.

A board's `espnow` shim (host_bridge/vboard/shims/vair.py) keeps one TCP connection to the air from boot to the end
of the boot: a deep sleep, a power cut or a reset closes it, and a board whose connection is closed does not hear
anything (as a chip's radio is off). Over it the board says which MAC address it has and which channel its radio
is on (0: the WiFi interface is inactive, the radio off), and sends frames; the air answers each unicast frame
with whether the peer's radio acknowledged it, and hands frames to the boards that hear them.

A radio acknowledges at the MAC layer: a board whose WiFi interface is active on the frame's channel and in range
acknowledges a unicast frame addressed to it, whether its ESP-NOW is active or not, its receive buffer full or not
(docs/virtual-board.md, "ESP-NOW"). Loss is drawn per frame and per direction: a frame lost on its way is neither
heard nor acknowledged; a frame heard whose acknowledgement is lost is heard and reported failed, so the sender
sends it again and the receiver hears it twice, as on a real air. Broadcast frames are never acknowledged:
the sender is told they went.

Disturbances are scheduled on the boards' own events, as the access point's outages are (host_bridge/vboard/
events.py): at(EVENT#N, action) runs an action (a link lost, a board out of range) when a board reaches its Nth
EVENT, before the board goes on; hold_at() keeps the board there until the test releases it (to power another
board off in the middle of a send). One thread serves the air: a selector over its listeners and connections.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import random
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from host_bridge.errors import VBoardError
from host_bridge.vboard.events import EventSpec, Hold, answer_report, read_report

# The messages of a board's connection (docs/virtual-board.md, "ESP-NOW"): a type byte, the body's length (u16,
# big-endian), the body.
_HELLO = ord("H")  # board: MAC (6), channel (1; 0: the radio is off)
_SEND = ord("S")  # board: seq u16, destination MAC (6), channel u8, flags u8, key tag (4), payload
_ANSWER = ord("A")  # air: seq u16, 1 when the peer's radio acknowledged (always for a broadcast), else 0
_RECEIVE = ord("R")  # air: source MAC (6), RSSI i8, channel u8, flags u8, key tag (4), payload
_TURNAROUND = ord("T")  # board: u32 microseconds of interpreter work from hearing a peer to answering it
_HEADER = 3
BROADCAST = b"\xff" * 6


def mac_bytes(mac: str | bytes) -> bytes:
    """A MAC address as its 6 bytes, from bytes or hex with or without colons ("24d7eb000001", "24:d7:eb:00:00:01")."""
    if isinstance(mac, bytes):
        raw = mac
    else:
        try:
            raw = bytes.fromhex(mac.replace(":", ""))
        except ValueError:
            raw = b""
    if len(raw) != 6:
        raise VBoardError(f"a MAC address is 6 bytes (12 hex digits), not {mac!r}")
    return raw


@dataclass(frozen=True)
class LinkModel:
    """What the air does to frames between two boards (both ways): the chance a frame (or its acknowledgement) is
    lost, the time a frame takes to be heard and answered, the signal strength the receiver reads, and whether the
    two are in range at all."""

    loss: float = 0.0
    delay_ms: float = 0.0
    rssi: int = -50
    in_range: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.loss <= 1.0:
            raise VBoardError(f"a link's loss is a probability from 0 to 1, not {self.loss}")
        if self.delay_ms < 0:
            raise VBoardError(f"a link's delay cannot be negative ({self.delay_ms} ms)")
        if not -127 <= self.rssi <= 0:
            raise VBoardError(f"an RSSI is -127 to 0 dBm, not {self.rssi}")


@dataclass
class AirStats:
    frames: int = 0  # frames boards sent
    heard: int = 0  # frames a board heard (a broadcast counts once per board that heard it)
    acknowledged: int = 0  # unicast frames whose acknowledgement reached the sender
    lost: int = 0  # unicast frames nobody acknowledged: lost, out of range, no radio there, another channel
    event_actions: int = 0  # actions run at a board's event


@dataclass(eq=False)
class _Radio:
    conn: socket.socket
    mac: bytes = b""
    channel: int = 0
    inbox: bytes = b""
    outbox: bytes = b""


@dataclass
class _Scheduled:
    on: EventSpec
    board: bytes | None
    action: Callable[[], object] | None = None
    hold: Hold | None = None
    counts: dict[bytes, int] = field(default_factory=dict)


class Air:
    """The ESP-NOW air of this host's virtual boards: give it to each VirtualBoard (`air=`), set links with
    link(), schedule disturbances with at() and hold_at(), close() it when done."""

    def __init__(self, default: LinkModel | None = None, seed: int = 0) -> None:
        self.default = default or LinkModel()
        self.stats = AirStats()
        # Per board (its MAC in hex): the microseconds of interpreter work it took to answer each frame it answered
        # (the peer it last heard from), in the order it answered them.
        self.turnarounds: dict[str, list[int]] = {}
        self._links: dict[frozenset[bytes], LinkModel] = {}
        self._rng = random.Random(seed)
        self._lock = threading.RLock()
        self._radios: dict[socket.socket, _Radio] = {}
        self._scheduled: list[_Scheduled] = []
        self._timers: list[tuple[float, int, socket.socket, bytes]] = []
        self._order = itertools.count()
        self._selector = selectors.DefaultSelector()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.setblocking(False)
        self.control = socket.create_server(("127.0.0.1", 0))
        self.control.setblocking(False)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._closed = threading.Event()
        self._selector.register(self.listener, selectors.EVENT_READ, "listen")
        self._selector.register(self.control, selectors.EVENT_READ, "control")
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._thread = threading.Thread(target=self._run, name="vboard-espnow-air", daemon=True)
        self._thread.start()

    # -- what a test sets ----------------------------------------------------------------------------------

    def link(
        self,
        a: str | bytes,
        b: str | bytes,
        *,
        loss: float | None = None,
        delay_ms: float | None = None,
        rssi: int | None = None,
        in_range: bool | None = None,
    ) -> LinkModel:
        """Set what the air does between boards `a` and `b` (MAC addresses), both ways; what is not given stays."""
        key = frozenset((mac_bytes(a), mac_bytes(b)))
        if len(key) != 2:
            raise VBoardError("a link joins two different boards")
        with self._lock:
            model = self._links.get(key, self.default)
            model = replace(
                model,
                loss=model.loss if loss is None else loss,
                delay_ms=model.delay_ms if delay_ms is None else delay_ms,
                rssi=model.rssi if rssi is None else rssi,
                in_range=model.in_range if in_range is None else in_range,
            )
            self._links[key] = model
        return model

    def model(self, a: bytes, b: bytes) -> LinkModel:
        with self._lock:
            return self._links.get(frozenset((a, b)), self.default)

    def at(self, on: EventSpec, action: Callable[[], object], board: str | bytes | None = None) -> None:
        """Run `action` (in the air's thread) when `board` (any board: None) reaches its nth `on.event`, counted
        from its next boot; the board goes on once the action has run."""
        with self._lock:
            self._scheduled.append(_Scheduled(on, None if board is None else mac_bytes(board), action=action))

    def hold_at(self, on: EventSpec, board: str | bytes | None = None) -> Hold:
        """`board` (any board: None) waits at its nth `on.event` until `release()`: a test powers another board
        off, or stops the broker, in the middle of that moment, whatever the host's load."""
        hold = Hold(on)
        with self._lock:
            self._scheduled.append(_Scheduled(on, None if board is None else mac_bytes(board), hold=hold))
        return hold

    def unplug(self, board: str | bytes) -> None:
        """`board`'s radio is gone at once (its power was cut): no frame sent from now on is heard or acknowledged
        by it, whichever the air's thread would have noticed first, the board's closed connection or that frame."""
        mac = mac_bytes(board)
        with self._lock:
            gone = [conn for conn, radio in self._radios.items() if radio.mac == mac]
        for conn in gone:
            self._drop(conn)

    def environment(self) -> str:
        """VBOARD_AIR, what a board's shims need to know of this air: where to connect, where to report events."""
        with self._lock:
            events = sorted({s.on.event for s in self._scheduled})
        return json.dumps(
            {"port": self.listener.getsockname()[1], "control": self.control.getsockname()[1], "events": events}
        )

    def radios(self) -> dict[str, int]:
        """The boards whose radio is connected now: MAC (hex) -> channel (0: interface inactive)."""
        with self._lock:
            return {r.mac.hex(): r.channel for r in self._radios.values() if r.mac}

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._thread.join(10)
        for sock in [self.listener, self.control, self._wake_r, self._wake_w, *list(self._radios)]:
            with contextlib.suppress(OSError):
                sock.close()

    def __enter__(self) -> Air:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the thread ----------------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._closed.is_set():
            with self._lock:
                due = self._timers[0][0] if self._timers else None
                for conn, radio in self._radios.items():
                    want = selectors.EVENT_READ | (selectors.EVENT_WRITE if radio.outbox else 0)
                    with contextlib.suppress(KeyError, ValueError):
                        if self._selector.get_key(conn).events != want:
                            self._selector.modify(conn, want, "radio")
            timeout = 0.5 if due is None else max(0.0, due - time.monotonic())
            for key, events in self._selector.select(min(timeout, 0.5)):
                try:
                    self._event(key.data, key.fileobj, events)  # type: ignore[arg-type]
                except OSError:
                    if key.data == "radio":
                        self._drop(key.fileobj)  # type: ignore[arg-type]
            self._fire_timers()

    def _event(self, kind: str, sock: socket.socket, events: int) -> None:
        if kind == "wake":
            sock.recv(64)
        elif kind == "listen":
            conn, _ = sock.accept()
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._radios[conn] = _Radio(conn)
            self._selector.register(conn, selectors.EVENT_READ, "radio")
        elif kind == "control":
            self._report(sock)
        else:
            radio = self._radios.get(sock)
            if radio is None:
                return
            if events & selectors.EVENT_WRITE and radio.outbox:
                sent = sock.send(radio.outbox)
                radio.outbox = radio.outbox[sent:]
            if events & selectors.EVENT_READ:
                data = sock.recv(65536)
                if not data:
                    self._drop(sock)
                    return
                radio.inbox += data
                self._messages(radio)

    def _drop(self, conn: socket.socket) -> None:
        with self._lock:
            self._radios.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn)
        with contextlib.suppress(OSError):
            conn.close()

    def _messages(self, radio: _Radio) -> None:
        while len(radio.inbox) >= _HEADER:
            kind, size = radio.inbox[0], struct.unpack(">H", radio.inbox[1:3])[0]
            if len(radio.inbox) < _HEADER + size:
                return
            body, radio.inbox = radio.inbox[_HEADER : _HEADER + size], radio.inbox[_HEADER + size :]
            if kind == _HELLO and len(body) == 7:
                with self._lock:
                    radio.mac, radio.channel = body[:6], body[6]
            elif kind == _SEND and len(body) >= 14 and radio.mac:
                self._send(radio, body)
            elif kind == _TURNAROUND and len(body) == 4 and radio.mac:
                with self._lock:
                    self.turnarounds.setdefault(radio.mac.hex(), []).append(struct.unpack(">I", body)[0])
            else:
                self._drop(radio.conn)  # a board that speaks something else is no board of this air
                return

    def _send(self, sender: _Radio, body: bytes) -> None:
        seq = body[:2]
        dst, channel, rest = body[2:8], body[8], body[9:]
        with self._lock:
            self.stats.frames += 1
            hearers = [
                r
                for r in self._radios.values()
                if r is not sender and r.mac and r.channel == channel and (dst[0] & 1 or r.mac == dst)
            ]
            acked = False
            delay = 0.0
            for radio in hearers:
                model = self.model(sender.mac, radio.mac)
                delay = max(delay, model.delay_ms)
                if not model.in_range or self._rng.random() < model.loss:
                    continue  # lost on its way: not heard, not acknowledged
                self.stats.heard += 1
                frame = sender.mac + struct.pack("bB", model.rssi, channel) + rest
                self._later(model.delay_ms / 2, radio.conn, _message(_RECEIVE, frame))
                if not dst[0] & 1 and self._rng.random() >= model.loss:
                    acked = True  # (else its acknowledgement was lost on the way back)
            broadcast = bool(dst[0] & 1)
            if not broadcast:
                if acked:
                    self.stats.acknowledged += 1
                else:
                    self.stats.lost += 1
            self._later(delay, sender.conn, _message(_ANSWER, seq + bytes((1 if acked or broadcast else 0,))))

    def _later(self, delay_ms: float, conn: socket.socket, data: bytes) -> None:
        if delay_ms <= 0:
            self._write(conn, data)
            return
        heapq.heappush(self._timers, (time.monotonic() + delay_ms / 1000, next(self._order), conn, data))

    def _fire_timers(self) -> None:
        now = time.monotonic()
        with self._lock:
            while self._timers and self._timers[0][0] <= now:
                _, _, conn, data = heapq.heappop(self._timers)
                self._write(conn, data)

    def _write(self, conn: socket.socket, data: bytes) -> None:
        radio = self._radios.get(conn)
        if radio is not None:  # (a board gone meanwhile hears nothing)
            radio.outbox += data

    def _report(self, listener: socket.socket) -> None:
        """A board's event: actions due run before the answer; a hold keeps the answer until release()."""
        report = read_report(listener)
        if report is None:
            return
        conn, name, who = report
        try:
            board = mac_bytes(who)
        except VBoardError:
            conn.close()
            return
        hold = None
        with self._lock:
            for item in list(self._scheduled):
                if item.on.event != name or item.board not in (None, board):
                    continue
                item.counts[board] = count = item.counts.get(board, 0) + 1
                if count != item.on.n:
                    continue
                self._scheduled.remove(item)
                if item.action is not None:
                    self.stats.event_actions += 1
                    item.action()
                elif hold is None:
                    hold = item.hold
        answer_report(conn, hold)


def _message(kind: int, body: bytes) -> bytes:
    return bytes((kind,)) + struct.pack(">H", len(body)) + body
