# The gateway board (docs/nodes.md): a mains-powered ESP32 that takes its nodes' readings over ESP-NOW and reaches
# the broker over the serial link to the host bridge, many nodes on one line. Each node is an MQTT client of its own
# here (its client id, its session, its will), journaled on the gateway's flash in a slice of the mqttlog
# partition: a node's message leaves the node's journal once it is on this flash (the durable hop), and goes on to
# the broker as any journaled message does, through power cuts of either board, a killed bridge, a restarted broker.
#
# Its config.json: {"gateway": {"channel", "pmk", "nodes": [{"mac", "client_id", "lmk", "will"}]}, "uart",
# "mqtt_version", "keepalive_s"}, checked by gateway_config.py (config.py hands it over when "gateway" is there).
# board_open.open_board() runs run() for it.

import gc
import time

import espnow
import network
from gateway_config import SLOT_SECTORS

from dlink import control, frame, nodes, now
from dlink import transport as serial
from dmqtt import codec
from dmqtt.client import Backoff, MQTTClient
from dmqtt.errors import MQTTError, PublishRefused, QueueFull
from dmqtt.journal_ring import RingJournal

if False:  # type checkers only: MicroPython has no typing module
    from typing import Any

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


_RECORD_MAX = const(320)  # a node's message: a frame's 248 bytes at most, and the record's own fields
_MAX_PACKET = const(512)
_SLOTS = const(16)  # messages a node's journal holds in flight
_RXBUF = const(4096)  # ESP-NOW's receive buffer: bursts of frames from many nodes
_IDLE = const(0)
_OPENING = const(1)
_CONNECTING = const(2)
_UP = const(3)
_ANSWER_TRIES = const(2)
_OUT_MAX = const(8192)  # record bytes waiting for the link: beyond, a node's connection is failed (and resent)
_N_WAIT_MS = const(5000)
_PUBLISH = const(3)
_PUBREL = const(6)


def _partition():
    import esp32

    found = esp32.Partition.find(esp32.Partition.TYPE_DATA, label="mqttlog")
    return found[0] if found else None


class Slice:
    """`count` sectors of a partition from sector `first`: a node's journal, as a partition of its own."""

    def __init__(self, part, first, count):
        self._part = part
        self._first = first
        self._count = count

    def readblocks(self, block, buf, off=0):
        self._part.readblocks(self._first + block, buf, off)

    def writeblocks(self, block, buf, off=0):
        self._part.writeblocks(self._first + block, buf, off)

    def ioctl(self, op, arg):
        if op == 4:
            return self._count
        if op == 6:
            return self._part.ioctl(6, self._first + arg)
        return self._part.ioctl(op, arg)


class Stream:
    """A node's MQTT connection through the bridge, as its client's transport: what the client writes goes to
    the link as DATA records; what the bridge sends for the node is read here."""

    selectable = None

    def __init__(self, gateway, index):
        self._gw = gateway
        self._index = index
        self.rx = bytearray()
        self.closed = False

    def send(self, buf, start, end):
        if self.closed:
            raise OSError("the bridge closed the connection")
        at = start
        while at < end:
            stop = min(end, at + nodes.MAX_BODY)
            self._gw.record(nodes.DATA, self._index, memoryview(buf)[at:stop])
            at = stop
        return end - start

    def readinto(self, buf):
        if not self.rx:
            return 0 if self.closed else None
        n = min(len(buf), len(self.rx))
        buf[:n] = self.rx[:n]
        self.rx = self.rx[n:]
        return n

    def wait(self, timeout_ms, writable=False):
        return writable or bool(self.rx) or self.closed

    def close(self):
        if not self.closed:
            self.closed = True
            self._gw.record(nodes.CLOSE, self._index, b"")


class Node:
    """One node: its peer on the air, its client and journal here, its connection's state."""

    def __init__(self, index, entry, cfg, part):
        self.index = index
        self.mac = bytes.fromhex(entry["mac"])
        self.name = entry["client_id"]
        will = entry["will"]
        if will is not None:
            will = (will[0], will[1].encode(), will[2], will[3])
        self.client = MQTTClient(
            entry["client_id"],
            RingJournal(Slice(part, index * SLOT_SECTORS, SLOT_SECTORS), _RECORD_MAX),
            version=cfg["version"],
            keepalive=cfg["keepalive"],
            will=will,
            max_messages=_SLOTS,
            max_packet=_MAX_PACKET,
        )
        self.stream = None
        self.state = _IDLE
        self.backoff = Backoff()
        self.stored = 0  # node messages on this gateway's flash since boot
        self.duplicates = 0  # node messages taken again (their answer was lost), not stored twice


