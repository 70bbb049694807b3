# socket module shim for the virtual board: the Unix port's own sockets, and for a board on WiFi (an active
# network.WLAN station, see network.py) TCP sockets that go through the virtual access point the host runs
# (host_bridge/vboard/wifi.py), so that its outages reach them as they reach lwIP's:
#
# - connect() without an association fails at once with EHOSTUNREACH (lwIP: no route);
# - an open socket whose association is lost fails with ECONNABORTED (ESP-IDF takes the station's address away
#   when it disconnects, and lwIP aborts the connections bound to it), whatever the host's reset said;
# - getaddrinfo() of a name (not a literal address) fails with OSError(-202) without an association (lwIP's
#   resolver: EAI_FAIL).
#
# A station socket is a host socket to the access point's relay, which is told the destination and the
# association's generation in a header (b"VBAP", generation u32, sockaddr length u8, sockaddr) and answers with
# one byte, 0 or the errno of the connection it made to the destination; then bytes flow both ways until the
# access point loses the station. A non-blocking connect (setblocking(False), settimeout(0)) makes that exchange
# blocking, then raises EINPROGRESS as lwIP's does, the socket writable at once: the header must reach the relay
# before the application's first bytes (asyncio.open_connection and mqtt_as connect so). The class is an
# io.IOBase with the stream protocol, so that select.poll polls the host socket's descriptor (ioctl
# MP_STREAM_GET_FILENO) and ssl wraps it as it wraps a socket.
#
# A board that never activates the station (a config without "wifi") reaches the host's network directly, as if
# wired: its TCP sockets are host sockets to the destination, in the same wrapper, so that they too raise
# newlib's numbers (esp_errno.py) as lwIP's do. UDP sockets are the port's own.
import sys

_path = sys.path
sys.path = []  # the built-in module, not this file
try:
    import socket as _port
    from socket import *  # noqa: F403
finally:
    sys.path = _path

import io
import select
import struct

import network
import vboard_state
from esp_errno import EADDRINUSE, EAGAIN, EALREADY, ECONNABORTED, EHOSTUNREACH, EINPROGRESS, ENOTCONN, ETIMEDOUT

_MAGIC = b"VBAP"
_EAI_FAIL = -202
_STREAM_POLL = 3
_STREAM_CLOSE = 4
_STREAM_GET_FILENO = 10
_EINVAL = 22
# A TCP socket here is lwIP's: it raises newlib's numbers (esp_errno.py), the host socket under it Linux's. The
# Linux numbers that differ, and newlib's for them (the rest, 1 to 34, ECONNRESET, ECONNREFUSED, ENOBUFS, are the
# same on both): EAFNOSUPPORT, EADDRINUSE, EADDRNOTAVAIL, ENETDOWN, ENETUNREACH, ENETRESET, ECONNABORTED, EISCONN,
# ENOTCONN, ETIMEDOUT, EHOSTDOWN, EHOSTUNREACH, EALREADY, EINPROGRESS.
_FROM_LINUX = {97: 106, 98: EADDRINUSE, 99: 125, 100: 115, 101: 114, 102: 126, 103: ECONNABORTED, 106: 127,
               107: ENOTCONN, 110: ETIMEDOUT, 112: 117, 113: EHOSTUNREACH, 114: EALREADY, 115: EINPROGRESS}  # fmt: skip
_WDT_SLICE_MS = 10


def getaddrinfo(host, port, af=0, type=0, proto=0, flags=0):
    """On WiFi, as the ESP32 port answers: each address an (IP, port) tuple, which libraries index
    (asyncio.open_connection, mqtt_async); the Unix port's are raw sockaddr bytes, kept for a wired board."""
    if not network.on_wifi():
        return _port.getaddrinfo(host, port, af, type, proto, flags)
    if not network.associated() and not _literal(host):
        raise OSError(_EAI_FAIL)
    found = _port.getaddrinfo(host, port, af, type, proto, flags)
    return [(f, t, p, name, _ip_port(sockaddr)) for f, t, p, name, sockaddr in found]


