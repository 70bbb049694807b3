# Byte-stream transports for the MQTT client. Interface (duck-typed, the same for every transport):
#   send(view) -> bytes accepted (0 when the stream cannot take more now)
#   readinto(buf) -> bytes read, None when nothing is waiting, 0 when the peer closed
#   wait(timeout_ms, writable=False) -> True when readable (or writable) before the timeout
#   close()
# The client never touches a socket itself, so the same client code runs over TCP and over the serial link.

import select
import socket

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[no-redef,misc]
        return x


_EAGAIN = const(11)
_EINPROGRESS = const(115)
_IPPROTO_TCP = const(6)
_TCP_NODELAY = const(1)


class TCPTransport:
    def __init__(self, host, port, timeout_ms=10000):
        addr = socket.getaddrinfo(host, port)[0][-1]
        sock = socket.socket()
        try:
            sock.settimeout(timeout_ms / 1000)
            sock.connect(addr)
            # One write per packet and no Nagle: a QoS 1 flow otherwise waits ~40 ms per message on Nagle plus
            # the broker's delayed ACK.
            sock.setsockopt(_IPPROTO_TCP, _TCP_NODELAY, 1)
            # Non-blocking from here on, driven by poll: a blocking readinto() on a MicroPython stream waits
            # until the whole buffer is full, which an MQTT peer never does.
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self._poller = select.poll()
        self._poller.register(sock, select.POLLIN)

    def send(self, view):
        try:
            return self._sock.send(view)
        except OSError as exc:
            if exc.args[0] == _EAGAIN:
                return 0
            raise

    def readinto(self, buf):
        try:
            return self._sock.readinto(buf)
        except OSError as exc:
            if exc.args[0] == _EAGAIN:
                return None
            raise

    def wait(self, timeout_ms, writable=False):
        self._poller.modify(self._sock, select.POLLOUT if writable else select.POLLIN)
        return bool(self._poller.poll(timeout_ms))

    def close(self):
        self._sock.close()
