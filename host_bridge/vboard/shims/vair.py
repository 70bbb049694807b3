# The virtual board's radio as ESP-NOW uses it: its connection to the air the host runs (host_bridge/vboard/air.py),
# which decides who hears a frame and whether a peer's radio acknowledges it. Not part of any chip's API: the
# `espnow` shim sends and receives through it, and `network` tells it when the WiFi interface goes up or down and
# which channel the radio is on (a radio with its interface inactive hears nothing and acknowledges nothing).
#
# The connection is made at import, before the firmware's heap is pinned, as a chip's radio is C: so are its
# buffers. Messages (type, length u16 big-endian, body) are docs/virtual-board.md's ("ESP-NOW"). Without an air
# (VBOARD_AIR unset) the board is alone: a unicast frame is never acknowledged, a broadcast goes out to nobody.
import json
import select
import struct

import vboard_state

_HELLO = 0x48  # "H"
_SEND = 0x53  # "S"
_ANSWER = 0x41  # "A"
_RECEIVE = 0x52  # "R"
_TURNAROUND = 0x54  # "T"
_HEADER = 3
_MAX_FRAME = 250
_ANSWER_MS = 2000  # host time an answer may take (the air answers at once but for a link's delay)

_model = json.loads(vboard_state.env("VBOARD_AIR", "{}"))

_inbox = bytearray(3 * (_HEADER + 14 + _MAX_FRAME))  # what the air sent, not yet taken apart
_filled = [0]
_outbox = bytearray(_HEADER + 14 + _MAX_FRAME)
_answer = [0, 0]  # [seq of the last answer, 1 when acknowledged]
_seq = [0]
_channel = [0]  # what the air was last told: 0, the radio off
_receiver = [None]  # the espnow shim's handler of a heard frame (None: ESP-NOW inactive, frames dropped)
_sock = None
_poller = None


def _connect():
    global _sock, _poller
    if "port" not in _model:
        return
    import socket

    port = socket._port
    s = port.socket()
    s.connect(port.getaddrinfo("127.0.0.1", _model["port"])[0][-1])
    s.setblocking(False)
    _sock = s
    _poller = select.poll()
    _poller.register(s, select.POLLIN)


def mac():
    uid = vboard_state.env("VBOARD_UID", "24d7eb000001")
    return bytes(int(uid[i : i + 2], 16) for i in range(0, 12, 2))


def _write(kind, size):
    _outbox[0] = kind
    struct.pack_into(">H", _outbox, 1, size)
    view = memoryview(_outbox)[: _HEADER + size]
    while view:
        try:
            n = _sock.write(view)
        except OSError:
            n = None
        if n is None:
            _poller.poll(10)
            continue
        view = view[n:]


def radio(channel):
    """The radio is on `channel` (0: off, the WiFi interface inactive): the air hears of each change. The
    emulation's time (a chip's radio tunes in hardware), counted apart from the firmware's."""
    if channel == _channel[0] or _sock is None:
        _channel[0] = channel
        return
    import time

    began = time.ticks_us()
    _channel[0] = channel
    _outbox[_HEADER : _HEADER + 6] = mac()
    _outbox[_HEADER + 6] = channel
    _write(_HELLO, 7)
    vboard_state.emulated_us += time.ticks_diff(time.ticks_us(), began)


def channel():
    return _channel[0]


def turnaround(us):
    """The board answers the peer it last heard from after `us` microseconds of interpreter work: told to the air,
    which keeps it for the bench (a gateway's answer to a node is what the node waits for)."""
    if _sock is None:
        return
    struct.pack_into(">I", _outbox, _HEADER, max(0, us))
    _write(_TURNAROUND, 4)  # (inside espnow's send(), whose time is the emulation's)


def receiver(handler):
    """`handler(view)` takes each frame heard from now on (source 6, RSSI i8, channel, flags, key tag 4,
    payload); None: frames heard are dropped (ESP-NOW inactive: the radio still acknowledges them)."""
    _receiver[0] = handler


def pump(wait_ms=0):
    """Take in what the air sent: heard frames go to the receiver, answers are noted. Waits up to `wait_ms` for
    the first byte when none is there. Returns whether anything came."""
    if _sock is None:
        return False
    came = False
    while True:
        free = memoryview(_inbox)[_filled[0] :]
        try:
            n = _sock.readinto(free)
        except OSError:
            n = None
        if n is None:
            if came or wait_ms <= 0:
                return came
            import time

            began = time.ticks_us()
            ready = _poller.poll(wait_ms)
            vboard_state.air_us += time.ticks_diff(time.ticks_us(), began)
            if not ready:
                return came
            continue
        if n == 0:
            raise OSError(104)  # the air is gone (the host closed it): ECONNRESET
        came = True
        _filled[0] += n
        _take()


def _take():
    at = 0
    view = memoryview(_inbox)
    while _filled[0] - at >= _HEADER:
        size = (_inbox[at + 1] << 8) | _inbox[at + 2]
        if _filled[0] - at < _HEADER + size:
            break
        kind = _inbox[at]
        body = view[at + _HEADER : at + _HEADER + size]
        if kind == _ANSWER:
            _answer[0] = (body[0] << 8) | body[1]
            _answer[1] = body[2]
        elif kind == _RECEIVE and _receiver[0] is not None:
            _receiver[0](body)
        at += _HEADER + size
    if at:
        left = _filled[0] - at
        _inbox[:left] = view[at : _filled[0]]
        _filled[0] = left


def send(dst, flags, tag, msg, sync):
    """Put a frame for `dst` on the air on the radio's channel; with `sync`, wait for the air's answer: True when
    the peer's radio acknowledged it (always for a broadcast). Without an air nobody hears it."""
    if _sock is None:
        return bool(dst[0] & 1)
    _seq[0] = seq = (_seq[0] + 1) & 0xFFFF
    struct.pack_into(">H", _outbox, _HEADER, seq)
    _outbox[_HEADER + 2 : _HEADER + 8] = dst
    _outbox[_HEADER + 8] = _channel[0]
    _outbox[_HEADER + 9] = flags
    _outbox[_HEADER + 10 : _HEADER + 14] = tag
    n = len(msg)
    _outbox[_HEADER + 14 : _HEADER + 14 + n] = msg
    if vboard_state.watches("send"):
        vboard_state.event("send")  # (the frame about to go on the air: a cut or a hold lands here)
    _write(_SEND, 14 + n)
    if not sync:
        return True
    import time

    began = time.ticks_ms()
    while _answer[0] != seq:
        left = _ANSWER_MS - time.ticks_diff(time.ticks_ms(), began)
        if left <= 0:
            return False
        pump(left)
    return _answer[1] == 1


_connect()
