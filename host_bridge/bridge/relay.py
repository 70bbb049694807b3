"""The host bridge: each board on a serial port gets its own link endpoint (the very firmware file
firmware/dlink/link.py) and its own TCP connection to the broker, opened when the board asks for it.

One thread per board. A board that restarts (new link epoch) has its TCP connection closed, so the broker sees
its session end; a broker that closes the connection is reported to the board, which reconnects; a serial
port that vanishes (USB unplugged, an ESP32-S3/C3 resetting its USB) closes the TCP side and is opened again by
path when it returns. The bridge connects only to the configured broker and allow-listed destinations, opens
no listening socket, and never logs payloads or credentials.
"""

from __future__ import annotations

import glob
import logging
import os
import select
import socket
import ssl
import sys
import threading
import time
from dataclasses import dataclass, field
from fnmatch import fnmatch
from logging import ERROR, INFO, WARNING
from pathlib import Path

import serial

from dlink import control, frame, nodes
from dlink.link import Link
from dmqtt import codec, codec_host
from dmqtt.errors import CodecError
from host_bridge import logs
from host_bridge.bridge.nodes import NodeRelay
from host_bridge.errors import HostBridgeError
from host_bridge.logs import event
from host_bridge.net import AddressError, Destination, TLSConfig

log = logging.getLogger("host_bridge")


class BridgeError(HostBridgeError):
    """The bridge cannot start (bad configuration, a port that cannot be opened at all)."""


@dataclass(frozen=True)
class BoardPort:
    """A board's serial port: its name in the logs and the metrics, its path, its baud rate. A path with glob
    characters (`/dev/serial/by-id/usb-*`) is a pattern: each port that matches is a board, named by its file
    name, served from when it appears until it goes (hotplug: Bridge.scan)."""

    name: str
    path: str
    baud: int = 115200
    client_id: str = ""  # the client id the board on this port must say in its CONNECT ("": not checked)

    @property
    def pattern(self) -> bool:
        return glob.has_magic(self.path)


