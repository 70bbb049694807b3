# Serial link framing, sans-I/O: the same file runs on the board and on the host (docs/link-protocol.md).
#
# A frame on the wire is 0x00, the COBS encoding of the raw frame, 0x00. The raw frame:
#   0      1  0x00 (sync: makes the COBS code byte of every frame 0x01, which console text never contains)
#   1      1  type << 4 | channel
#   2      1  seq (DATA: this frame's sequence number, mod 256)
#   3      1  ack (cumulative: the next sequence number this side expects)
#   4      2  epoch of the sender (big-endian), chosen at each link reset
#   6      n  payload (0..MAX_PAYLOAD bytes)
#   6+n    4  CRC-32 (IEEE 802.3, binascii.crc32) of bytes 0..5+n, big-endian
# COBS removes every 0x00 from the frame, so 0x00 only ever delimits: a receiver resynchronises at the next 0x00
# after any garbage. Bytes outside frames (console text: print output, REPL, tracebacks) never contain 0x00 or
# 0x01, so a segment that does not start with 0x01 is console text, passed on line by line.
#
# CRC-32 rather than CRC-16: binascii.crc32 is C code on both interpreters (a CRC-16 would be a Python loop on
# the board), and at 250-byte frames it detects every burst up to 32 bits and all 1-3 bit errors.

import struct
from binascii import crc32

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


DATA = const(1)
ACK = const(2)
RESET = const(3)
RESET_ACK = const(4)
# Around a long flash operation of the board (a sector erase stalls an ESP32's UART: docs/link-protocol.md):
PAUSE = const(5)  # write nothing but QUIET
QUIET = const(6)  # the last frame before the pause
RESUME = const(7)  # the pause is over (so is any other frame from the peer)

CONTROL = const(0)
MQTT = const(1)
CONSOLE = const(2)

MAX_PAYLOAD = const(240)
_HEADER = const(6)
_CRC = const(4)
_RAW_MAX = const(250)  # _HEADER + MAX_PAYLOAD + _CRC
WIRE_MAX = const(254)  # COBS of _RAW_MAX (one code byte per 254) plus both delimiters
_LINE_MAX = const(160)  # console lines longer than this are cut


class FrameError(Exception):
    pass


def encode(out, ftype, channel, seq, ack, epoch, payload=b""):
    """Write the frame, delimiters included, into out (at least WIRE_MAX bytes); returns its length."""
    n = len(payload)
    if n > MAX_PAYLOAD:
        raise FrameError("payload of %d bytes exceeds %d" % (n, MAX_PAYLOAD))
    # The raw frame is built at the end of out, so COBS can encode forward into the same buffer.
    raw = len(out) - (_HEADER + n + _CRC)
    out[raw] = 0
    out[raw + 1] = (ftype << 4) | channel
    out[raw + 2] = seq
    out[raw + 3] = ack
    out[raw + 4] = epoch >> 8
    out[raw + 5] = epoch & 0xFF
    out[raw + _HEADER : raw + _HEADER + n] = payload
    end = raw + _HEADER + n
    struct.pack_into(">I", out, end, crc32(memoryview(out)[raw:end]) & 0xFFFFFFFF)
    return _cobs_encode(out, raw, end + _CRC)


def _cobs_encode(out, src, end):
    """COBS-encode out[src:end] to out[1:], framed by 0x00; src must leave room for the code bytes
    (the encoding is at most one byte longer for frames under 254 bytes, and the writes stay behind the reads)."""
    out[0] = 0
    code_pos = 1
    pos = 2
    code = 1
    for i in range(src, end):
        byte = out[i]
        if byte:
            out[pos] = byte
            pos += 1
            code += 1
            if code == 0xFF:
                out[code_pos] = code
                code_pos = pos
                pos += 1
                code = 1
        else:
            out[code_pos] = code
            code_pos = pos
            pos += 1
            code = 1
    out[code_pos] = code
    out[pos] = 0
    return pos + 1


