# ESP-NOW frames between a node and its gateway (docs/nodes.md), sans-I/O: the same file on the node, the gateway
# and the host's tests. A frame is at most 250 bytes (ESP-NOW's limit):
#   byte 0   FORMAT << 4 (the low nibble is 0: kept for flags a later format may need)
#   byte 1   the MQTT protocol level of the packets that follow (3: 3.1, 4: 3.1.1, 5: 5.0)
#   bytes 2- whole MQTT control packets, as that version encodes them, one after another
# A node sends PUBLISH (QoS 0, 1, 2) and PUBREL; its gateway answers each frame with one frame holding PUBACK,
# PUBREC and PUBCOMP for the packets in it, once each message is on the gateway's flash. So the MQTT packets are
# the node's own session's, and the hop between node and gateway is MQTT's receiver rules with one addition: the
# gateway takes a PUBLISH whose packet id is the last one it took from that node as a duplicate (the node sends one
# flow at a time: docs/nodes.md).
#
# publish() encodes a PUBLISH without loading the codec (a node's wake sends one and loads little), byte for byte
# what dmqtt.codec encodes (tests/unit/dlink/test_now.py holds it to it).

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


FORMAT = const(1)
HEADER = const(2)
MAX_FRAME = const(250)  # espnow.MAX_DATA_LEN
ROOM = const(248)  # MQTT bytes a frame carries
_PUBLISH = const(3)
_V5 = const(5)


class FrameError(ValueError):
    """A frame that is not one of this format."""


def start(buf, version):
    """Write a frame's header into buf; returns where its packets start."""
    buf[0] = FORMAT << 4
    buf[1] = version
    return HEADER


def version_of(frame):
    """The MQTT protocol level of a frame's packets; FrameError for a frame of another format or too short."""
    if len(frame) < HEADER or frame[0] != FORMAT << 4 or frame[1] not in (3, 4, 5):
        raise FrameError("not a node frame")
    return frame[1]


def packet_end(buf, at, end):
    """Where the MQTT packet that starts at buf[at] ends (its fixed header, remaining length and body), or -1 when
    buf[at:end] does not hold all of it."""
    n = 0
    shift = 0
    i = at + 1
    while i < end:
        b = buf[i]
        n |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            return i + n if i + n <= end else -1
        shift += 7
        if shift > 21:
            raise FrameError("a remaining length of more than four bytes")
    return -1


def publish(buf, at, version, qos, pid, topic, payload, retain=False, dup=False):
    """A PUBLISH into buf at `at` (topic and payload: bytes); returns where it ends, or -1 when it does not fit in
    a frame's room from `at`. No topic alias, no properties (an empty property list on 5.0)."""
    tlen = len(topic)
    n = 2 + tlen + (2 if qos else 0) + (1 if version == _V5 else 0) + len(payload)
    size = 2 if n < 128 else 3  # (a frame's room is under 16 KB: two length bytes at most)
    if at + size + n > HEADER + ROOM or at + size + n > len(buf):
        return -1
    buf[at] = _PUBLISH << 4 | (8 if dup else 0) | qos << 1 | (1 if retain else 0)
    if n < 128:
        buf[at + 1] = n
    else:
        buf[at + 1] = 0x80 | (n & 0x7F)
        buf[at + 2] = n >> 7
    i = at + size
    buf[i] = tlen >> 8
    buf[i + 1] = tlen & 0xFF
    buf[i + 2 : i + 2 + tlen] = topic
    i += 2 + tlen
    if qos:
        buf[i] = pid >> 8
        buf[i + 1] = pid & 0xFF
        i += 2
    if version == _V5:
        buf[i] = 0  # no properties
        i += 1
    buf[i : i + len(payload)] = payload
    return i + len(payload)


def acks(frame):
    """The acknowledgements in a gateway's frame: (packet type, packet id) of each PUBACK (4), PUBREC (5) and
    PUBCOMP (7), in order, as a generator (its reason codes, on 5.0, are the gateway's: success)."""
    at = HEADER
    end = len(frame)
    while at < end:
        stop = packet_end(frame, at, end)
        if stop < 0:
            return
        kind = frame[at] >> 4
        if kind in (4, 5, 7) and stop - at >= 4:
            yield kind, (frame[at + 2] << 8) | frame[at + 3]
        at = stop
