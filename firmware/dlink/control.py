# The link's control channel (channel 0, docs/link-protocol.md), sans-I/O and shared by the board's transport
# and the host bridge: one ASCII line per message, a kind letter, optionally a space and an argument, "\n".
#   board -> bridge  O [host:port]  open a TCP connection there (no argument: the bridge's default broker)
#                    C              close it
#   bridge -> board  K              opened
#                    E reason       refused (not allowed) or failed (unreachable)
#                    C reason       the broker closed the connection
#   gateway -> bridge, bridge -> gateway
#                    N version      nodes behind a gateway: from the answer on, the MQTT channel carries node
#                                   records (dlink/nodes.py); a bridge that does not serve them does not answer
# Lines are bounded (MAX_LINE bytes, newline included): a longer one is dropped whole, never cut into two.

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


OPEN = "O"
CLOSE = "C"
OPENED = "K"
REFUSED = "E"
NODES = "N"
KINDS = "OCKEN"
MAX_LINE = const(128)
_NEWLINE = const(0x0A)


class ControlError(ValueError):
    """A control line that is not a message of the protocol."""


def encode(kind: str, text: str = "") -> bytes:
    """The wire bytes of one message; an argument too long for a line is cut to fit (it is only ever a host
    name or a reason for a log)."""
    if len(kind) != 1 or kind not in KINDS:
        raise ControlError("no control message %r" % kind)
    line = kind + " " + text if text else kind
    data = line.encode()[: MAX_LINE - 1]
    return data + b"\n"


def decode(line: bytes) -> tuple[str, str]:
    """One line without its newline (bytes) -> (kind, argument text). Printable ASCII only."""
    for b in line:
        if b < 0x20 or b > 0x7E:
            raise ControlError("control line with a non-printable byte 0x%02x" % b)
    text = line.decode()
    if not text or text[0] not in KINDS or (len(text) > 1 and text[1] != " "):
        raise ControlError("unknown control line %r" % text[:40])
    return text[0], text[2:]


class Lines:
    """Cuts the control channel's bytes into lines, in one preallocated buffer (the board reads its control
    channel a byte at a time and allocates nothing per message)."""

    def __init__(self) -> None:
        self._buf = bytearray(MAX_LINE)
        self._n = 0
        self._overlong = False
        self.dropped = 0  # lines longer than MAX_LINE, dropped

    def push(self, byte: int) -> bytes | None:
        """Take one byte; returns the completed line (bytes, newline removed) or None."""
        if byte == _NEWLINE:
            n = self._n
            overlong = self._overlong
            self._n = 0
            self._overlong = False
            if overlong:
                self.dropped += 1
                return None
            return bytes(self._buf[:n])
        if self._n < MAX_LINE - 1:
            self._buf[self._n] = byte
            self._n += 1
        else:
            self._overlong = True
        return None

    def reset(self) -> None:
        self._n = 0
        self._overlong = False