class Gateway:
    def __init__(self, cfg):
        self.cfg = cfg
        self.out = bytearray()  # records for the link, in order
        self.records = nodes.Records()
        self.by_mac = {}
        self.nodes = []
        self.frame = bytearray(now.MAX_FRAME)
        self.box = [None, bytearray(now.MAX_FRAME)]
        self.rx = bytearray(256)
        self.lines = control.Lines()
        self.link: Any = None  # dlink.link.Link, once start_link() made it
        self.e: Any = None  # espnow.ESPNow, once start_air() set it up
        self.served = False  # the bridge answered "N": it serves nodes
        self.unknown = 0  # frames from no configured node

    def record(self, kind, index, body):
        if len(self.out) > _OUT_MAX:
            raise OSError("the link is behind by %d bytes" % len(self.out))
        self.out += nodes.record(kind, index, body)

    # -- the serial link and the bridge ----------------------------------------------------------------------

    def start_link(self):
        uart = self.cfg["uart"]
        self.link = serial.LinkTransport.prepare(uart["id"], uart["baud"], **uart["pins"])
        began = time.ticks_ms()
        while not self.link.up:
            serial.pump()
            time.sleep_ms(5)
            if time.ticks_diff(time.ticks_ms(), began) > 30000:
                began = time.ticks_ms()
                print("gateway: no host bridge on the serial link yet (host-bridge run --port ...)")
        self.link.send(frame.CONTROL, control.encode(control.NODES, nodes.VERSION))
        began = time.ticks_ms()
        while not self.served and time.ticks_diff(time.ticks_ms(), began) < _N_WAIT_MS:
            self.service_link()
            time.sleep_ms(5)
        if not self.served:
            print("gateway: the host bridge does not serve nodes (host-bridge 0.14 or later does): upgrade it")
            return False
        return True

    def service_link(self):
        serial.pump()
        link = self.link
        byte = self.rx
        while link.readinto(frame.CONTROL, memoryview(byte)[:1]):
            line = self.lines.push(byte[0])
            if line is None:
                continue
            try:
                kind, text = control.decode(line)
            except control.ControlError:
                continue
            if kind == control.NODES and text == nodes.VERSION:
                self.served = True
        while True:
            n = link.readinto(frame.MQTT, self.rx)
            if not n:
                break
            try:
                self.records.feed(self.rx, 0, n, self.on_record)
            except nodes.RecordError as exc:
                print("gateway: %s" % exc)
        while self.out and link.can_send(frame.MQTT):
            n = link.send(frame.MQTT, self.out)
            self.out = self.out[n:]
        serial.pump()

    def on_record(self, kind, index, body):
        if index >= len(self.nodes):
            return
        node = self.nodes[index]
        if kind == nodes.DATA:
            if node.stream is not None:
                node.stream.rx += body
        elif kind == nodes.OPENED and node.state == _OPENING:
            node.state = _CONNECTING
            try:
                node.client.send_connect(node.stream)
            except (OSError, MQTTError):
                self.drop(node)
        elif kind in (nodes.REFUSED, nodes.CLOSE):
            if node.stream is not None:
                node.stream.closed = True
            if node.state in (_OPENING, _CONNECTING):
                print("gateway: node %s: no connection (%s)" % (node.name, bytes(body).decode()))
                self.drop(node)

    def drop(self, node):
        node.client.close()
        node.stream = None
        node.state = _IDLE
        node.backoff.next_ms()

    def tend(self, node):
        """A node's connection, a step at a time: the gateway never waits on one node."""
        client = node.client
        try:
            if node.state == _IDLE:
                if node.backoff.due() or not self.link.up:
                    return
                node.stream = Stream(self, node.index)
                self.record(nodes.OPEN, node.index, node.mac.hex().encode())
                node.state = _OPENING
            elif node.state == _CONNECTING:
                present = client.take_connack()
                if present is not None:
                    client.establish(present)
                    node.state = _UP
                    node.backoff.reset()
                    print("gateway: node %s connected (session present %d, %d in flight)"
                          % (node.name, present, client.outstanding()))  # fmt: skip
            elif node.state == _UP:
                client.poll(0)
        except (OSError, MQTTError) as exc:
            print("gateway: node %s: connection lost (%s)" % (node.name, exc))
            self.drop(node)

    # -- the air ---------------------------------------------------------------------------------------------

    def start_air(self):
        g = self.cfg["gateway"]
        sta = network.WLAN(network.STA_IF)
        sta.active(True)
        sta.config(channel=g["channel"])
        e = espnow.ESPNow()
        e.config(rxbuf=_RXBUF)
        e.active(True)
        if g["pmk"]:
            e.set_pmk(g["pmk"])
        for node in self.nodes:
            lmk = self.cfg["gateway"]["nodes"][node.index]["lmk"]
            if lmk:
                e.add_peer(node.mac, lmk, encrypt=True)
            else:
                e.add_peer(node.mac)
        self.e = e

    def on_frame(self, mac, msg, n):
        node = self.by_mac.get(bytes(mac))
        if node is None:
            self.unknown += 1  # not paired with this gateway: ignored
            return
        try:
            version = now.version_of(msg)
        except now.FrameError:
            return
        out = self.frame
        end = now.start(out, version)
        at = now.HEADER
        while at < n:
            stop = now.packet_end(msg, at, n)
            if stop < 0:
                break
            end = self.take(node, version, msg, at, stop, out, end)
            at = stop
        if end > now.HEADER:
            for _ in range(_ANSWER_TRIES):
                if self.e.send(node.mac, memoryview(out)[:end], True):
                    break

    def take(self, node, version, msg, at, stop, out, end):
        """One packet from a node; its acknowledgement written into `out` at `end` (where it now ends)."""
        kind = msg[at] >> 4
        flags = msg[at] & 0x0F
        head = 2 if msg[at + 1] < 128 else 3
        body = memoryview(msg)[at + head : stop]
        if kind == _PUBREL:
            pid = (body[0] << 8) | body[1]
            return codec.encode_ack(codec.PUBCOMP, pid, 0, version, None, out, end)
        if kind != _PUBLISH:
            return end
        topic, pid, payload, _props = codec.decode_publish(flags, body, version)
        qos = (flags >> 1) & 3
        client = node.client
        if not qos:
            if client.connected:
                try:
                    client.publish(topic, bytes(payload), 0, bool(flags & 1))
                except (OSError, MQTTError):
                    self.drop(node)
            return end
        if pid == client.mark:
            node.duplicates += 1  # its answer was lost: the node sends it again, and it is here already
        else:
            try:
                # The durability point of the node's message: on this flash when publish() returns. The node's
                # packet id becomes the mark: a second copy of it is known by it (dlink/now.py).
                client.publish(topic, bytes(payload), qos, bool(flags & 1), mark=pid)
                node.stored += 1
            except (QueueFull, PublishRefused) as exc:
                print("gateway: node %s: message %d not taken (%s)" % (node.name, pid, exc))
                return end  # no answer: the node keeps it and sends it again
        return codec.encode_ack(codec.PUBACK if qos == 1 else codec.PUBREC, pid, 0, version, None, out, end)

    def listen(self, ms):
        """Frames from the nodes, for up to `ms` (or until the link has bytes)."""
        e = self.e
        box = self.box
        n = e.recvinto(box, ms)
        while n:
            self.on_frame(box[0], box[1], n)
            n = e.recvinto(box, 0)