def _ip_port(sockaddr):
    """(IP, port) of an AF_INET sockaddr: family u16, port u16 big-endian, four address bytes."""
    return "%d.%d.%d.%d" % tuple(sockaddr[4:8]), (sockaddr[2] << 8) | sockaddr[3]


def _sockaddr(addr):
    """The relay's sockaddr bytes of an (IP, port) tuple, as getaddrinfo gives it on WiFi (or raw bytes)."""
    if not isinstance(addr, tuple):
        return bytes(addr)
    host, port = addr
    return (
        struct.pack("<H", _port.AF_INET) + struct.pack(">H", port) + bytes(int(b) for b in host.split(".")) + bytes(8)
    )


def _literal(host):
    parts = host.split(".")
    return len(parts) == 4 and all(p.isdigit() for p in parts)


def socket(af=_port.AF_INET, type=_port.SOCK_STREAM, proto=0):
    if af == _port.AF_INET and type == _port.SOCK_STREAM:
        tcp = _SPARE.pop() if _SPARE else _TcpSocket()
        tcp.open(not network.on_wifi())
        return tcp
    return _port.socket(af, type, proto)


class _TcpSocket(io.IOBase):
    """A TCP socket as lwIP's: the WiFi station's, through the access point's relay, or a wired board's, the host's
    own socket to the destination; either raises newlib's numbers. The wrapper is the emulation's, not the
    firmware's: a few are made at import (before the firmware's heap is pinned) and reused once closed, so that a
    board pays for a socket what a chip's does, the port's own socket object. What it does not define (bind,
    listen, accept: a wired board's server) is the host socket's."""

    def __init__(self):
        self._s = None
        self._wired = False  # a wired board's: no access point, no association to lose
        self._epoch = -1  # the association it was opened in
        self._timeout = None  # as settimeout() has it: None blocks, 0 does not
        self._poller = None  # made at the first blocking read under a task watchdog

    def __getattr__(self, name):
        return getattr(self._s, name)

    def open(self, wired):
        self._s = _port.socket()
        self._wired = wired
        self._epoch = -1
        self._timeout = None
        self._poller = None

    def _wait_readable(self):
        """A blocking read waits here in slices while a task watchdog runs, which resets the board when nobody
        feeds it meanwhile, as a chip's does to a task blocked in lwIP. Without one, the host's read blocks."""
        machine = sys.modules.get("machine")
        if self._timeout == 0 or machine is None or not machine.wdt_armed():
            return
        if self._poller is None:
            self._poller = select.poll()
            self._poller.register(self._s, select.POLLIN)
        waited = 0
        limit = None if self._timeout is None else self._timeout * 1000
        while not self._poller.poll(_WDT_SLICE_MS):
            machine.wdt_check()
            waited += _WDT_SLICE_MS
            if limit is not None and waited >= limit:
                return  # (the read's own timeout says so)

    # -- what lwIP would say -------------------------------------------------------------------------------

    def _lost(self):
        """The association this socket lives in is gone (the station's own count first: it costs no file
        read)."""
        return not self._wired and (self._epoch != network._sta.epoch or self._epoch != network.epoch())

    def _failed(self, exc):
        number = exc.errno
        if number != EAGAIN and self._lost():
            self._s.close()
            return OSError(ECONNABORTED)
        if number == EAGAIN and self._timeout:
            return OSError(ETIMEDOUT)  # the ESP32 port's for a timeout ran out (the Unix port's EAGAIN)
        return OSError(_FROM_LINUX[number]) if number in _FROM_LINUX else exc

    def _check(self):
        if not self._wired and self._epoch != network._sta.epoch:  # lost by the station itself (a light sleep)
            self._s.close()
            raise OSError(ECONNABORTED)

    # -- socket ----------------------------------------------------------------------------------------------

    def connect(self, addr):
        if self._wired:
            try:
                self._s.connect(addr if not isinstance(addr, tuple) else _port.getaddrinfo(addr[0], addr[1])[0][-1])
            except OSError as exc:
                raise self._failed(exc)
            return
        if vboard_state.watches("connect"):
            vboard_state.event("connect")  # a cut here lands inside the connect
        port, generation = network.route()
        self._epoch = network._sta.epoch
        sockaddr = _sockaddr(addr)
        if self._timeout == 0:
            self._s.setblocking(True)  # (the relay's answer is the exchange's end: it is waited for)
        try:
            self._s.connect(_port.getaddrinfo("127.0.0.1", port)[0][-1])
            self._s.write(_MAGIC + struct.pack(">IB", generation, len(sockaddr)) + sockaddr)
            self._wait_readable()
            answer = self._s.read(1)
        except OSError as exc:
            raise self._failed(exc)
        if not answer:
            self._s.close()
            raise OSError(ECONNABORTED if self._lost() else EHOSTUNREACH)
        if answer[0]:
            self._s.close()
            raise OSError(_FROM_LINUX.get(answer[0], answer[0]))  # (the relay's connect: the host's number)
        if self._timeout == 0:
            self._s.setblocking(False)
            raise OSError(EINPROGRESS)

    def settimeout(self, seconds):
        self._timeout = seconds
        self._s.settimeout(seconds)

    def setblocking(self, flag):
        self._timeout = None if flag else 0
        self._s.setblocking(flag)

    def setsockopt(self, level, option, value):
        self._s.setsockopt(level, option, value)

    def fileno(self):
        return self._s.fileno()

    def close(self):
        if self._s is not None:
            self._s.close()
            self._s = None
            if len(_SPARE) < _SPARES:
                _SPARE.append(self)
        # A TLS connection closes its socket once mbedTLS has let go of the connection's buffers: the arena takes
        # them back (vboard_state.tls_call).
        vboard_state.tls_refill()

    def readinto(self, buf, nbytes=None):
        self._check()
        self._wait_readable()
        try:
            got = self._s.readinto(buf) if nbytes is None else self._s.readinto(buf, nbytes)
        except OSError as exc:
            raise self._failed(exc)
        if got == 0 and self._lost():
            raise OSError(ECONNABORTED)
        return got

    def read(self, nbytes=-1):
        self._check()
        self._wait_readable()
        try:
            data = self._s.read(nbytes) if nbytes >= 0 else self._s.read()
        except OSError as exc:
            raise self._failed(exc)
        if data == b"" and self._lost():
            raise OSError(ECONNABORTED)
        return data

    def recv(self, nbytes):
        self._check()
        self._wait_readable()
        try:
            data = self._s.recv(nbytes)
        except OSError as exc:
            raise self._failed(exc)
        if data == b"" and self._lost():
            raise OSError(ECONNABORTED)
        return data

    def readline(self):
        self._check()
        self._wait_readable()
        try:
            return self._s.readline()
        except OSError as exc:
            raise self._failed(exc)

    def write(self, buf, offset=None, length=None):
        self._check()
        try:
            if offset is None:
                return self._s.write(buf)
            if length is None:
                return self._s.write(buf, offset)
            return self._s.write(buf, offset, length)
        except OSError as exc:
            raise self._failed(exc)

    def send(self, buf):
        self._check()
        try:
            return self._s.send(buf)
        except OSError as exc:
            raise self._failed(exc)

    def sendall(self, buf):
        self._check()
        try:
            return self._s.sendall(buf)
        except OSError as exc:
            raise self._failed(exc)

    def ioctl(self, request, arg):
        """The stream protocol's control calls, for select.poll and ssl: the host socket's descriptor, a poll of
        it, close."""
        if request == _STREAM_GET_FILENO:
            return self._s.fileno()
        if request == _STREAM_POLL:
            poller = select.poll()
            poller.register(self._s, arg)
            for _obj, events in poller.ipoll(0):
                return events
            return 0
        if request == _STREAM_CLOSE:
            self.close()
            return 0
        return -_EINVAL


_SPARES = 2  # a board has its connection to the broker, and at times a second (a TLS handshake's retry)
_SPARE = [_TcpSocket() for _ in range(_SPARES)]
