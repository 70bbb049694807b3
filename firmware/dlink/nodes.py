# Nodes behind a gateway on one serial line (docs/link-protocol.md, "Nodes behind a gateway"), sans-I/O: the same
# file on the gateway board and in the host bridge. Once the gateway has asked on the control channel ("N 1") and
# the bridge has answered ("N 1"), the MQTT channel carries records, each naming its node:
#   kind u8 (an ASCII letter), node u8 (the gateway's index for it, 0-254), length u16 (big-endian), body
# Kinds, as the control channel's letters say them for a board's one connection:
#   gateway -> bridge  O  open a TCP connection to the broker for this node (body: the node's name, its MAC in hex)
#                      D  MQTT bytes of the node's connection
#                      C  close the node's connection (body: why)
#   bridge -> gateway  K  opened
#                      E  refused or failed (body: why)
#                      D  MQTT bytes from the broker for the node
#                      C  the broker closed the node's connection (body: why)
# Each node's connection is its own MQTT client's: its CONNECT, its session, its will.

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


VERSION = "1"  # what "N" says on the control channel
OPEN = const(0x4F)  # "O"
OPENED = const(0x4B)  # "K"
REFUSED = const(0x45)  # "E"
CLOSE = const(0x43)  # "C"
DATA = const(0x44)  # "D"
KINDS = b"OKECD"
HEADER = const(4)
MAX_BODY = const(1024)  # a record's body at most (a DATA record carries at most this much of a stream)
MAX_NODES = const(255)


class RecordError(ValueError):
    """Bytes on the MQTT channel that are not a record of this format: the stream is out of step."""


def record(kind, node, body=b""):
    """One record's bytes."""
    n = len(body)
    if n > MAX_BODY or not 0 <= node < MAX_NODES:
        raise RecordError("a record of %d bytes for node %d" % (n, node))
    return bytes((kind, node, n >> 8, n & 0xFF)) + bytes(body)


class Records:
    """Cuts the MQTT channel's bytes into records (kind, node, body) in one buffer."""

    def __init__(self):
        self._buf = bytearray(HEADER + MAX_BODY)
        self._n = 0

    def feed(self, data, at, end, out):
        """Take data[at:end]; each complete record is passed to out(kind, node, body: memoryview valid only during
        the call). RecordError for bytes that are no record (a kind not known, a body too long)."""
        buf = self._buf
        while at < end:
            n = self._n
            want = HEADER if n < HEADER else HEADER + ((buf[2] << 8) | buf[3])
            take = min(want - n, end - at)
            buf[n : n + take] = data[at : at + take]
            at += take
            n += take
            self._n = n
            if n == HEADER:
                if buf[0] not in KINDS or ((buf[2] << 8) | buf[3]) > MAX_BODY:
                    self._n = 0
                    raise RecordError("not a node record (kind 0x%02x)" % buf[0])
                want = HEADER + ((buf[2] << 8) | buf[3])
            if n == want and n >= HEADER:
                self._n = 0
                out(buf[0], buf[1], memoryview(buf)[HEADER:n])

    def reset(self):
        self._n = 0
