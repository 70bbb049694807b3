# The serial link endpoint, sans-I/O: reliable, ordered byte streams over a lossy line, one per channel,
# sharing one sequence space. The same class runs on the board and in the host bridge; the caller moves bytes
# (feed() what the UART gave, write what poll() returns) and tells the time in milliseconds.
#
# - Go-back-N: up to `window` DATA frames in flight, acknowledged cumulatively (every frame carries `ack`, the
#   next sequence number its sender expects); a frame out of order or with a bad CRC is dropped, and the oldest
#   unacknowledged frame's timer sends the whole window again. The timeout is derived from the baud rate:
#   the time to send a window of full frames both ways, twice, plus a margin for the host's scheduling.
# - The receiver passes a frame's payload on only in order and only when its channel's buffer has room (a full
#   buffer drops the frame: the sender retransmits, which is the flow control). Nothing corrupted, duplicated or
#   out of order ever reaches a stream: MQTT, which may not resend on a live connection, sees a perfect pipe.
# - Frame size adapts to the line (additive increase, multiplicative decrease): every timeout halves the payload
#   of new frames, down to min_payload; every acknowledged frame adds _GROW_BYTES, up to frame.MAX_PAYLOAD. On a
#   clean line frames stay full; at a bit error rate of 1e-3 a full frame (2,000 bits) arrives whole one time in
#   eight and a window of four almost never, while 32-byte frames arrive whole seven times in ten.
# - Link reset: each side picks an epoch at start and sends RESET until the other answers RESET_ACK naming it.
#   A RESET with a new epoch means the peer restarted: the streams start over and `peer_resets` counts it, so
#   the bridge can close that board's TCP connection.

import struct

from dlink import frame

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


RESETTING = const(0)
UP = const(1)

_CHANNELS = const(3)
_RESET_EVERY_MS = const(250)
_MARGIN_MS = const(60)
_GROW_BYTES = const(8)
_MIN_RTO_MARGIN_MS = const(20)
MIN_PAYLOAD = const(32)


def full_frame_ms(baud):
    return (frame.MAX_PAYLOAD + 14) * 10 * 1000 // baud  # 8N1: ten bit times per byte


def timeout_for(baud, window):
    """The longest retransmission timeout: a window of full frames out and their acks back, twice, plus a
    margin. The link starts there and comes down to what it measures (see _on_ack)."""
    return 2 * (window + 1) * full_frame_ms(baud) + _MARGIN_MS


