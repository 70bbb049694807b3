# A node's transport to its gateway for the client (docs/nodes.md): the wakes that have more than one message to send
# (a power-on's, a backlog once the gateway answers again) run the client over it. No CONNECT goes on the air: the
# gateway holds the node's session, so the node's is always present to it.

import time

from dlink import now
from dlink.now_radio import radio

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


if False:  # type checkers only: MicroPython has no typing module
    from typing import Any

_TRIES = const(3)
_CONNECT = const(1)
_PINGREQ = const(12)
_DISCONNECT = const(14)


def connect(board):
    """The board application's node (board_app.Board, config.json's "espnow" checked): its transport to its
    gateway."""
    cfg = board.cfg
    link = cfg["espnow"]
    return NowTransport(bytes.fromhex(link["gateway"]), link["channel"], link["lmk"], cfg["version"])


class NowTransport:
    """The client's transport to the gateway (dmqtt.interfaces.Transport): what the client writes goes in frames,
    a few packets each, what the gateway answers is read back. The client's CONNECT stays on the node, answered here
    with a CONNACK whose session is present (the gateway holds it); PINGREQ is answered here too, DISCONNECT
    dropped. A node publishes: SUBSCRIBE is refused (OSError)."""

    selectable = None  # polled: espnow has no descriptor an event loop can wait on

    def __init__(self, gateway, channel, lmk=None, version=4, tries=_TRIES):
        self._e = radio(gateway, channel, lmk)
        self._gateway = gateway
        self._version = version
        self._tries = tries
        # One buffer for a frame out and the gateway's answer in: a send is over before anything is read.
        self._frame = bytearray(now.MAX_FRAME)
        self._box: "list[Any]" = [None, self._frame]
        self._in = bytearray()  # what the gateway (or this transport, for the client's CONNECT) answered, unread

    def send(self, buf, start, end):
        at = start
        out = now.start(self._frame, self._version)
        while at < end:
            stop = now.packet_end(buf, at, end)
            if stop < 0:
                raise OSError("espnow: a packet cut short")
            kind = buf[at] >> 4
            if kind == _CONNECT:
                # The session is the gateway's, and present: CONNACK, session present, accepted.
                self._in += b"\x20\x03\x01\x00\x00" if self._version == 5 else b"\x20\x02\x01\x00"
            elif kind == _PINGREQ:
                self._in += b"\xd0\x00"
            elif kind in (8, 10):
                raise OSError("espnow: a node publishes only (no SUBSCRIBE through its gateway)")
            elif kind != _DISCONNECT:
                if stop - at > now.ROOM:
                    raise OSError("espnow: a packet of %d bytes passes a frame's %d" % (stop - at, now.ROOM))
                if out + stop - at > now.MAX_FRAME:
                    self._flush(out)
                    out = now.HEADER
                self._frame[out : out + stop - at] = buf[at:stop]
                out += stop - at
            at = stop
        if out > now.HEADER:
            self._flush(out)
        return end - start

    def _flush(self, n):
        for _ in range(self._tries):
            if self._e.send(self._gateway, memoryview(self._frame)[:n], True):
                return
        raise OSError("espnow: the gateway does not answer")

    def readinto(self, buf):
        self._take(0)
        if not self._in:
            return None
        n = min(len(buf), len(self._in))
        buf[:n] = self._in[:n]
        self._in = self._in[n:]
        return n

    def wait(self, timeout_ms, writable=False):
        if writable or self._in:
            return True
        began = time.ticks_ms()
        while True:
            left = timeout_ms - time.ticks_diff(time.ticks_ms(), began)
            if self._take(max(0, left)) or left <= 0:
                return bool(self._in)

    def _take(self, timeout_ms):
        """Frames from the gateway into the unread bytes; True when one came within timeout_ms."""
        box = self._box
        came = False
        while True:
            got = self._e.recvinto(box, timeout_ms)
            if not got:
                return came
            if box[0] == self._gateway:
                try:
                    now.version_of(self._frame)
                except now.FrameError:
                    continue  # (not a gateway's frame: another program's on this channel)
                self._in += memoryview(self._frame)[now.HEADER : got]
                came = True
            timeout_ms = 0

    def close(self):
        pass
