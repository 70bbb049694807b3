# The serial link endpoint, sans-I/O: reliable, ordered byte streams over a lossy line, one per channel,
# sharing one sequence space. The same code runs on the board and in the host bridge; the caller moves bytes
# (feed() what the UART gave, write what poll() returns) and tells the time in milliseconds. Link is the endpoint
# (handshake, pause, pacing, frames on the line) over three parts with their own state: TransmitWindow (frames in
# flight, the send ring, frame sizes), ReceiveReorder (held frames, the channels' receive rings, the selective
# ack) and RetransmitTimer (the round trip estimate and the timeout).
#
# - Selective repeat: up to `window` DATA frames in flight, and no more payload bytes than the send buffer holds
#   (_BUFFER: eight full frames). Every frame carries `ack`, the next sequence number its sender expects
#   (cumulative); the receiver keeps frames that arrive after a gap (up to `window` ahead) and says which in an
#   ACK frame's payload, the selective ack (bit i: frame ack + i is held; one or two bytes). Frames shrink on a
#   noisy line (below), so a count of frames alone would leave a fast line idle: at 921600 baud eight 46-byte
#   frames are gone in 4 ms, less than a round trip through a host. A serial line never
#   reorders, so a frame that was sent before one the peer confirms, and is not itself confirmed, was lost: it
#   is sent again at once, alone (no timeout, no window resent). A lost last frame or lost acks: on a line that
#   has lately damaged frames, the oldest frame in flight is probed when its ack is overdue (RACK-TLP's tail loss
#   probe; up to three times, each wait twice the last), and a timer catches the rest,
#   resending that one frame; the timeout follows the measured round trip (RFC 6298), between two full frames
#   and ten, plus margins, on a line that has lately damaged frames; on a clean one it stays at its ceiling (a
#   late ack there is a slow peer or host, and a retransmission would be spurious).
# - The receiver passes payloads on only in order, and holds a frame its channel's buffer has no room for (it
#   is not acknowledged until the reader makes room, which holds the sender back: flow control without
#   retransmission). Nothing corrupted, duplicated or out of order ever reaches a stream: MQTT, which may not
#   resend on a live connection, sees a perfect pipe.
# - Pacing: the link knows the baud rate and counts what it has handed to the UART; it gives out a new frame only
#   when less than half a full frame is still waiting to leave. Bytes sent meanwhile join the newest frame not
#   yet written, so small MQTT packets share frames (three 74-byte PUBLISH packets in one frame of 222 payload
#   bytes, of frame.MAX_PAYLOAD's 240, instead of three frames each with its own header and CRC), and round-trip
#   samples do not include a UART queue.
# - Frame size adapts to the line (additive increase, multiplicative decrease): every lost frame halves the
#   payload of new frames, down to min_payload; every acknowledged frame adds _GROW_BYTES, up to
#   frame.MAX_PAYLOAD. On a clean line frames stay full; at a bit error rate of 1e-3 a full frame (2,000 bits)
#   arrives whole one time in eight, a 32-byte frame seven times in ten.
# - Link reset: each side picks an epoch at start and sends RESET until the other answers RESET_ACK naming it.
#   A RESET with a new epoch means the peer restarted: the streams start over and `peer_resets` counts it, so
#   the bridge can close that board's TCP connection.
# - Pause: a sector erase stalls an ESP32 for 45 ms with its flash cache off, and its UART's interrupt with it:
#   what arrives beyond the 128-byte receive FIFO is lost. Before one the board calls hush(): the link writes a
#   PAUSE frame and then nothing; the peer answers QUIET, its last frame, and writes nothing (no data, no ack, no
#   retransmission) until the board's next frame (RESUME, from unhush(), or any other) or _PAUSE_MAX_MS. The
#   board waits for QUIET (`quiet`) before erasing. Signals of the link itself, outside the channels, so that a
#   stream waiting for its reader cannot hold them back.