def run(cfg):
    """The gateway's life (board_open.open_board runs it for a config with "gateway"): it never returns on a chip,
    and ends with the JournalError of a journal whose flash failed (board_app says it and stops)."""
    gw = Gateway(cfg)
    part = _partition()
    for i, entry in enumerate(cfg["gateway"]["nodes"]):
        node = Node(i, entry, cfg, part)
        for note in node.client.open():
            print("gateway: node %s: %s" % (node.name, note))
        gw.nodes.append(node)
        gw.by_mac[node.mac] = node
        gc.collect()
    gw.start_air()
    print("gateway: %d nodes on channel %d, %d messages in flight"
          % (len(gw.nodes), cfg["gateway"]["channel"], sum(n.client.outstanding() for n in gw.nodes)))  # fmt: skip
    while True:
        if not gw.start_link():
            time.sleep_ms(5000)
            continue
        print("gateway: the host bridge serves its nodes")
        resets = gw.link.peer_resets
        while gw.link.peer_resets == resets:
            gw.service_link()
            for node in gw.nodes:
                gw.tend(node)
            gw.service_link()
            gw.listen(2)
        # The bridge restarted: every node's connection is gone with it.
        print("gateway: the host bridge restarted")
        gw.served = False
        gw.out = bytearray()
        gw.records.reset()
        for node in gw.nodes:
            if node.state != _IDLE:
                gw.drop(node)
                node.backoff.reset()