class Link:
    def __init__(
        self,
        epoch: int,
        baud: int = 115200,
        window: int = 4,
        rx_size: int = 512,
        control_size: int = 128,
        min_payload: int = MIN_PAYLOAD,
    ) -> None:
        if not 0 < epoch < 0x10000:
            raise ValueError("epoch must be 1..65535")
        if not 0 < min_payload <= frame.MAX_PAYLOAD:
            raise ValueError("min_payload must be 1..%d" % frame.MAX_PAYLOAD)
        self.epoch = epoch
        self.window = window
        self.max_timeout_ms = timeout_for(baud, window)
        self.min_timeout_ms = 2 * full_frame_ms(baud) + _MIN_RTO_MARGIN_MS
        self.timeout_ms = self.max_timeout_ms
        self._srtt8 = 0  # smoothed round trip x 8, 0 before the first sample (RFC 6298's SRTT, in ms)
        self._rttvar4 = 0  # its mean deviation x 4
        self.min_payload = min_payload  # frame.MAX_PAYLOAD: fixed-size frames
        self.payload = frame.MAX_PAYLOAD  # payload of the next new DATA frame
        self.state = RESETTING
        self.peer_epoch = 0
        self._peer_knows_us = False
        self.decoder = frame.Decoder()
        self._out = bytearray(frame.WIRE_MAX)
        self._out_mv = memoryview(self._out)
        self._scratch = bytearray(2)
        self._reply_reset = False
        # Transmit window: one slot per sequence number in flight.
        self._tx = bytearray(window * frame.MAX_PAYLOAD)
        self._tx_mv = memoryview(self._tx)
        self._tx_len = bytearray(window)
        self._tx_ch = bytearray(window)
        self._tx_at = [-1] * window  # when each slot's frame was first sent; -1 not yet
        self._tx_resent = bytearray(window)  # sent more than once: its ack says nothing about the round trip
        # Receive buffers: one ring per channel.
        # Control messages are short lines; console text from the peer is only for a log, so its ring is small.
        self._rx = [bytearray(control_size), bytearray(rx_size), bytearray(control_size)]
        self._rx_head = [0] * _CHANNELS
        self._rx_len = [0] * _CHANNELS
        self.lines: list[str] = []  # console text received outside frames (host side), oldest first
        self.noise: list[int] = []  # lengths of what was neither frames nor console text (damaged frames), oldest first
        # counters
        self.retransmissions = 0
        self.peer_resets = 0
        self.frames_out = 0
        self.bytes_out = [0] * _CHANNELS
        self.bytes_in = [0] * _CHANNELS
        self._start_stream(0)

    def _start_stream(self, now):
        self._base = 0  # oldest unacknowledged sequence number
        self._next = 0  # next sequence number to assign
        self._sent = 0  # next sequence number to transmit
        self._expect = 0  # next sequence number we accept
        self._acks_due = 0
        self._timer = -1
        self._reset_at = now
        for ch in range(_CHANNELS):
            self._rx_len[ch] = 0
            self._rx_head[ch] = 0

    # -- application side ----------------------------------------------------------------------------------

    @property
    def up(self) -> bool:
        return self.state == UP

    def send(self, channel: int, data: bytes | bytearray | memoryview) -> int:
        """Queue bytes on a channel; returns how many were taken (0 when the window is full or the link is
        not up: call again after poll())."""
        if self.state != UP:
            return 0
        taken = 0
        n = len(data)
        while taken < n and (self._next - self._base) & 0xFF < self.window:
            slot = self._next % self.window
            size = min(self.payload, n - taken)
            start = slot * frame.MAX_PAYLOAD
            self._tx[start : start + size] = data[taken : taken + size]
            self._tx_len[slot] = size
            self._tx_ch[slot] = channel
            self._tx_at[slot] = -1
            self._tx_resent[slot] = 0
            self._next = (self._next + 1) & 0xFF
            taken += size
        self.bytes_out[channel] += taken
        return taken

    def can_send(self) -> bool:
        return self.state == UP and (self._next - self._base) & 0xFF < self.window

    def pending(self) -> int:
        """Frames queued or in flight, not yet acknowledged."""
        return (self._next - self._base) & 0xFF

    def available(self, channel: int) -> int:
        return self._rx_len[channel]

    def readinto(self, channel: int, buf: bytearray | memoryview) -> int:
        """Take received bytes of a channel; returns how many (0: none waiting)."""
        ring = self._rx[channel]
        size = len(ring)
        n = min(len(buf), self._rx_len[channel])
        head = self._rx_head[channel]
        for i in range(n):
            buf[i] = ring[(head + i) % size]
        self._rx_head[channel] = (head + n) % size
        self._rx_len[channel] -= n
        return n

    # -- line side -----------------------------------------------------------------------------------------

    def feed(self, data: bytes | bytearray | memoryview, now: int) -> None:
        """Process bytes received from the line."""
        dec = self.decoder
        pos = 0
        while pos < len(data):
            pos += dec.feed(data, pos)
            if dec.ready == frame.Decoder.FRAME:
                self._on_frame(dec, now)
            elif dec.ready == frame.Decoder.LINE:
                self.lines.append(dec.line)
            elif dec.ready == frame.Decoder.NOISE:
                self.noise.append(dec.noise_len)

    def _on_frame(self, dec, now):
        ftype = dec.ftype
        if ftype == frame.RESET:
            if dec.epoch != self.peer_epoch:
                self._peer_restarted(dec.epoch, now)
            self._reply_reset = True
            return
        if ftype == frame.RESET_ACK:
            if dec.payload_len == 2 and ((dec.raw[6] << 8) | dec.raw[7]) == self.epoch:
                if dec.epoch != self.peer_epoch:
                    self._peer_restarted(dec.epoch, now)
                self._peer_knows_us = True
                self.state = UP
            return
        if dec.epoch != self.peer_epoch or self.state != UP:
            return  # a frame of a previous life of the peer, or before the handshake: not ours
        self._on_ack(dec.ack, now)
        if ftype != frame.DATA:
            return
        # Up to two acks for a burst of frames, so one lost ack does not leave the sender waiting for a timeout.
        self._acks_due = min(2, self._acks_due + 1)
        if dec.seq != self._expect:
            return  # out of order or a duplicate: dropped, our ack tells the peer where we are
        ch = dec.channel
        n = dec.payload_len
        ring = self._rx[ch]
        size = len(ring)
        if size - self._rx_len[ch] < n:
            return  # no room: dropped, the peer sends it again (flow control)
        tail = (self._rx_head[ch] + self._rx_len[ch]) % size
        raw = dec.raw
        for i in range(n):
            ring[(tail + i) % size] = raw[6 + i]
        self._rx_len[ch] += n
        self.bytes_in[ch] += n
        self._expect = (self._expect + 1) & 0xFF

    def _peer_restarted(self, epoch, now):
        if self.peer_epoch:
            self.peer_resets += 1
        self.peer_epoch = epoch
        self._start_stream(now)
        if self._peer_knows_us:
            self.state = UP

    def _on_ack(self, ack, now):
        outstanding = (self._next - self._base) & 0xFF
        acked = (ack - self._base) & 0xFF
        if 0 < acked <= outstanding and acked <= (self._sent - self._base) & 0xFF:
            newest = (ack - 1) % self.window
            if not self._tx_resent[newest] and self._tx_at[newest] >= 0:
                self._measured(_elapsed(now, self._tx_at[newest]))
            self._base = ack
            self._timer = now if self._base != self._sent else -1
            self.payload = min(frame.MAX_PAYLOAD, self.payload + _GROW_BYTES * acked)

    def _measured(self, rtt):
        """A round trip of a frame sent once (Karn): the timeout follows RFC 6298, SRTT + 4 RTTVAR, within
        [two full frames + a margin, timeout_for()]. Integer arithmetic, scaled as in RFC 6298's appendix."""
        if self._srtt8 == 0:
            self._srtt8 = max(1, rtt) * 8
            self._rttvar4 = rtt * 2
        else:
            err = rtt - self._srtt8 // 8
            self._srtt8 += err
            self._rttvar4 += abs(err) - self._rttvar4 // 4
        rto = self._srtt8 // 8 + self._rttvar4
        self.timeout_ms = min(self.max_timeout_ms, max(self.min_timeout_ms, rto))

    def poll(self, now: int) -> memoryview | None:
        """The next bytes to write to the line (a memoryview valid until the next call), or None."""
        if self._reply_reset:
            self._reply_reset = False
            struct.pack_into(">H", self._scratch, 0, self.peer_epoch)
            return self._frame(frame.RESET_ACK, 0, 0, self._scratch)
        if not self._peer_knows_us:
            if _elapsed(now, self._reset_at) >= 0:
                self._reset_at = now + _RESET_EVERY_MS
                return self._frame(frame.RESET, 0, 0, b"")
            return None
        if self.state != UP:
            return None
        if self._timer >= 0 and _elapsed(now, self._timer) >= self.timeout_ms:
            # Go back N: everything unacknowledged is sent again (as it was: its sequence numbers are taken);
            # frames queued from now on are smaller.
            self.retransmissions += (self._sent - self._base) & 0xFF
            seq = self._base
            while seq != self._sent:
                self._tx_resent[seq % self.window] = 1
                seq = (seq + 1) & 0xFF
            self._sent = self._base
            self._timer = -1
            self.payload = max(self.min_payload, self.payload // 2)
            self.timeout_ms = min(self.max_timeout_ms, self.timeout_ms * 2)  # back off until a clean sample
        if self._sent != self._next:
            seq = self._sent
            slot = seq % self.window
            start = slot * frame.MAX_PAYLOAD
            if self._timer < 0:
                self._timer = now
            if self._tx_at[slot] < 0:
                self._tx_at[slot] = now
            self._sent = (seq + 1) & 0xFF
            self._acks_due = 0  # the frame carries our ack
            return self._frame(frame.DATA, self._tx_ch[slot], seq, self._tx_mv[start : start + self._tx_len[slot]])
        if self._acks_due:
            self._acks_due -= 1
            return self._frame(frame.ACK, 0, 0, b"")
        return None

    def _frame(self, ftype, channel, seq, payload):
        n = frame.encode(self._out, ftype, channel, seq, self._expect, self.epoch, payload)
        self.frames_out += 1
        return self._out_mv[:n]

    def next_wakeup(self, now: int) -> int:
        """Milliseconds until poll() may have something to send without new input (a timer), or -1."""
        if not self._peer_knows_us:
            return max(0, _elapsed(self._reset_at, now))
        if self._timer >= 0:
            return max(0, self.timeout_ms - _elapsed(now, self._timer))
        return -1


def _elapsed(now, then):
    # Millisecond clocks wrap (time.ticks_ms on the board); differences are taken modulo 2**30 and signed.
    return ((now - then + 0x20000000) & 0x3FFFFFFF) - 0x20000000