import struct
from array import array

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
# The timeout at least, on a line that has damaged nothing lately: RFC 6298's floor (its 2.4), for its reason. A
# late ack there is not a loss but a peer, or a host, that did not run for a moment, and a loaded host can starve
# one past a 115200-baud line's 280 ms ceiling (BENCHMARKS figure 6). The price: a clean line's first lost frame,
# when no later frame shows the gap, is found after a second instead of the ceiling.
_CLEAN_TIMEOUT_MS = const(1000)
MIN_PAYLOAD = const(32)
_START_PAYLOAD = const(64)  # a clean line grows it to the maximum in 22 frames; a noisy one starts nearer its size
# Frames in flight at most (two bytes of selective ack). On a noisy line at 921600 baud with a host's round trip
# (tools/bench_link.py's second table) 16 beats 8 at bit error rates of 1e-3 and 1e-4; 24 does better at 1e-4 but
# worse at 1e-3, where a lost frame's repeats stall a larger window for longer.
WINDOW = const(16)
# Sequence numbers map to slots, seq % _SLOTS (a divisor of the 256 numbers, so the map holds across the wrap).
_SLOTS = const(16)
_SLOT = const(_SLOTS - 1)
# Payload bytes in flight at most, and bytes held past a gap: eight full frames (22 ms at 921600 baud, 176 ms at
# 115200), in one buffer each way whichever the frames' sizes: the heap of a window of eight full frames, which
# small frames now share (twelve full frames measured no better end to end, for 1.9 KB more of a board's heap).
_BUFFER = const(1920)
_FRAME_BITS = const(2540)  # a full frame on the wire, 254 bytes of ten bit times (8N1)
# A pause ends by itself after this long (its RESUME lost, and the board quiet after it): the W25Q32JV's longest
# sector erase is 400 ms.
_PAUSE_MAX_MS = const(500)
_PROBES = const(3)  # tail loss probes of one frame before the timeout has its turn
_DAMAGE_RECENT_MS = const(5000)  # a line that damaged a frame this recently may lose one: tail loss probes on

# Transmit slot states
_QUEUED = const(0)  # to be written (new, or found lost)
_FLIGHT = const(1)  # written, not confirmed
_HELD = const(2)  # the peer holds it (selective ack), not yet in order

# Why a frame was written again (TransmitWindow.resent; 0: written once)
_LOST = const(1)  # found lost: a gap in the peer's ack, or a timeout on a damaging line
_LATE = const(2)  # its ack overdue on a line that has damaged nothing lately: maybe only late (a loaded host)
_ASKED = const(3)  # the peer held it: written again to ask for the peer's window (counted in probes)
_NOT_OURS = const(-2)  # an ack that cannot answer this side's frames (TransmitWindow.confirm)


def full_frame_ms(baud):
    return _FRAME_BITS * 1000 // baud


def timeout_for(baud):
    """The longest retransmission timeout: four full frames out and their acks back, twice, plus a margin
    (pacing keeps at most one frame queued ahead of a frame, and the peer's ack waits behind at most one of
    its own). The link starts there and comes down to what it measures (RetransmitTimer)."""
    return 2 * 5 * full_frame_ms(baud) + _MARGIN_MS


