# Byte-stream transports for the MQTT client. Interface (duck-typed, the same for every transport):
#   send(buf, start, end) -> bytes of buf[start:end] accepted (0 when the stream cannot take more now)
#   readinto(buf) -> bytes read, None when nothing is waiting, 0 when the peer closed
#   wait(timeout_ms, writable=False) -> True when readable (or writable) before the timeout
#   close()
#   selectable: the object an event loop can wait on for input and output (the asyncio face, dmqtt.aio), or None
#     when the transport has to be polled (the serial link keeps timers of its own)
# The client never touches a socket itself, so the same client code runs over TCP and over the serial link.

import select
import socket

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


_EAGAIN = const(11)
_IPPROTO_TCP = const(6)
_TCP_NODELAY = const(1)


class TCPTransport:
    """TCP to the broker, optionally in TLS: `tls` is an ssl.SSLContext (dmqtt.tls.context builds one from the
    board's config) and `server_hostname` the name the broker's certificate must carry (SNI too)."""

    def __init__(self, host, port, timeout_ms=10000, tls=None, server_hostname=None):
        addr = socket.getaddrinfo(host, port)[0][-1]
        sock = socket.socket()
        raw = sock
        try:
            sock.settimeout(timeout_ms / 1000)
            sock.connect(addr)
            # One write per packet and no Nagle: a QoS 1 flow otherwise waits ~40 ms per message on Nagle plus
            # the broker's delayed ACK.
            sock.setsockopt(_IPPROTO_TCP, _TCP_NODELAY, 1)
            if tls is not None:
                # The handshake runs here, while the socket still blocks (with the timeout above): MicroPython's
                # TLS socket then verifies the chain, the validity dates and the host name (mbedTLS).
                try:
                    sock = tls.wrap_socket(sock, server_hostname=server_hostname or host)
                except (OSError, ValueError) as exc:
                    raise OSError("tls: %s" % (_tls_reason(exc),))
            # Non-blocking from here on, driven by poll: a blocking readinto() on a MicroPython stream waits
            # until the whole buffer is full, which an MQTT peer never does.
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self._tls = tls is not None
        self._more = False  # TLS: the last read filled the buffer, so mbedTLS may hold the rest of the record
        self._poller = select.poll()
        # Poll the TCP socket, also under TLS: polling MicroPython's TLS object goes through its generic
        # stream-poll path, which sleeps in 1 ms steps (measured: 1.1 ms per stop-and-wait round trip instead
        # of 0.05 ms). mbedTLS reads a record's exact length from the socket, so the one thing the socket cannot
        # show is the unread rest of a record that filled our buffer: `_more` covers it.
        self._poller.register(raw, select.POLLIN)
        self.selectable = raw  # (the TCP socket under TLS too, for the same reason; `_more` is read by wait(0))

    def send(self, buf, start, end):
        # write(), not send(): TLS sockets have only the stream methods. On a non-blocking stream it returns
        # None, or raises EAGAIN, when nothing can be written now (TLS: also while a record is half sent). Its
        # MicroPython form write(buf, offset, length) sends from the middle of the buffer without a slice (a
        # heap object per packet); the ESP32 stubs list only buf.
        try:
            n = self._sock.write(buf, start, end - start)  # type: ignore[call-arg]
        except OSError as exc:
            if exc.args[0] == _EAGAIN:
                return 0
            raise
        return n or 0

    def readinto(self, buf):
        try:
            n = self._sock.readinto(buf)
        except OSError as exc:
            if exc.args[0] == _EAGAIN:
                self._more = False
                return None
            raise
        self._more = self._tls and n == len(buf)
        return n

    def wait(self, timeout_ms, writable=False):
        if self._more and not writable:
            return True
        self._poller.modify(self.selectable, select.POLLOUT if writable else select.POLLIN)
        # ipoll, not poll: it yields one tuple it reuses, where poll() builds a list of new tuples every call.
        for _ in self._poller.ipoll(timeout_ms):
            return True
        return False

    def close(self):
        self._sock.close()


def _tls_reason(exc):
    """mbedTLS's own words for a refused handshake (certificate, host name, validity), else the error."""
    text = str(exc).strip()
    return text if text else "handshake failed (%r)" % (exc,)
