# A blocking MQTT client over any byte stream with send/recv (a TCP socket on a WiFi board).
#
# This is the foundation's client: CONNECT/CONNACK, PUBLISH at QoS 0, 1 and 2 with each flow completed before
# publish() returns, DISCONNECT. It keeps no state across a reboot yet; the windowed session with the flash
# journal replaces the flow handling here (issue 3).

import select

if False:  # type checkers only: MicroPython has no typing module
    from typing import Any

from dmqtt import codec

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[no-redef,misc]
        return x


_BUF_SIZE = const(1024)
_EAGAIN = const(11)


class MQTTError(Exception):
    """The broker refused us or broke the protocol; the caller drops the connection."""


class Client:
    def __init__(self, client_id, version=codec.V311, keepalive=60, timeout_ms=10000):
        self.client_id = client_id
        self.version = version
        self.keepalive = keepalive
        self._out = bytearray(_BUF_SIZE)  # every packet is encoded here: nothing allocated per packet
        self._in = bytearray(256)
        self._decoder = codec.StreamDecoder(version, _BUF_SIZE, _BUF_SIZE)
        self._sock = None  # type: Any  # the stream given to connect()
        self._poller = select.poll()
        self._timeout_ms = timeout_ms
        self._next_pid = 0

    def connect(self, sock, clean=True):
        """Send CONNECT on a connected stream and wait for CONNACK; returns the session-present flag."""
        # Non-blocking, driven by poll: a blocking readinto() on a MicroPython stream waits until the whole
        # buffer is full, which an MQTT peer never does.
        sock.setblocking(False)
        self._sock = sock
        self._poller.register(sock, select.POLLIN)
        props = {codec.SESSION_EXPIRY_INTERVAL: 0} if self.version == codec.V5 else None
        n = codec.encode_connect(
            self.client_id, self.version, self.keepalive, clean, props=props, into=self._out
        )
        self._send(n)
        ptype, body = self._expect(codec.CONNACK)
        present, code, _props = codec.decode_connack(body, self.version)
        if code:
            raise MQTTError("CONNACK refused the connection: code 0x%02x" % code)
        return present

    def publish(self, topic, payload, qos=0, retain=False):
        """Publish and, at QoS 1 and 2, complete the flow before returning. Returns the packet id (0 at QoS 0)."""
        pid = self._allocate_pid() if qos else 0
        n = codec.encode_publish(topic, payload, qos, pid, retain, False, self.version, into=self._out)
        self._send(n)
        if qos == 1:
            self._expect_ack(codec.PUBACK, pid)
        elif qos == 2:
            if self._expect_ack(codec.PUBREC, pid) < 0x80:
                # PUBREC >= 0x80 ends the flow with no PUBREL (MQTT 5.0 section 4.3.3).
                self._send(codec.encode_ack(codec.PUBREL, pid, version=self.version, into=self._out))
                self._expect_ack(codec.PUBCOMP, pid)
        return pid

    def disconnect(self):
        self._send(codec.encode_disconnect(version=self.version, into=self._out))
        self._sock.close()
        self._sock = None

    def _allocate_pid(self):
        # Never 0, wrapping 65535 -> 1 [MQTT-2.3.1-1].
        self._next_pid = self._next_pid % 0xFFFF + 1
        return self._next_pid

    def _expect_ack(self, ptype, pid):
        _ptype, body = self._expect(ptype)
        got = codec.check_ack(ptype, body, self.version)
        reason = codec.ack_reason(body)
        if got != pid:
            raise MQTTError("%s for packet id %d while waiting for %d" % (codec.NAMES[ptype], got, pid))
        if reason >= 0x80:
            raise MQTTError("%s refused packet id %d: reason 0x%02x" % (codec.NAMES[ptype], pid, reason))
        return reason

    def _send(self, n):
        view = memoryview(self._out)[:n]
        while view:
            try:
                sent = self._sock.send(view)
            except OSError as exc:
                if exc.args[0] != _EAGAIN:
                    raise
                sent = 0
            if not sent:
                self._wait(select.POLLOUT)
            view = view[sent:]

    def _wait(self, events):
        self._poller.modify(self._sock, events)
        if not self._poller.poll(self._timeout_ms):
            raise MQTTError("no answer from the broker within %d ms" % self._timeout_ms)

    def _expect(self, ptype):
        dec = self._decoder
        while True:
            self._wait(select.POLLIN)
            got = self._sock.readinto(self._in)
            if got is None:  # woken without data
                continue
            if not got:
                raise MQTTError("the broker closed the connection")
            pos = 0
            while pos < got:
                pos += dec.feed(memoryview(self._in)[:got], pos)
                if dec.ready and dec.ptype == ptype:
                    if pos < got:
                        raise MQTTError("unexpected bytes after %s" % codec.NAMES[ptype])
                    return dec.ptype, dec.body
                if dec.ready:
                    raise MQTTError("unexpected %s" % codec.NAMES[dec.ptype])