class RetransmitTimer:
    """When the oldest unconfirmed frame is written again. The timeout starts at its ceiling (timeout_for) and
    follows the round trip of frames written once (RFC 6298, Karn's rule) within [two full frames and a margin,
    the ceiling], on a line that has lately damaged frames (or lost ours): there a loss is likely and its quick
    recovery is the rate. On a line that has damaged nothing for _DAMAGE_RECENT_MS a late ack is a peer or host
    slow for a moment, so the timeout is clean_ms and the tail loss probe stays off: a retransmission there would
    be spurious, and a clean line's first loss is found later, once. The timeout doubles at each expiry until the
    peer answers."""

    def __init__(self, baud: int) -> None:
        self.frame_ms = full_frame_ms(baud)
        self.max_ms = timeout_for(baud)
        self.min_ms = 2 * self.frame_ms + _MIN_RTO_MARGIN_MS
        self.clean_ms = max(self.max_ms, _CLEAN_TIMEOUT_MS)
        self.ms = self.max_ms  # the timeout on a damaging line: the estimate, or backed off
        self.srtt8 = 0  # smoothed round trip x 8, 0 before the first sample (RFC 6298's SRTT, in ms)
        self.rttvar4 = 0  # its mean deviation x 4
        self.started = -1  # when it was started (ms); -1 stopped
        # When the line last damaged a frame (a CRC error, bytes neither frame nor text, a frame of ours lost), -1
        # never.
        self.damage_at = -1

    def measured(self, rtt):
        """A round trip of a frame written once. Integer arithmetic, scaled as in RFC 6298's appendix."""
        if self.srtt8 == 0:
            self.srtt8 = max(1, rtt) * 8
            self.rttvar4 = rtt * 2
        else:
            err = rtt - self.srtt8 // 8
            self.srtt8 += err
            self.rttvar4 += abs(err) - self.rttvar4 // 4
        self.estimate()

    def estimate(self):
        """The timeout from the estimate: also when the peer answers a frame written again (no more backing off,
        a serial line's round trip is bounded)."""
        rto = self.srtt8 // 8 + self.rttvar4 if self.srtt8 else self.max_ms
        self.ms = min(self.max_ms, max(self.min_ms, rto))

    def damaging(self, now):
        """The line has damaged a frame (or lost one of ours) in the last _DAMAGE_RECENT_MS: it may lose the next."""
        return self.damage_at >= 0 and _elapsed(now, self.damage_at) <= _DAMAGE_RECENT_MS

    def in_force(self, now):
        return self.ms if self.damaging(now) else self.clean_ms

    def expired(self, now):
        return self.started >= 0 and _elapsed(now, self.started) >= self.in_force(now)

    def probe_after(self, resent, probed, now):
        """ms after its last write that the oldest frame in flight is probed (RACK-TLP's tail loss probe), or -1 (not
        now): after one round trip if it was written again before (on a bad line a retransmission is lost as often
        as the original), after two round trips and a full frame (the peer may be writing one) otherwise; up to
        _PROBES times, each after twice the wait of the last (a lost probe tells this side nothing). Only on a
        damaging line."""
        if not self.srtt8 or not self.damaging(now) or probed >= _PROBES:
            return -1
        if resent:
            return (self.srtt8 // 8) << probed
        return (self.srtt8 // 4 + self.frame_ms) << probed


class TransmitWindow:
    """The frames this side has written or will write: up to `window` DATA frames not yet confirmed, slot
    seq % _SLOTS, their payloads one after another in a ring of _BUFFER bytes (a frame whole, never split at the
    ring's end), freed as the peer confirms them. The newest frame stays open to more bytes of its channel until it
    is written, so small packets share frames. The payload of new frames adapts to the line: halved at every
    loss, down to min_payload; _GROW_BYTES more for every confirmed frame, up to frame.MAX_PAYLOAD."""

    def __init__(self, window: int, min_payload: int) -> None:
        self.window = window
        self.min_payload = min_payload  # frame.MAX_PAYLOAD: fixed-size frames
        self.payload = max(min_payload, _START_PAYLOAD)  # payload of the next new DATA frame
        self.ring = bytearray(_BUFFER)
        self.ring_mv = memoryview(self.ring)
        self.off = array("H", [0] * _SLOTS)  # where each slot's payload starts in the ring
        self.size = bytearray(_SLOTS)
        self.ch = bytearray(_SLOTS)
        self.state = bytearray(_SLOTS)
        self.first = [-1] * _SLOTS  # when each slot's frame was first written; -1 not yet
        self.order = [0] * _SLOTS  # `written` when it was last written: what was written before what
        self.last = [0] * _SLOTS  # when it was last written
        self.probed = bytearray(_SLOTS)  # tail loss probes of it since it was last found lost
        self.resent = bytearray(_SLOTS)  # why written again (_LOST, _LATE, _ASKED); its ack then times nothing
        self.written = 0
        self.base = 0  # oldest unconfirmed sequence number
        self.next = 0  # next sequence number to assign

    def take(self, channel, data, n):
        """Put up to n bytes of data in a frame; returns how many it took (0: no room in the window or the ring).
        Frames are cut as late as possible: a channel has at most one frame not yet written, which takes what
        fits while pacing holds it back, its size what the line allows then (it grows with the acks that come
        meanwhile, as far as the ring has room)."""
        if not self._newest_open(channel):
            slot = (self.next - 1) & _SLOT
            used = self.size[slot]
            taken = min(self._growth(slot), n)
            if taken <= 0:
                return 0
            start = self.off[slot] + used
            self.ring[start : start + taken] = data[:taken] if taken < n else data
            self.size[slot] = used + taken
            return taken
        if (self.next - self.base) & 0xFF >= self.window:
            return 0
        start = self._room(self.payload)
        if start < 0:
            return 0
        slot = self.next & _SLOT
        taken = min(self.payload, n)
        self.ring[start : start + taken] = data[:taken] if taken < n else data
        self.off[slot] = start
        self.size[slot] = taken
        self.ch[slot] = channel
        self.state[slot] = _QUEUED
        self.first[slot] = -1
        self.resent[slot] = 0
        self.next = (self.next + 1) & 0xFF
        return taken

    def can_take(self, channel):
        if not self._newest_open(channel):
            return self._growth((self.next - 1) & _SLOT) > 0
        return (self.next - self.base) & 0xFF < self.window and self._room(self.payload) >= 0

    def _room(self, size):
        """Where a new frame of up to `size` bytes starts in the ring, or -1 (full: the peer's acks free it). The
        frame before it is closed now, so the ring is in use from the oldest frame's start to the newest's end."""
        if self.next == self.base:
            return 0
        head = self.off[self.base & _SLOT]
        last = (self.next - 1) & _SLOT
        tail = self.off[last] + self.size[last]
        if head < tail:  # in use: [head, tail)
            if tail + size <= _BUFFER:
                return tail
            return 0 if size <= head else -1  # the end is left unused: a frame is never split
        return tail if tail + size <= head else -1  # in use: [head, end) and [0, tail)

    def _growth(self, slot):
        """Bytes the newest frame (not yet written) may still take: up to the payload size of the moment, and no
        further than the ring's end or, when the ring has wrapped, the oldest frame's start."""
        start = self.off[slot]
        head = self.off[self.base & _SLOT]
        end = head if head > start else _BUFFER
        return min(self.payload, end - start) - self.size[slot]

    def _newest_open(self, channel):
        """A new frame may be started on the channel: the newest frame is written, or another channel's."""
        if self.next == self.base:
            return True
        slot = (self.next - 1) & _SLOT
        return self.first[slot] >= 0 or self.ch[slot] != channel

    def first_in(self, state):
        """The sequence number of the oldest frame in that state (_QUEUED, _FLIGHT), or -1."""
        seq = self.base
        while seq != self.next:
            if self.state[seq & _SLOT] == state:
                return seq
            seq = (seq + 1) & 0xFF
        return -1

    def in_flight(self):
        """Some frame written and not yet passed on by the peer (in flight or held)."""
        seq = self.base
        while seq != self.next:
            if self.first[seq & _SLOT] >= 0:
                return True
            seq = (seq + 1) & 0xFF
        return False

    def written_now(self, slot, now):
        """The frame of `slot` goes on the line now; returns whether it went before (a retransmission, unless the
        peer held it and it only asks for the window)."""
        again = self.first[slot] >= 0 and self.resent[slot] != _ASKED
        if self.first[slot] < 0:
            self.first[slot] = now
        self.state[slot] = _FLIGHT
        self.written += 1
        self.order[slot] = self.written
        self.last[slot] = now
        return again

    def again(self, slot, why):
        """The frame of `slot` is to be written again (_LOST, _LATE, _ASKED)."""
        self.state[slot] = _QUEUED
        self.resent[slot] = why
        self.probed[slot] = 0

    def confirm(self, ack, held):
        """The peer passed on everything before `ack` and holds the frames of `held` (bit i: ack + i). Returns the
        slot of the latest-written frame this confirms for the first time whose confirmation answers its last copy
        (so that what was written before that copy and is not confirmed was lost), -1 when none does, _NOT_OURS
        when the ack cannot answer this side's frames. A frame written once or found lost answers so. One written
        again only because its ack was overdue on a clean line (or to ask for the window) does not: it is most
        likely confirmed by its first copy's late ack (RFC 5682's spurious timeout: a loaded host, here or at the
        peer), and then the frames written since that first copy are not lost; if they were, the next frames'
        selective ack, or the next timeout, says so."""
        outstanding = (self.next - self.base) & 0xFF
        acked = (ack - self.base) & 0xFF
        if acked > outstanding:
            return _NOT_OURS  # older than what we know (or garbage that passed the CRC): nothing to learn
        newest = -1
        sample = -1
        seq = self.base
        for _ in range(acked):
            slot = seq & _SLOT
            if self.state[slot] == _QUEUED and self.first[slot] < 0:
                return _NOT_OURS  # confirms a frame never written
            if self.state[slot] == _FLIGHT and self.order[slot] > newest and self.resent[slot] <= _LOST:
                newest = self.order[slot]
                sample = slot
            seq = (seq + 1) & 0xFF
        if acked:
            self.base = ack
            self.payload = min(frame.MAX_PAYLOAD, self.payload + _GROW_BYTES * acked)
        i = 0
        while held >> i:
            seq = (ack + i) & 0xFF
            slot = seq & _SLOT
            if held >> i & 1 and (seq - self.base) & 0xFF < (self.next - self.base) & 0xFF:
                if self.state[slot] == _FLIGHT:
                    self.state[slot] = _HELD
                    if self.order[slot] > newest and self.resent[slot] <= _LOST:
                        newest = self.order[slot]
                        sample = slot
            i += 1
        return sample

    def lose_before(self, order):
        """A serial line keeps order: every frame in flight written before `order` and not confirmed was lost, and
        a loss halves the payload of new frames. Returns how many."""
        lost = 0
        seq = self.base
        while seq != self.next:
            slot = seq & _SLOT
            if self.state[slot] == _FLIGHT and self.order[slot] < order:
                self.again(slot, _LOST)
                lost += 1
            seq = (seq + 1) & 0xFF
        if lost:
            self.payload = max(self.min_payload, self.payload // 2)
        return lost


class ReceiveReorder:
    """The peer's frames on their way to the channels' streams: passed on only in order, into one receive ring
    per channel. A frame that arrives after a gap (up to `window` ahead), or whose channel has no room, is held
    (slot seq % _SLOTS, its payload in a buffer of _BUFFER bytes filled upwards, packed down again when full) and
    named in the selective ack; a frame held for want of room is not acknowledged until the reader makes room,
    which holds the sender back: flow control without retransmission."""

    def __init__(self, window: int, rx_size: int, control_size: int) -> None:
        self.window = window
        self.held = bytearray(_BUFFER)
        self.held_off = array("H", [0] * _SLOTS)
        self.held_len = bytearray(_SLOTS)
        self.held_ch = bytearray(_SLOTS)
        self.has = bytearray(_SLOTS)
        self.top = 0  # the held buffer is in use below this
        self.count = 0
        self.expect = 0  # next sequence number to pass on
        # Control messages are short lines; console text from the peer is only for a log, so its ring is small.
        self.rings = [bytearray(control_size), bytearray(rx_size), bytearray(control_size)]
        self.head = [0] * _CHANNELS
        self.length = [0] * _CHANNELS
        self.bytes_in = [0] * _CHANNELS
        self._sack = bytearray(2)
        sack = memoryview(self._sack)
        self._sack_views = (sack[:1], sack)  # made once: a selective ack allocates nothing

    def restart(self):
        self.expect = 0
        self.top = 0
        self.count = 0
        for i in range(_SLOTS):
            self.has[i] = 0
        for ch in range(_CHANNELS):
            self.length[ch] = 0
            self.head[ch] = 0

    def take(self, seq, ch, raw, n):
        """A DATA frame's payload (raw[6:6 + n]): passed on, held, or dropped (a duplicate, beyond the window, or no
        room to hold it: the peer sends it again). Returns whether it came after a gap."""
        ahead = (seq - self.expect) & 0xFF
        if ahead >= self.window:
            return False  # a duplicate (or beyond the window): our ack tells the peer where we are
        slot = seq & _SLOT
        if self.has[slot]:
            return ahead > 0
        if not ahead and self._room(ch, n):
            self._to_ring(ch, raw, 6, n)
            self.expect = (self.expect + 1) & 0xFF
            if self.has[self.expect & _SLOT]:
                self.deliver()
            return False
        start = self._held_room(n)
        if start < 0:
            return ahead > 0  # no room (the peer's window is larger than ours): not held, so sent again later
        held = self.held
        for i in range(n):  # a byte loop: slicing would allocate on the board
            held[start + i] = raw[6 + i]
        self.held_off[slot] = start
        self.held_len[slot] = n
        self.held_ch[slot] = ch
        self.has[slot] = 1
        self.count += 1
        return ahead > 0

    def readinto(self, channel, buf):
        """Take received bytes of a channel; returns how many. The room they leave may let held frames through."""
        ring = self.rings[channel]
        size = len(ring)
        n = min(len(buf), self.length[channel])
        head = self.head[channel]
        for i in range(n):
            buf[i] = ring[(head + i) % size]
        self.head[channel] = (head + n) % size
        self.length[channel] -= n
        if n and self.has[self.expect & _SLOT]:
            self.deliver()
        return n

    def sack(self):
        """The selective ack: bit i for frame expect + i held, in as many bytes as its highest bit needs (a peer
        that knows only the first byte reads the first eight frames right), or None when nothing is held."""
        held = 0
        if self.count:
            for i in range(self.window):
                if self.has[(self.expect + i) & _SLOT]:
                    held |= 1 << i
        if not held:
            return None
        self._sack[0] = held & 0xFF
        self._sack[1] = held >> 8
        return self._sack_views[1 if held >> 8 else 0]

    def _held_room(self, n):
        """Where n more bytes go in the held buffer, or -1. Filled upwards; when the top is reached, the frames
        still held move down together (rare: only while gaps keep some frames held for a whole buffer)."""
        if self.top + n > _BUFFER:
            self._pack()
            if self.top + n > _BUFFER:
                return -1
        start = self.top
        self.top = start + n
        return start

    def _pack(self):
        """Move the held frames down to the buffer's start, lowest first (each only ever moves down, so a byte
        loop forwards never overwrites one not yet moved)."""
        held = self.held
        top = 0
        below = -1  # the frames at or below this original offset have moved
        while True:
            slot = -1
            for i in range(_SLOTS):
                off = self.held_off[i]
                if self.has[i] and off > below and (slot < 0 or off < self.held_off[slot]):
                    slot = i
            if slot < 0:
                break
            below = off = self.held_off[slot]
            n = self.held_len[slot]
            for i in range(n):
                held[top + i] = held[off + i]
            self.held_off[slot] = top
            top += n
        self.top = top

    def _room(self, ch, n):
        return len(self.rings[ch]) - self.length[ch] >= n

    def _to_ring(self, ch, src, start, n):
        ring = self.rings[ch]
        size = len(ring)
        tail = (self.head[ch] + self.length[ch]) % size
        for i in range(n):
            ring[(tail + i) % size] = src[start + i]
        self.length[ch] += n
        self.bytes_in[ch] += n

    def deliver(self):
        """Pass on held frames that are now in order, while their channels have room."""
        while True:
            slot = self.expect & _SLOT
            if not self.has[slot]:
                return
            n, ch = self.held_len[slot], self.held_ch[slot]
            if not self._room(ch, n):
                return
            self._to_ring(ch, self.held, self.held_off[slot], n)
            self.has[slot] = 0
            self.count -= 1
            if not self.count:
                self.top = 0
            self.expect = (self.expect + 1) & 0xFF


class Link:
    """One end of the link: the handshake, the pause, pacing and the frames on the line, over a TransmitWindow
    (`tx`), a ReceiveReorder (`rx`) and a RetransmitTimer (`timer`)."""

    def __init__(
        self,
        epoch: int,
        baud: int = 115200,
        window: int = WINDOW,
        rx_size: int = 512,
        control_size: int = 128,
        min_payload: int = MIN_PAYLOAD,
    ) -> None:
        if not 0 < epoch < 0x10000:
            raise ValueError("epoch must be 1..65535")
        if not 0 < min_payload <= frame.MAX_PAYLOAD:
            raise ValueError("min_payload must be 1..%d" % frame.MAX_PAYLOAD)
        if not 0 < window <= WINDOW:
            raise ValueError("window must be 1..%d (frames the selective ack can name)" % WINDOW)
        self.epoch = epoch
        self.timer = RetransmitTimer(baud)
        self.tx = TransmitWindow(window, min_payload)
        self.rx = ReceiveReorder(window, rx_size, control_size)
        self.state = RESETTING
        # state == UP, an attribute rather than a property: on MicroPython a class with a property makes every
        # attribute store on its instances look for a setter first, and the link stores several per frame.
        self.up = False
        self.peer_epoch = 0
        self._peer_knows_us = False
        self.decoder = frame.Decoder()
        self._out = bytearray(frame.WIRE_MAX)
        self._out_mv = memoryview(self._out)
        self._scratch = bytearray(2)
        self._reply_reset = False
        self._resume_due = False
        # Pacing: bits handed to the UART and not yet on the wire, as of _backlog_at.
        self._bits_per_ms = max(1, baud // 1000)
        self._backlog = 0
        self._backlog_at = 0
        self._errors_seen = 0
        self.lines: list[str] = []  # console text received outside frames (host side), oldest first
        self.noise: list[int] = []  # lengths of what was neither frames nor console text (damaged frames), oldest first
        # counters
        self.retransmissions = 0
        self.timeouts = 0
        self.probes = 0  # frames the peer held, sent again to ask for its window (a slow reader, not the line)
        self.peer_resets = 0
        self.frames_out = 0
        self.pauses = 0  # times the peer paused this side
        self.bytes_out = [0] * _CHANNELS
        self._start_stream(0)

    def _start_stream(self, now):
        self.tx.base = self.tx.next = 0
        self.rx.restart()
        self._acks_due = 0
        self._sack_due = False
        self.timer.started = -1
        self._reset_at = now
        self._hush = 0  # this side's stall: 1 PAUSE to write, 2 written (nothing more until unhush)
        self.quiet = False  # the peer answered QUIET: it writes nothing until our next frame
        self._quiet_due = False  # the peer asked to pause: QUIET to write, then nothing
        self._paused_at = -1  # paused by the peer since then (ms); -1 not paused

    # -- application side ----------------------------------------------------------------------------------

    def send(self, channel: int, data: bytes | bytearray | memoryview) -> int:
        """Queue bytes on a channel; returns how many were taken (0 when the window is full or the link is
        not up: call again after poll())."""
        if self.state != UP:
            return 0
        n = len(data)
        if not n:
            return 0
        taken = self.tx.take(channel, data, n)
        self.bytes_out[channel] += taken
        return taken

    def can_send(self, channel: int = frame.MQTT) -> bool:
        """send() on the channel takes something now."""
        return self.state == UP and self.tx.can_take(channel)

    def hush(self) -> None:
        """Before a long flash operation: write PAUSE, then nothing (not even acks) until unhush(); `quiet`
        turns true when the peer's QUIET, the last of its frames, has arrived."""
        if self.state == UP:
            self._hush = 1
            self.quiet = False

    def unhush(self, now: int) -> None:
        """After it: RESUME goes first, and the retransmission timer starts again (the peer's acks could not
        come meanwhile)."""
        if self._hush:
            self._hush = 0
            self._resume_due = True
            self._restart_timer(now)

    def pending(self) -> int:
        """Frames queued or in flight, not yet acknowledged."""
        return (self.tx.next - self.tx.base) & 0xFF

    def available(self, channel: int) -> int:
        return self.rx.length[channel]

    def readinto(self, channel: int, buf: bytearray | memoryview) -> int:
        """Take received bytes of a channel; returns how many (0: none waiting)."""
        before = self.rx.expect
        n = self.rx.readinto(channel, buf)
        if self.rx.expect != before:
            self._acks_due = 1  # held frames went through: the window opened, the sender is waiting for it
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
                self.timer.damage_at = now
        if dec.crc_errors != self._errors_seen:
            self._errors_seen = dec.crc_errors
            self.timer.damage_at = now

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
                self.up = True
            return
        if dec.epoch != self.peer_epoch or not self.peer_epoch:
            return  # a frame of a previous life of the peer, or before its RESET: not ours
        if self.state != UP:
            # The peer sends frames other than RESET only once up, and it is up only with our RESET_ACK, which
            # names it and carries our epoch: it knows us, though its RESET_ACK to us is late or lost. (Not
            # waiting for it: a frame dropped here costs the peer a timeout, as a bridge starting 256 boards
            # showed.) A line keeps order, so no frame of the peer's life before its RESET gets here.
            self._peer_knows_us = True
            self.state = UP
            self.up = True
        if ftype == frame.PAUSE:
            self._quiet_due = True
        elif ftype == frame.QUIET:
            self.quiet = True
        elif self._paused_at >= 0:
            self._resumed(now)  # RESUME, or any frame: the peer's stall is over
        sack = 0
        if ftype == frame.ACK:  # the selective ack: one or two bytes, least significant first (none: 0)
            raw = dec.raw
            k = min(2, dec.payload_len)
            while k:
                k -= 1
                sack = (sack << 8) | raw[6 + k]
        self._on_ack(dec.ack, sack, now)
        if ftype != frame.DATA:
            return
        # Up to two acks for a burst of frames, so one lost ack does not leave the sender waiting for a timeout.
        self._acks_due = min(2, self._acks_due + 1)
        if self.rx.take(dec.seq, dec.channel, dec.raw, dec.payload_len):
            self._sack_due = True  # a gap: the sender learns at once what to send again

    def _peer_restarted(self, epoch, now):
        if self.peer_epoch:
            self.peer_resets += 1
        self.peer_epoch = epoch
        self._start_stream(now)
        if self._peer_knows_us:
            self.state = UP
            self.up = True

    def _on_ack(self, ack, held, now):
        """The peer passed on everything before `ack` and holds the frames of `held` (bit i: ack + i)."""
        tx = self.tx
        acked = ack != tx.base
        sample = tx.confirm(ack, held)
        if sample == _NOT_OURS:
            return
        if sample < 0:
            if acked:  # frames the peer held are now passed on: the window moved
                self._restart_timer(now)
            return
        if not tx.resent[sample] and tx.first[sample] >= 0:
            self.timer.measured(_elapsed(now, tx.first[sample]))
        else:
            self.timer.estimate()
        if tx.lose_before(tx.order[sample]):
            self.timer.damage_at = now  # the line lost frames of ours: it damages too, whichever way
        self._restart_timer(now)

    def _restart_timer(self, now):
        self.timer.started = now if self.tx.in_flight() else -1

    def _line_busy(self, now):
        """More than half a full frame still waiting to leave the UART (by the baud rate)."""
        if self._backlog:
            gone = _elapsed(now, self._backlog_at)
            self._backlog = max(0, self._backlog - gone * self._bits_per_ms) if gone >= 0 else 0
        self._backlog_at = now
        return self._backlog > _FRAME_BITS // 2

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
        if self._hush:
            if self._hush == 1:
                self._hush = 2
                return self._frame(frame.PAUSE, 0, 0, b"")
            return None
        if self._resume_due:
            self._resume_due = False
            return self._frame(frame.RESUME, 0, 0, b"")
        if self._quiet_due:  # at once, whatever the pacing: what is queued in the UART goes before it anyway
            self._quiet_due = False
            self._paused_at = now
            self.pauses += 1
            return self._frame(frame.QUIET, 0, 0, b"")
        if self._paused_at >= 0:
            if _elapsed(now, self._paused_at) < _PAUSE_MAX_MS:
                return None
            self._resumed(now)
        if self.timer.expired(now):
            self._expired(now)
        if self._line_busy(now):
            return None
        if self._sack_due:
            self._sack_due = False
            return self._ack_frame()
        seq = self.tx.first_in(_QUEUED)
        if seq >= 0:
            return self._data_frame(seq & _SLOT, seq, now)
        if self._acks_due:
            self._acks_due -= 1
            return self._ack_frame()
        # Nothing else to send and the line is free: the oldest frame in flight goes again when its ack is overdue
        # (a tail loss probe, RetransmitTimer.probe_after) instead of the line idling until the timeout.
        seq = self._overdue(now)
        if seq >= 0:
            slot = seq & _SLOT
            self.tx.probed[slot] += 1
            return self._data_frame(slot, seq, now)
        return None

    def _resumed(self, now):
        """The peer's pause is over: the retransmission timer starts again from now."""
        self._paused_at = -1
        self._restart_timer(now)

    def _overdue(self, now):
        """The sequence number of the oldest frame in flight if its probe is due now, else -1."""
        tx = self.tx
        seq = tx.first_in(_FLIGHT)
        if seq < 0:
            return -1
        slot = seq & _SLOT
        after = self.timer.probe_after(tx.resent[slot], tx.probed[slot], now)
        return seq if after >= 0 and _elapsed(now, tx.last[slot]) >= after else -1

    def _expired(self, now):
        """Nothing confirmed for a timeout: the oldest frame in flight is sent again (the peer's answer to it then
        shows which later ones were lost, see _on_ack); with none in flight (the peer holds them all and its
        window update was lost) the oldest held one, as a probe. One frame, not the window: a timeout on a line
        that is only slow (a loaded host) then costs one frame, not a window of them."""
        self.timeouts += 1
        tx = self.tx
        seq = tx.first_in(_FLIGHT)
        if seq >= 0:
            tx.payload = max(tx.min_payload, tx.payload // 2)
            tx.again(seq & _SLOT, _LOST if self.timer.damaging(now) else _LATE)
        else:
            self.probes += 1
            tx.again(tx.base & _SLOT, _ASKED)
        timer = self.timer
        timer.started = -1
        timer.ms = min(timer.max_ms, timer.ms * 2)  # back off until the peer answers

    def _data_frame(self, slot, seq, now):
        tx = self.tx
        if self.timer.started < 0:
            self.timer.started = now
        if tx.written_now(slot, now):
            self.retransmissions += 1  # counted as written: frames found lost may be confirmed before they go
        self._acks_due = 0  # the frame carries our ack
        start = tx.off[slot]
        return self._frame(frame.DATA, tx.ch[slot], seq, tx.ring_mv[start : start + tx.size[slot]])

    def _ack_frame(self):
        """A pure ACK, with the selective ack when frames past a gap (or waiting for room) are held."""
        return self._frame(frame.ACK, 0, 0, self.rx.sack() or b"")

    def _frame(self, ftype, channel, seq, payload):
        n = frame.encode(self._out, ftype, channel, seq, self.rx.expect, self.epoch, payload)
        self.frames_out += 1
        self._backlog += n * 10
        return self._out_mv[:n]

    def next_wakeup(self, now: int) -> int:
        """Milliseconds until poll() may have something to send without new input (a timer, the line), or -1."""
        if not self._peer_knows_us:
            return max(0, _elapsed(self._reset_at, now))
        if self._hush == 2:
            return -1
        if self._hush or self._resume_due or self._quiet_due:
            return 0
        if self._paused_at >= 0:
            return max(0, _PAUSE_MAX_MS - _elapsed(now, self._paused_at))
        wake = -1
        timer = self.timer
        if timer.started >= 0:
            wake = max(0, timer.in_force(now) - _elapsed(now, timer.started))
        tx = self.tx
        seq = tx.first_in(_FLIGHT)
        if seq >= 0:
            slot = seq & _SLOT
            after = timer.probe_after(tx.resent[slot], tx.probed[slot], now)  # the tail loss probe: see poll()
            if after >= 0:
                again = max(0, after - _elapsed(now, tx.last[slot]))
                wake = again if wake < 0 else min(wake, again)
        if self._acks_due or self._sack_due or tx.first_in(_QUEUED) >= 0:
            # Something to write: when the line frees up, or now if it already has (the caller's last poll() may
            # have found it busy a moment ago: a waiting board once slept a whole second on a free line).
            free = 0
            if self._line_busy(now):
                free = (self._backlog - _FRAME_BITS // 2 + self._bits_per_ms - 1) // self._bits_per_ms
            wake = free if wake < 0 else min(wake, free)
        return wake


def _elapsed(now, then):
    # Millisecond clocks wrap (time.ticks_ms on the board); differences are taken modulo 2**30 and signed.
    return ((now - then + 0x20000000) & 0x3FFFFFFF) - 0x20000000
