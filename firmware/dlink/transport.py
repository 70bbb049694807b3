# The board's end of the serial link as an MQTT transport: the same interface as dmqtt.transport.TCPTransport
# (send, readinto, wait, close), so the client code is identical over WiFi and over a UART.
#
# One link lives for the whole boot (its epoch tells the host bridge when the board restarted); each
# LinkTransport is one upstream TCP connection, opened by the bridge on request over the control channel
# (dlink/control.py: O to open, C to close; the bridge answers K or E, and says C when the broker closed).

import time

from dlink import control, frame
from dlink.link import Link

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


if False:  # type checkers only: MicroPython has no typing module
    from typing import Any

_link: Any = None  # one per boot, shared by successive connections
_uart: Any = None
_poller: Any = None  # wakes wait() when the UART has bytes
_rx: Any = None  # what the UART gave, one buffer per boot
_DRAIN_MS = const(2000)


def _epoch():
    """A fresh link epoch for this boot: random, never 0."""
    import os

    raw = os.urandom(2)
    return ((raw[0] << 8) | raw[1]) or 1


class LinkTransport:
    @staticmethod
    def prepare(uart_id=1, baud=115200, **uart_pins):
        """Open the UART and create the boot's link (once); early, so its buffers find room in the heap."""
        global _link, _uart, _poller, _rx
        if _link is None:
            import select

            import machine

            _uart = machine.UART(uart_id, baudrate=baud, **uart_pins)
            _link = Link(_epoch(), baud)
            _rx = bytearray(256)
            _poller = select.poll()
            try:
                # The virtual board's UART is a pty: the Unix port polls its descriptor (it cannot poll a
                # Python-level stream object).
                _poller.register(_uart.fileno(), select.POLLIN)
            except AttributeError:
                _poller.register(_uart, select.POLLIN)  # machine.UART is a pollable stream on the ESP32 ports
        return _link

    @staticmethod
    def stats():
        """The boot's link counters, for the board's summary (retransmissions on a clean line are a fault)."""
        link = _link
        if link is None:
            return {}
        return {
            "retransmissions": link.retransmissions,
            "timeouts": link.timeouts,
            "probes": link.probes,
            "crc_errors": link.decoder.crc_errors,
            "frames_out": link.frames_out,
            "bridge_restarts": link.peer_resets,
        }

    @staticmethod
    def hush(start):
        """Around a long flash operation (start True before, False after; a RingJournal calls it around each
        sector erase, as its `hush`): an ESP32 runs with its flash cache off, so the UART's interrupt waits and
        bytes beyond its 128-byte receive FIFO are lost. Before, the bridge is asked to pause and its last frame
        awaited (a retransmission timeout at most: an older bridge does not answer); after, it is told to
        resume. docs/link-protocol.md."""
        link = _link
        if link is None or not link.up:
            return
        if not start:
            link.unhush(time.ticks_ms())
            pump()
            return
        begun = time.ticks_ms()
        link.hush()
        pump()
        while not link.quiet and time.ticks_diff(time.ticks_ms(), begun) < link.timer.max_ms:
            _poller.poll(1)
            pump()

    def __init__(self, host="", port=0, uart_id=1, baud=115200, timeout_ms=10000, **uart_pins):
        LinkTransport.prepare(uart_id, baud, **uart_pins)
        self._link = _link
        self._byte = bytearray(1)
        self._lines = control.Lines()
        self._resets = _link.peer_resets
        self._closed = False
        self._reason = ""
        self._reply = None
        start = time.ticks_ms()
        while not _link.up:
            self._service()
            if time.ticks_diff(time.ticks_ms(), start) > timeout_ms:
                raise OSError("serial link: no answer from the host bridge")
            time.sleep_ms(2)
        self._resets = _link.peer_resets
        dest = ("%s:%d" % (host, port)) if host else ""
        self._control(control.OPEN, dest)
        kind, reason = self._await_control(timeout_ms)
        # Everything the bridge sent before its answer belongs to an earlier connection (the link keeps order
        # across channels, and the broker cannot speak before our CONNECT): drop it.
        while self._link.readinto(frame.MQTT, _rx):
            pass
        if kind != control.OPENED:
            raise OSError("serial link: the bridge refused %s (%s)" % (dest or "the default broker", reason))

    # -- transport interface ---------------------------------------------------------------------------------

    def send(self, buf, start, end):
        self._service()
        if self._closed:
            raise OSError("serial link: connection closed (%s)" % self._reason)
        n = self._link.send(frame.MQTT, memoryview(buf)[start:end])
        self._service()  # put it on the line now: one MQTT packet, as few frames as possible
        return n

    def readinto(self, buf):
        self._service()
        n = self._link.readinto(frame.MQTT, buf)
        if n:
            return n
        return 0 if self._closed else None

    def wait(self, timeout_ms, writable=False):
        start = time.ticks_ms()
        while True:
            self._service()
            if self._closed:
                return True  # readinto() will report it
            if self._link.can_send() if writable else self._link.available(frame.MQTT):
                return True
            left = timeout_ms - time.ticks_diff(time.ticks_ms(), start)
            if left <= 0:
                return False
            self._nap(left)

    def close(self):
        if not self._closed:
            self._closed = True
            if self._link.up:
                self._control(control.CLOSE)
                # Let the close, and what precedes it (a last QoS 0 message, a DISCONNECT), reach the bridge: up
                # to two seconds, which a noisy line (bit error rate 1e-3) can need for a few frames.
                start = time.ticks_ms()
                while self._link.pending() and time.ticks_diff(time.ticks_ms(), start) < _DRAIN_MS:
                    self._service()
                    self._nap(_DRAIN_MS)

    # -- internals -----------------------------------------------------------------------------------------

    def _nap(self, limit_ms):
        """Sleep up to limit_ms, until the UART has bytes or the link has something to write (a timer, the line
        freeing up): a board that waits for its broker spends no CPU on it."""
        wake = self._link.next_wakeup(time.ticks_ms())
        _poller.poll(max(1, limit_ms if wake < 0 else min(limit_ms, wake)))

    def _service(self):
        """Move bytes between the UART and the link; notice a restarted bridge and control messages."""
        pump()
        if self._link.peer_resets != self._resets and not self._closed:
            self._closed = True
            self._reason = "the host bridge restarted"
        self._read_control()

    def _read_control(self):
        while self._link.readinto(frame.CONTROL, self._byte):
            line = self._lines.push(self._byte[0])
            if line is None:
                continue
            try:
                kind, text = control.decode(line)
            except control.ControlError as exc:
                kind, text = control.REFUSED, str(exc)  # a bridge we cannot understand: no connection
            if kind == control.CLOSE:
                self._closed = True
                self._reason = text or "closed by the broker"
            else:
                self._reply = (kind, text)

    def _await_control(self, timeout_ms):
        self._reply = None
        start = time.ticks_ms()
        while self._reply is None:
            self._service()
            if self._closed:
                return control.CLOSE, self._reason
            if time.ticks_diff(time.ticks_ms(), start) > timeout_ms:
                raise OSError("serial link: the bridge did not answer the open request")
            time.sleep_ms(1)
        return self._reply

    def _control(self, kind, text=""):
        data = control.encode(kind, text)
        start = time.ticks_ms()
        sent = 0
        while sent < len(data):
            sent += self._link.send(frame.CONTROL, data[sent:])
            self._service()
            if time.ticks_diff(time.ticks_ms(), start) > 5000:
                raise OSError("serial link: control message not taken")
            if sent < len(data):
                time.sleep_ms(1)


def pump():
    """Move bytes between the UART and the link (a gateway's loop calls it; a LinkTransport does itself)."""
    link = _link
    now = time.ticks_ms()
    n = _uart.readinto(_rx)
    if n:
        link.feed(memoryview(_rx)[:n], now)
    chunk = link.poll(now)
    while chunk is not None:
        _uart.write(chunk)
        chunk = link.poll(now)