class BrokerHealth:
    """Whether the boards' broker answers, as every board's connection attempts find it: the first refusal after
    a success logs `broker_unreachable`, the first success after refusals `broker_back` with the outage's length
    (one line each for the whole bridge, however many boards try). `/healthz` reads it (host_bridge.metrics)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.unreachable_since: float | None = None
        self.outages = 0

    def failed(self, dest: Destination, error: str) -> None:
        with self._lock:
            if self.unreachable_since is not None:
                return
            self.unreachable_since = time.monotonic()
            self.outages += 1
        event(log, WARNING, "broker_unreachable", destination=dest, error=error)

    def reached(self, dest: Destination) -> None:
        with self._lock:
            since, self.unreachable_since = self.unreachable_since, None
        if since is not None:
            event(log, INFO, "broker_back", destination=dest, outage_s=round(time.monotonic() - since, 1))

    def unreachable_for(self) -> float:
        """Seconds since the broker last refused every attempt (0 while it answers)."""
        since = self.unreachable_since
        return 0.0 if since is None else time.monotonic() - since


COUNTERS = (
    "frames_in",
    "frames_out",
    "bytes_up",
    "bytes_down",
    "retransmissions",
    "timeouts",
    "crc_errors",
    "resyncs",
    "board_restarts",
    "connects",
    "connect_failures",
    "refused",
    "port_reopens",
    "noise_bytes",
    "broker_stalls",
    "flash_pauses",
    "wrong_boards",
)
# The bridge's counters that are the link's, in the order _account() reads them.
_LINK_COUNTERS = ("frames_in", "frames_out", "retransmissions", "timeouts", "crc_errors", "resyncs", "flash_pauses")
# Bytes from a board waiting for the broker to take them. Past this the bridge stops reading the board's MQTT
# channel: the link's window then holds the board back, instead of the bridge buffering without bound.
DOWN_QUEUE_MAX = 64 * 1024


@dataclass
class BoardSession:
    """Serves one board: its serial port, its link, its upstream TCP connection."""

    board: BoardPort
    broker: Destination
    allowed: frozenset[Destination]
    tls: TLSConfig | None = None
    health: BrokerHealth = field(default_factory=BrokerHealth)
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._tcp: socket.socket | None = None
        self._pending_up = b""  # from the broker, not yet taken by the link (window full)
        self._pending_down = bytearray()  # from the board, not yet taken by the broker (its socket is full)
        self._to_line = bytearray()  # link bytes the serial port has not taken yet (it does not block)
        self._counted = (0,) * len(_LINK_COUNTERS)  # the link's counters as last added to ours
        self._stalled = False
        self._control = control.Lines()
        self._control_out = bytearray()
        self._link: Link | None = None
        self._ser: serial.Serial | None = None
        self._resets = 0
        self._log = logs.Board(log, self.board.name)
        self._dest: Destination | None = None  # where the open TCP connection goes
        self._broker_at_open: Destination | None = None  # the broker and TLS when it was opened
        self._tls_at_open: TLSConfig | None = None
        self._retargeted = threading.Event()  # a reload changed the broker, the allowed or TLS (retarget())
        self.client_id = ""  # the MQTT client id of the board's last CONNECT (what the board says it is)
        # The client id of another board found on this port (BoardPort.client_id expects someone else), refused;
        # "" once the expected board connects.
        self.wrong = ""
        self.wrong_since = 0.0
        self.connected = False  # a TCP connection to the broker is open for the board
        self.present = False  # the board's serial port is open
        self.absent_since = time.monotonic()  # when the port was last not open (missing_s())
        # Reads the board's first packet on a new connection, until its CONNECT (at most 64 KiB: it refuses more).
        self._hello: codec_host.PacketDecoder | None = None
        # A gateway board's nodes (control "N"): its MQTT channel then carries their records (host_bridge/bridge/
        # nodes.py), and this holds each node's connection; None for a board of its own.
        self.nodes: NodeRelay | None = None
        self._records_out = bytearray()

    # -- life cycle ------------------------------------------------------------------------------------------

    def retarget(self, broker: Destination, allowed: frozenset[Destination], tls: TLSConfig | None) -> None:
        """A reload's broker, allowed destinations and TLS (called from the main thread): new connections use
        them at once; an open one they no longer describe is closed by the board's thread (_follow_reload), and
        the board connects again, to the new broker, sending again from its journal what was not acknowledged."""
        self.broker, self.allowed, self.tls = broker, allowed, tls
        self._retargeted.set()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self._ser = serial.Serial(self.board.path, self.board.baud, timeout=0, exclusive=True)
            except (serial.SerialException, OSError) as exc:
                # Tried every second; the log folds the repeats (once a minute, repeated=N). A typo'd path:
                # --strict-ports refuses it at start.
                event(self._log, WARNING, "port_unavailable", path=self.board.path, error=str(exc), retry_in="1s")
                self.stop.wait(1.0)
                continue
            event(self._log, INFO, "port_open", path=self.board.path, baud=self.board.baud)
            self.present = True
            self._link = Link(int.from_bytes(os.urandom(2), "big") or 1, self.board.baud)
            self._counted = (0,) * len(_LINK_COUNTERS)  # a new link counts from zero
            self._resets = 0
            self._control_out.clear()
            self._to_line.clear()
            try:
                self._serve()
            except (serial.SerialException, OSError) as exc:
                event(self._log, WARNING, "port_lost", path=self.board.path, error=str(exc))
                self.counters["port_reopens"] += 1
            finally:
                self.present = False
                self.absent_since = time.monotonic()
                self._account()
                self._close_tcp("serial port closed")
                self._end_nodes("serial port closed")
                try:
                    self._ser.close()
                except (serial.SerialException, OSError):
                    pass
        event(self._log, INFO, "stopped", client_id=self.client_id or "-", **self.counters_now())

    def _serve(self) -> None:
        assert self._ser is not None and self._link is not None
        link = self._link
        # The port's descriptor is read and written here with os.read/os.write and watched with poll(): pyserial's
        # read() and write() call select(), which refuses descriptors from 1024 on, and a bridge of 256 boards
        # holds more than that (each port with pyserial's two pipes, each board's TCP connection).
        port = self._ser.fileno()
        os.set_blocking(port, False)
        buf = bytearray(4096)
        while not self.stop.is_set():
            now = _now_ms()
            wakeup = link.next_wakeup(now)
            timeout_ms = 50 if wakeup < 0 else min(50, wakeup)
            poller = select.poll()
            poller.register(port, select.POLLIN | (select.POLLOUT if self._to_line else 0))
            tcp = self._tcp
            if tcp is not None:
                tcp_events = (0 if self._pending_up else select.POLLIN) | (select.POLLOUT if self._pending_down else 0)
                if tcp_events:
                    poller.register(tcp, tcp_events)
            if self.nodes is not None:
                self.nodes.register(poller, room=len(self._records_out) < DOWN_QUEUE_MAX)
            ready = {fd: ev for fd, ev in poller.poll(timeout_ms)}
            now = _now_ms()
            if ready.get(port, 0) & (select.POLLIN | select.POLLHUP | select.POLLERR):
                data = self._read_port(port)
                link.feed(data, now)
            for line in link.lines:
                event(self._log, INFO, "console", text=line)  # the board's own output, outside frames
            link.lines.clear()
            for n in link.noise:
                # Damaged frames, not text: their bytes may hold payloads or credentials, so only the length.
                self.counters["noise_bytes"] += n
                event(self._log, INFO, "line_noise", bytes=n)
            link.noise.clear()
            if link.peer_resets != self._resets:
                self._resets = link.peer_resets
                self.counters["board_restarts"] += 1
                event(self._log, INFO, "board_restarted", epoch=link.peer_epoch)
                self._close_tcp("the board restarted", notify=False)
                self._end_nodes("the gateway restarted")
                self._control.reset()
                self._control_out.clear()
            # MQTT bytes before control messages: a board's last packets and its close ("C") can arrive in one
            # read, and must reach the broker before the connection is closed. (After "O" a board sends nothing
            # until the bridge answers, so no bytes of a new connection can be waiting here.)
            self._downstream(buf)
            if self._retargeted.is_set():
                self._follow_reload()
            self._read_control()
            if tcp is not None and tcp is self._tcp and ready.get(tcp.fileno(), 0) & ~select.POLLOUT:
                self._upstream()
            if self.nodes is not None:
                self.nodes.service(ready)
            self._flush_control()
            self._flush_up()
            self._write_port(port, now)
            self._account()  # counters are this thread's: the reporter only reads them

    def _read_port(self, port: int) -> bytes:
        """What the board sent; a port that says it is readable and gives nothing (or an error) is gone."""
        try:
            data = os.read(port, 4096)
        except BlockingIOError:
            return b""
        except OSError as exc:
            raise serial.SerialException(f"device disconnected ({exc.strerror})") from exc
        if not data:
            raise serial.SerialException("device disconnected (end of file)")
        return data

    def _write_port(self, port: int, now: int) -> None:
        """What the link has to send, written without blocking: what the port does not take now waits for the
        next turn (the link's pacing keeps that to a frame or so)."""
        link = self._link
        assert link is not None
        while True:
            if not self._to_line:
                chunk = link.poll(now)
                if chunk is None:
                    return
                self._to_line += chunk
            try:
                written = os.write(port, self._to_line)
            except BlockingIOError:
                return
            except OSError as exc:
                raise serial.SerialException(f"write failed ({exc.strerror})") from exc
            del self._to_line[:written]
            if self._to_line:
                return  # the port is full: the rest when it takes more

    # -- control channel ---------------------------------------------------------------------------------

    def _read_control(self) -> None:
        assert self._link is not None
        buf = bytearray(control.MAX_LINE)
        while n := self._link.readinto(frame.CONTROL, buf):
            for byte in buf[:n]:
                line = self._control.push(byte)
                if line is not None:
                    self._on_control(line)

    def _on_control(self, line: bytes) -> None:
        try:
            kind, text = control.decode(line)
        except control.ControlError as exc:
            event(self._log, WARNING, "bad_control", error=str(exc))
            return
        if kind == control.OPEN:
            self._open(text.strip())
        elif kind == control.CLOSE:
            self._close_tcp("closed by the board", notify=False)
        elif kind == control.NODES:
            self._start_nodes(text.strip())
        else:
            event(self._log, WARNING, "bad_control", message=kind)

    def _start_nodes(self, version: str) -> None:
        """A gateway asks to relay its nodes (docs/link-protocol.md): from our answer on, its MQTT channel carries
        node records. A version we do not speak gets no answer, as an older bridge gives none."""
        if version != nodes.VERSION:
            event(self._log, WARNING, "bad_control", message="N", version=version[:16])
            return
        self._end_nodes("the gateway asked again")
        self.nodes = NodeRelay(
            self.board.name, lambda: self.broker, lambda: self.tls, self._records_out.extend, self._node_connect
        )
        event(self._log, INFO, "gateway", version=version)
        self._reply(control.NODES, nodes.VERSION)

    def _node_connect(self, dest: Destination, error: str | None) -> None:
        """A node's connection attempt, as the board's own count (its counters and the broker's health)."""
        if error is None:
            self.counters["connects"] += 1
            self.health.reached(dest)
        else:
            self.counters["connect_failures"] += 1
            self.health.failed(dest, error)

    def _end_nodes(self, why: str) -> None:
        if self.nodes is not None:
            self.nodes.close_all(why)
            self.nodes = None
        self._records_out.clear()

    def _open(self, requested: str) -> None:
        self._close_tcp("the board opened a new connection", notify=False)
        try:
            dest = Destination.parse(requested) if requested else self.broker
        except AddressError:
            self._reply(control.REFUSED, f"bad destination {requested[:40]!r}")
            return
        if dest not in self.allowed:
            self.counters["refused"] += 1
            event(self._log, WARNING, "refused", destination=dest, reason="not_allowed")
            self._reply(control.REFUSED, "not allowed")
            return
        try:
            sock = socket.create_connection((dest.host, dest.port), timeout=5)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls is not None:
                sock = self.tls.context().wrap_socket(sock, server_hostname=dest.host)
            sock.setblocking(False)
        except (OSError, ssl.SSLError) as exc:
            self.counters["connect_failures"] += 1
            event(self._log, WARNING, "connect_failed", destination=dest, error=str(exc))
            if dest == self.broker:
                self.health.failed(dest, str(exc))
            self._reply(control.REFUSED, f"cannot reach {dest}: {exc.__class__.__name__}")
            return
        self._tcp = sock
        self._dest, self._broker_at_open, self._tls_at_open = dest, self.broker, self.tls
        self.connected = True
        self._hello = codec_host.PacketDecoder(codec.V5, _HELLO_MAX)
        self.counters["connects"] += 1
        if dest == self.broker:
            self.health.reached(dest)
        event(self._log, INFO, "connected", destination=dest, client_id=self.client_id or "-")
        self._reply(control.OPENED)

    def _follow_reload(self) -> None:
        """Close the open connection if the reload no longer describes it (another broker, a destination no
        longer allowed, other TLS); the board is told, and opens a new one."""
        self._retargeted.clear()
        dest = self._dest
        if self._tcp is None or dest is None:
            return
        if (
            dest not in self.allowed
            or (dest != self.broker and dest == self._broker_at_open)
            or (self.tls != self._tls_at_open)
        ):
            self._close_tcp("reload: the broker, the allowed destinations or TLS changed")

    def _reply(self, kind: str, text: str = "") -> None:
        """Queue a control message for the board; sent ahead of MQTT bytes as the link window allows."""
        self._control_out += control.encode(kind, text)
        self._flush_control()

    def _flush_control(self) -> None:
        assert self._link is not None
        while self._control_out and self._link.can_send(frame.CONTROL):
            n = self._link.send(frame.CONTROL, self._control_out)
            del self._control_out[:n]

    def _close_tcp(self, why: str, notify: bool = True) -> None:
        if self._tcp is None:
            return
        try:
            self._tcp.close()
        except OSError:
            pass
        self._tcp = None
        self._dest = None
        self.connected = False
        self._hello = None
        self._pending_up = b""
        self._pending_down.clear()
        self._stalled = False
        event(self._log, INFO, "disconnected", reason=why)
        if notify and self._link is not None and self._link.up:
            self._reply(control.CLOSE, why)

    # -- relaying --------------------------------------------------------------------------------------------

    def _downstream(self, buf: bytearray) -> None:
        """Board -> broker, never blocking: what the broker's socket does not take waits in a bounded queue,
        and while the queue is full the board's bytes stay in the link (whose window then holds the board)."""
        assert self._link is not None
        if self.nodes is not None:
            # A gateway's records: each node's bytes go to its own connection (host_bridge/bridge/nodes.py).
            while not self.nodes.held() and (n := self._link.readinto(frame.MQTT, buf)):
                self.nodes.feed(bytes(buf[:n]))
            return
        while len(self._pending_down) < DOWN_QUEUE_MAX and (n := self._link.readinto(frame.MQTT, buf)):
            if self._tcp is None:
                continue  # bytes for a connection that is gone: dropped, the board's client will reconnect
            self._pending_down += buf[:n]
            if self._hello is not None:
                self._hear(buf[:n])
        if self._hello is not None and self.board.client_id:
            return  # the CONNECT not whole yet: nothing goes to the broker before the board is known
        self._flush_down()

    def _hear(self, data: bytes | bytearray) -> None:
        """The board's first packet on a connection is its CONNECT: its client id names the board in the logs
        and the metrics (a port's path alone does not, once pseudo-terminals or USB numbers are reused). Only
        the client id is taken: never the credentials."""
        assert self._hello is not None
        try:
            packet = next(self._hello.packets(data), None)
        except CodecError:
            self._hello = None  # not MQTT as we know it: the broker will say so
            return
        if packet is None:
            return  # (the rest of it in the next bytes)
        self._hello = None
        said = packet.client_id if packet.type == codec.CONNECT else ""
        expected = self.board.client_id
        if expected and said != expected:
            self._refuse_board(said)
            return
        self.wrong = ""
        if said:
            if said != self.client_id:
                event(self._log, INFO, "client", client_id=said, path=self.board.path)
            self.client_id = said

    def _refuse_board(self, said: str) -> None:
        """Another board than the one this port is configured for (boards swapped between ports, a USB number or
        a pseudo-terminal reused): its connection is closed before any of its bytes reach the broker, so nothing
        of it is published under this port's name; the board is told, and its client tries again later."""
        self.counters["wrong_boards"] += 1
        if self.wrong != said:
            self.wrong, self.wrong_since = said, time.monotonic()
        event(
            self._log, ERROR, "wrong_board", path=self.board.path, expected=self.board.client_id,
            client_id=said or "-",
            fix="a board swapped or a port renumbered: give each board its /dev/serial/by-id/ path, or correct "
            "client_id in the bridge's config",
        )  # fmt: skip
        self._pending_down.clear()
        self._close_tcp(f"wrong board: {said or 'no client id'} where {self.board.client_id} is expected")

    def _flush_down(self) -> None:
        if self._tcp is None or not self._pending_down:
            return
        try:
            sent = self._tcp.send(self._pending_down)
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            sent = 0
        except OSError as exc:
            self._close_tcp(f"broker connection failed: {exc.__class__.__name__}")
            return
        del self._pending_down[:sent]
        self.counters["bytes_up"] += sent
        if not self._stalled and len(self._pending_down) >= DOWN_QUEUE_MAX:
            self._stalled = True
            self.counters["broker_stalls"] += 1
            # The board is held back (its link window closes) until the broker reads again.
            event(self._log, WARNING, "broker_stalled", queued=len(self._pending_down), board_held=True)
        elif self._stalled and not self._pending_down:
            self._stalled = False
            event(self._log, INFO, "broker_resumed")

    def _upstream(self) -> None:
        """Broker -> board."""
        assert self._tcp is not None
        try:
            data = self._tcp.recv(4096)
        except (BlockingIOError, ssl.SSLWantReadError):
            return
        except OSError as exc:
            self._close_tcp(f"broker connection failed: {exc.__class__.__name__}")
            return
        if not data:
            self._close_tcp("the broker closed the connection")
            return
        self._pending_up = data

    def _flush_up(self) -> None:
        assert self._link is not None
        while self._records_out and self._link.can_send():
            n = self._link.send(frame.MQTT, self._records_out)
            del self._records_out[:n]
        if self._pending_up and self._link.can_send():
            n = self._link.send(frame.MQTT, self._pending_up)
            self.counters["bytes_down"] += n
            self._pending_up = self._pending_up[n:]

    # -- counters ----------------------------------------------------------------------------------------

    def _account(self) -> None:
        """Add what the link counted since the last call (its own counters are read, never reset: the link
        decides by them, a damaged frame's count among them)."""
        link = self._link
        if link is None:
            return
        now = (
            link.decoder.frames,
            link.frames_out,
            link.retransmissions,
            link.timeouts,  # nothing confirmed for the retransmission timeout: a loss, or a board late to answer
            link.decoder.crc_errors,
            link.decoder.overflows,
            link.pauses,  # the board erasing flash: the bridge wrote nothing meanwhile
        )
        for name, value, old in zip(_LINK_COUNTERS, now, self._counted, strict=True):
            self.counters[name] += value - old
        self._counted = now

    def counters_now(self) -> dict[str, int]:
        """The counters as of the board thread's last loop (at most about 50 ms old); read-only here."""
        return dict(self.counters)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


_HELLO_MAX = 1 << 16  # the largest CONNECT the bridge reads for its client id (a board's is far smaller)
_SCAN_S = 0.5  # how often patterns are matched again (a board plugged in is served within about this)


class Bridge:
    """Many boards, one process: a thread per board. The board list can change while it runs (apply(): a
    reload), and ports given as patterns are matched again every _SCAN_S (scan(): hotplug); a board added or
    removed never touches the others' sessions. Counters of boards that went are kept in the totals."""

    def __init__(
        self, boards: list[BoardPort], broker: Destination, allow: list[Destination], tls: TLSConfig | None
    ) -> None:
        if not boards:
            raise BridgeError("no serial ports: give --port PATH (or NAME=PATH), or boards in --config")
        check_names(boards)
        self.broker = broker
        self.allowed = frozenset([broker, *allow])
        self.tls = tls
        self.health = BrokerHealth()
        self.configured = list(boards)
        self.sessions: dict[str, BoardSession] = {}
        self.threads: dict[str, threading.Thread] = {}
        self.gone = dict.fromkeys(COUNTERS, 0)  # what boards removed since the start had counted
        self.not_applied: tuple[str, ...] = ()  # settings the last reload read changed and could not apply
        self.reload_ok = True  # the last SIGHUP's config loaded (dmqtt_bridge_config_last_reload_successful)
        # Boards that went from behind a pattern (unplugged, or gone from USB), and when: missing until they come
        # back or a reload says what is wanted now (an operator's way to forget a board removed on purpose).
        self.gone_at: dict[str, float] = {}
        self._lock = threading.Lock()
        self._started = False

    def start(self) -> None:
        self._started = True
        self.scan()

    def wanted(self) -> list[BoardPort]:
        """The boards to serve now: every configured port, and each port that matches a configured pattern."""
        out: list[BoardPort] = []
        for board in self.configured:
            if board.pattern:
                out += [BoardPort(Path(path).name, path, board.baud) for path in sorted(glob.glob(board.path))]
            else:
                out.append(board)
        return out

    def scan(self, reload: bool = False) -> tuple[list[str], list[str]]:
        """Serve what is wanted now: boards that appeared start, boards that went (a pattern's port unplugged)
        stop, and are missing from then on. On a `reload` the board list says what is wanted: nothing is missing
        but what it holds and is not here. -> (started, stopped) names."""
        wanted = {b.name: b for b in self.wanted()}
        with self._lock:
            if reload:
                self.gone_at.clear()
            current = {name: s.board for name, s in self.sessions.items()}
            stopped = [name for name, board in current.items() if wanted.get(name) != board]
            for name in stopped:
                self._stop(name)
            started = [name for name, board in wanted.items() if name not in self.sessions]
            for name in started:
                self._start(wanted[name])
                self.gone_at.pop(name, None)
            if not reload:
                now = time.monotonic()
                self.gone_at.update((name, now) for name in stopped if name not in wanted)
        return started, stopped

    def apply(self, boards: list[BoardPort]) -> tuple[list[str], list[str]]:
        """A new board list (SIGHUP): what was added starts, what was removed or changed stops (a changed one
        starts again), the others go on untouched."""
        check_names(boards)
        self.configured = list(boards)
        return self.scan(reload=True)

    def behind(self, entry: BoardPort) -> list[BoardSession]:
        """The boards served now for a configured port or pattern."""
        match = (lambda path: fnmatch(path, entry.path)) if entry.pattern else (lambda path: path == entry.path)
        return [s for s in self.boards() if match(s.board.path)]

    def status(self) -> str:
        """What systemd's STATUS says: the boards served, and those expected and not here."""
        text = f"serving {sum(s.present for s in self.boards())} boards"
        missing = sorted(self.missing())
        if missing:
            text += f"; missing: {', '.join(missing)}"
        empty = [e.path for e in self.configured if e.pattern and not any(s.present for s in self.behind(e))]
        if empty:
            text += f"; no board behind {', '.join(empty)}"
        return text

    def missing(self) -> dict[str, float]:
        """The boards expected and not here, each with how long it has been away (seconds): a configured port
        that is not open, and a board that went from behind a pattern (until it is back, or a reload)."""
        with self._lock:  # (the hotplug thread scans meanwhile)
            gone = dict(self.gone_at)
            sessions = list(self.sessions.values())
        now = time.monotonic()
        away = {name: now - at for name, at in gone.items()}
        away.update((s.board.name, now - s.absent_since) for s in sessions if not s.present)
        away.update((s.board.name, now - s.wrong_since) for s in sessions if s.present and s.wrong)
        return away

    def retarget(self, broker: Destination, allow: list[Destination], tls: TLSConfig | None) -> None:
        """A reload's broker, allowed destinations and TLS, for every board now and every board that starts."""
        with self._lock:
            self.broker, self.allowed, self.tls = broker, frozenset([broker, *allow]), tls
            for session in self.sessions.values():
                session.retarget(self.broker, self.allowed, self.tls)

    def _start(self, board: BoardPort) -> None:
        session = BoardSession(board, self.broker, self.allowed, self.tls, self.health)
        thread = threading.Thread(target=session.run, name=f"board-{board.name}", daemon=True)
        self.sessions[board.name] = session
        self.threads[board.name] = thread
        if self._started:
            thread.start()

    def _stop(self, name: str) -> None:
        session = self.sessions.pop(name)
        thread = self.threads.pop(name)
        session.stop.set()
        if thread.is_alive():
            thread.join(5)
        for key, value in session.counters_now().items():
            self.gone[key] += value

    def watch(self, stop: threading.Event) -> None:
        """Match the patterns again every _SCAN_S until `stop` (a thread of its own; nothing to do without
        patterns)."""
        while not stop.wait(_SCAN_S):
            if any(b.pattern for b in self.configured):
                self.scan()

    def boards(self) -> list[BoardSession]:
        with self._lock:
            return list(self.sessions.values())

    def totals(self) -> dict[str, int]:
        """Every counter summed over the boards served now and the ones that went."""
        out = dict(self.gone)
        for session in self.boards():
            for key, value in session.counters_now().items():
                out[key] += value
        return out

    def report(self) -> None:
        for session in self.boards():
            event(
                logs.Board(log, session.board.name),
                INFO,
                "counters",
                client_id=session.client_id or "-",
                **session.counters_now(),
            )
        sys.stdout.flush()

    def stop(self) -> None:
        """Every board's session ends (each logs `stopped` with its counters); they stay listed, so that report()
        and totals() say the final counters."""
        with self._lock:
            self._started = False
            for session in self.sessions.values():
                session.stop.set()
            for thread in self.threads.values():
                if thread.is_alive():
                    thread.join(5)


def check_names(boards: list[BoardPort]) -> None:
    names = [b.name for b in boards if not b.pattern]
    if len(set(names)) != len(names):
        raise BridgeError(f"board names must be unique: {names}")