class Decoder:
    """Cuts frames and console lines out of the received byte stream, fed in chunks of any size.

    feed(data, start) consumes bytes up to the end of one frame or one console line and returns how many; then
    `ready` is FRAME (fields in ftype, channel, seq, ack, epoch, payload: a memoryview valid until the next
    feed), LINE (text in line) or NOISE (noise_len bytes that were neither), else 0. Counters: frames,
    crc_errors (segments that were not valid frames), overflows (segments longer than any frame: cut at the
    next 0x00), noise_bytes.

    Console text is printable: a segment outside frames that holds a control byte is the remains of a frame
    whose first byte the line damaged, and may carry MQTT payloads or credentials. From that byte to the next
    0x00 every line is NOISE, reported by its length only, never as text."""

    FRAME = 1
    LINE = 2
    NOISE = 3

    def __init__(self):
        self._seg = bytearray(WIRE_MAX)
        self._raw = bytearray(_RAW_MAX)
        self._raw_mv = memoryview(self._raw)
        self._line = bytearray(_LINE_MAX)
        self._n = 0  # bytes of the current segment
        self._text = False  # the current segment is console text
        self._noisy = False  # ... or was, until a control byte showed it to be a damaged frame
        self._skip = False  # overflowed: drop bytes until the next 0x00
        self._line_n = 0
        self.ready = 0
        self.frames = 0
        self.crc_errors = 0
        self.overflows = 0
        self.noise_bytes = 0
        self.noise_len = 0
        self.ftype = self.channel = self.seq = self.ack = self.epoch = 0
        self.payload_len = 0
        self.raw = self._raw  # the last frame, decoded: payload at raw[6 : 6 + payload_len]
        self.line = ""

    def feed(self, data, start=0):
        self.ready = 0
        pos = start
        end = len(data)
        while pos < end:
            byte = data[pos]
            pos += 1
            if byte == 0:
                if self._text:
                    self._text = False
                    if self._line_n:
                        return self._emit_line(pos, start)
                    self._noisy = False
                elif self._skip:
                    self._skip = False
                elif self._n:
                    n = self._n
                    self._n = 0
                    if self._decode(n):
                        self.ready = Decoder.FRAME
                        return pos - start
                continue
            if self._skip:
                continue
            if self._text:
                if byte == 0x0A:
                    return self._emit_line(pos, start)
                if (byte < 0x20 and byte != 0x09 and byte != 0x0D) or byte == 0x7F:
                    self._noisy = True
                if byte != 0x0D:
                    if self._line_n < _LINE_MAX:
                        self._line[self._line_n] = byte
                    self._line_n += 1  # counted beyond what is kept: a noise report gives the whole length
                continue
            if self._n == 0 and byte != 0x01:
                # Not a frame (their COBS code byte is always 0x01): console text until 0x00 or a newline.
                self._text = True
                pos -= 1
                continue
            if self._n == WIRE_MAX:
                self._n = 0
                self._skip = True
                self.overflows += 1
                continue
            self._seg[self._n] = byte
            self._n += 1
        return pos - start

    def _emit_line(self, pos, start):
        n = self._line_n
        self._line_n = 0
        if not self._noisy:
            try:
                self.line = bytes(self._line[: min(n, _LINE_MAX)]).decode()
                self.ready = Decoder.LINE
                return pos - start
            except UnicodeError:  # not UTF-8: noise as well
                self._noisy = True
        if not self._text:
            self._noisy = False  # the segment ended with this line
        self.line = ""
        self.noise_len = n
        self.noise_bytes += n
        self.ready = Decoder.NOISE
        return pos - start

    def _decode(self, n):
        """COBS-decode the segment and check the frame; True when it is a valid frame."""
        seg = self._seg
        raw = self._raw
        out = 0
        i = 0
        while i < n:
            code = seg[i]
            if code == 0 or i + code > n or out + code - 1 > _RAW_MAX:
                self.crc_errors += 1
                return False
            i += 1
            for _ in range(code - 1):  # a byte loop: slicing would allocate on the board
                raw[out] = seg[i]
                out += 1
                i += 1
            if code < 0xFF and i < n:
                if out == _RAW_MAX:
                    self.crc_errors += 1
                    return False
                raw[out] = 0
                out += 1
        if out < _HEADER + _CRC or raw[0] != 0:
            self.crc_errors += 1
            return False
        body = out - _CRC
        if crc32(self._raw_mv[:body]) & 0xFFFFFFFF != struct.unpack_from(">I", raw, body)[0]:
            self.crc_errors += 1
            return False
        kind = raw[1]
        self.ftype = kind >> 4
        self.channel = kind & 0x0F
        if self.ftype < DATA or self.ftype > RESUME or self.channel > CONSOLE:
            self.crc_errors += 1  # a valid CRC over a frame we would never send: not ours
            return False
        self.seq = raw[2]
        self.ack = raw[3]
        self.epoch = (raw[4] << 8) | raw[5]
        self.payload_len = body - _HEADER  # the payload is raw[6 : 6 + payload_len]
        self.frames += 1
        return True

    def payload(self):
        """The last frame's payload (a view valid until the next feed). A method, not a property: see Link.up."""
        return self._raw_mv[_HEADER : _HEADER + self.payload_len]
