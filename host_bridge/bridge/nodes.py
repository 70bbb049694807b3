"""Nodes behind a gateway board (docs/nodes.md, docs/link-protocol.md "Nodes behind a gateway"): once the gateway
has asked for them on the control channel, its MQTT channel carries records that name a node (firmware/dlink/
nodes.py, the very file the gateway runs), and each node gets its own TCP connection to the broker, opened when the
gateway asks. To the broker each node is a client of its own (the gateway's client for it sends its CONNECT); to
the bridge's logs and metrics it is a board of its own, named GATEWAY/NODE.

The board thread that serves the gateway's port drives this: it feeds the records it reads, polls the nodes'
sockets with its own, and sends the records this queues back to the gateway."""

from __future__ import annotations

import logging
import select
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from logging import INFO, WARNING

from dlink import nodes
from dmqtt import codec, codec_host
from dmqtt.errors import CodecError
from host_bridge import logs
from host_bridge.logs import event
from host_bridge.net import Destination, TLSConfig

log = logging.getLogger("host_bridge")

NODE_COUNTERS = ("connects", "connect_failures", "bytes_up", "bytes_down")
_DOWN_MAX = 64 * 1024  # a node's bytes waiting for the broker: past it, the gateway is not read (its link holds)
_HELLO_MAX = 1 << 16


@dataclass
class NodeConn:
    """One node's connection: its name (the gateway's name for it, its MAC in hex), its TCP socket to the broker."""

    gateway: str
    index: int
    name: str
    tcp: socket.socket | None = None
    client_id: str = ""
    pending_down: bytearray = field(default_factory=bytearray)
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(NODE_COUNTERS, 0))
    hello: codec_host.PacketDecoder | None = None

    @property
    def label(self) -> str:
        return f"{self.gateway}/{self.name}"

    @property
    def connected(self) -> bool:
        return self.tcp is not None


class NodeRelay:
    """Every node behind one gateway: `send` queues a record for the gateway (the board thread writes it to the
    link ahead of nothing else: records are the MQTT channel's only bytes now)."""

    def __init__(
        self,
        gateway: str,
        broker: Callable[[], Destination],
        tls: Callable[[], TLSConfig | None],
        send: Callable[[bytes], None],
        on_connect: Callable[[Destination, str | None], None],
    ) -> None:
        self.gateway = gateway
        self._broker = broker
        self._tls = tls
        self._send = send
        self._on_connect = on_connect  # (destination, error or None): the bridge's broker health, its counters
        self.nodes: dict[int, NodeConn] = {}
        self.records = nodes.Records()

    # -- records from the gateway ------------------------------------------------------------------------

    def feed(self, data: bytes | bytearray) -> None:
        try:
            self.records.feed(data, 0, len(data), self._record)
        except nodes.RecordError as exc:
            event(logs.Board(log, self.gateway), WARNING, "bad_node_record", error=str(exc))

    def _record(self, kind: int, index: int, body: memoryview) -> None:
        if kind == nodes.OPEN:
            name = bytes(body).decode(errors="replace") or str(index)
            node = self.nodes.get(index)
            if node is None or node.name != name:
                node = self.nodes[index] = NodeConn(self.gateway, index, name)
            self._open(node)
        elif kind == nodes.DATA:
            node = self.nodes.get(index)
            if node is None or node.tcp is None:
                return  # bytes of a connection that is gone: its client reconnects
            node.pending_down += body
            if node.hello is not None:
                self._hear(node, bytes(body))
        elif kind == nodes.CLOSE:
            node = self.nodes.get(index)
            if node is not None:
                self.close(node, "closed by the gateway", notify=False)

    def _open(self, node: NodeConn) -> None:
        self.close(node, "the gateway opened a new connection", notify=False)
        dest = self._broker()
        board = logs.Board(log, node.label)
        try:
            sock = socket.create_connection((dest.host, dest.port), timeout=5)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tls = self._tls()
            if tls is not None:
                sock = tls.context().wrap_socket(sock, server_hostname=dest.host)
            sock.setblocking(False)
        except (OSError, ssl.SSLError) as exc:
            node.counters["connect_failures"] += 1
            event(board, WARNING, "connect_failed", destination=dest, error=str(exc))
            self._on_connect(dest, str(exc))
            self._send(nodes.record(nodes.REFUSED, node.index, f"cannot reach {dest}".encode()[: nodes.MAX_BODY]))
            return
        node.tcp = sock
        node.hello = codec_host.PacketDecoder(codec.V5, _HELLO_MAX)
        node.counters["connects"] += 1
        self._on_connect(dest, None)
        event(board, INFO, "connected", destination=dest, client_id=node.client_id or "-")
        self._send(nodes.record(nodes.OPENED, node.index))

    def _hear(self, node: NodeConn, data: bytes) -> None:
        """The node's first packet on a connection is its CONNECT (the gateway's client's): its client id names it
        in the logs and the metrics. Only the client id is taken, never credentials."""
        assert node.hello is not None
        try:
            packet = next(node.hello.packets(data), None)
        except CodecError:
            node.hello = None
            return
        if packet is None:
            return
        node.hello = None
        if packet.type == codec.CONNECT and packet.client_id and packet.client_id != node.client_id:
            node.client_id = packet.client_id
            event(logs.Board(log, node.label), INFO, "client", client_id=node.client_id, gateway=self.gateway)

    def close(self, node: NodeConn, why: str, notify: bool = True) -> None:
        if node.tcp is None:
            return
        try:
            node.tcp.close()
        except OSError:
            pass
        node.tcp = None
        node.hello = None
        node.pending_down.clear()
        event(logs.Board(log, node.label), INFO, "disconnected", reason=why)
        if notify:
            self._send(nodes.record(nodes.CLOSE, node.index, why.encode()[: nodes.MAX_BODY]))

    def close_all(self, why: str) -> None:
        for node in self.nodes.values():
            self.close(node, why, notify=False)

    # -- the nodes' sockets ------------------------------------------------------------------------------

    def register(self, poller: select.poll, room: bool) -> None:
        """Watch each node's socket: for what the broker sends while the gateway's link has `room`, and for
        room to write what waits for the broker."""
        for node in self.nodes.values():
            if node.tcp is not None:
                events = (select.POLLIN if room else 0) | (select.POLLOUT if node.pending_down else 0)
                if events:
                    poller.register(node.tcp, events)

    def held(self) -> bool:
        """Some node's bytes wait for the broker beyond the bound: the gateway's records are not read meanwhile."""
        return any(len(n.pending_down) >= _DOWN_MAX for n in self.nodes.values())

    def service(self, ready: dict[int, int]) -> None:
        for node in list(self.nodes.values()):
            tcp = node.tcp
            if tcp is None:
                continue
            if node.pending_down:
                try:
                    sent = tcp.send(node.pending_down)
                except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                    sent = 0
                except OSError as exc:
                    self.close(node, f"broker connection failed: {exc.__class__.__name__}")
                    continue
                del node.pending_down[:sent]
                node.counters["bytes_up"] += sent
            if ready.get(tcp.fileno(), 0) & (select.POLLIN | select.POLLHUP | select.POLLERR):
                try:
                    data = tcp.recv(nodes.MAX_BODY)
                except (BlockingIOError, ssl.SSLWantReadError):
                    continue
                except OSError as exc:
                    self.close(node, f"broker connection failed: {exc.__class__.__name__}")
                    continue
                if not data:
                    self.close(node, "the broker closed the connection")
                    continue
                node.counters["bytes_down"] += len(data)
                self._send(nodes.record(nodes.DATA, node.index, data))
