# Sans-I/O MQTT codec: every control packet of MQTT 3.1.1, CONNECT of 3.1 and 5.0, and the MQTT 5.0
# properties and reason codes. Pure functions over bytes, in the subset of Python that MicroPython and CPython
# both run: the board and the host import this very file. This module holds what a client needs; the packets
# only a broker sends or decodes, the checked encode_publish and whole-packet decoding for the host are in
# codec_host.py, so that the board's RAM holds no code it never runs.
#
# A broken rule raises CodecError through refused(rule): the rule's text is in codec_text.py, loaded only when
# a packet is refused (a board keeps no text in RAM that it seldom prints). Each raise cites its spec id.
#
# Encoders write into a caller's buffer (`into=`) and return the length, so the board's hot path allocates
# nothing per packet; without `into` they return fresh bytes (host convenience).
# Building blocks without a leading underscore that no board code calls (put_header, props_at, check_reason,
# ...) are the internal API codec_host.py builds the broker-side packets on; they are not the client's API.
#
# Decoding is two-stage: StreamDecoder cuts whole packets out of a byte stream fed in chunks of any size and
# exposes each body as a memoryview into its own preallocated buffer; decode_* functions parse a body.
#
# Spec ids in brackets cite the normative statements of the MQTT standards (docs/codec.md lists the rules).

try:
    from micropython import const
except ImportError:  # CPython: const() is only a compile-time hint on MicroPython

    def const(x):  # type: ignore[misc]
        return x


from dmqtt.errors import CodecError, explain

if False:  # type checkers only: MicroPython has no typing module (annotations cost nothing once compiled)
    from typing import Any

    from dmqtt.interfaces import Bytes, Props, Text

# Protocol levels as carried in CONNECT.
V31 = const(3)  # "MQIsdp", MQTT 3.1 (and the 1999 draft's flows)
V311 = const(4)
V5 = const(5)

# Control packet types (high nibble of the first byte).
CONNECT = const(1)
CONNACK = const(2)
PUBLISH = const(3)
PUBACK = const(4)
PUBREC = const(5)
PUBREL = const(6)
PUBCOMP = const(7)
SUBSCRIBE = const(8)
SUBACK = const(9)
UNSUBSCRIBE = const(10)
UNSUBACK = const(11)
PINGREQ = const(12)
PINGRESP = const(13)
DISCONNECT = const(14)
AUTH = const(15)  # MQTT 5.0 only

# A PUBLISH's flags (the low nibble of its first byte, [MQTT-2.1.3-1]): RETAIN, the QoS (shifted by QOS_SHIFT) and
# DUP, as write_publish takes them in one int.
RETAIN_FLAG = const(0x01)
QOS_SHIFT = const(1)
DUP_FLAG = const(0x08)

# MQTT 5.0 reason codes (MQTT 5.0 section 2.4) that the codec, the session or the client send or act on.
SUCCESS = const(0x00)
NO_MATCHING_SUBSCRIBERS = const(0x10)
UNSPECIFIED_ERROR = const(0x80)
MALFORMED_PACKET = const(0x81)
PROTOCOL_ERROR = const(0x82)
UNSUPPORTED_PROTOCOL_VERSION = const(0x84)
NOT_AUTHORIZED = const(0x87)
KEEP_ALIVE_TIMEOUT = const(0x8D)
TOPIC_NAME_INVALID = const(0x90)
PACKET_ID_NOT_FOUND = const(0x92)
RECEIVE_MAXIMUM_EXCEEDED = const(0x93)
PACKET_TOO_LARGE = const(0x95)

# Reason codes each MQTT 5.0 packet may carry (MQTT 5.0 sections 3.2.2.2, 3.4.2.1, 3.5.2.1, 3.6.2.1,
# 3.7.2.1, 3.9.3, 3.11.3, 3.14.2.1, 3.15.2.1).
_PUB_REASONS = b"\x00\x10\x80\x83\x87\x90\x91\x97\x99"
_REL_REASONS = b"\x00\x92"
CONNACK_REASONS = b"\x00\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8c\x90\x95\x97\x99\x9a\x9b\x9c\x9d\x9f"
SUBACK_REASONS = b"\x00\x01\x02\x80\x83\x87\x8f\x91\x97\x9e\xa1\xa2"
UNSUBACK_REASONS = b"\x00\x11\x80\x83\x87\x8f\x91"
_DISCONNECT_REASONS = (
    b"\x00\x04\x80\x81\x82\x83\x87\x89\x8b\x8d\x8e\x8f\x90\x93\x94\x95"
    b"\x96\x97\x98\x99\x9a\x9b\x9c\x9d\x9e\x9f\xa0\xa1\xa2"
)
AUTH_REASONS = b"\x00\x18\x19"

_MAX_REMAINING = const(268435455)  # four Remaining Length bytes of 7 bits each
_ANY_PACKET = const(0xFFFF)


# The rules the codec refuses packets by: numbers into codec_text.TEXT (tests/unit/dmqtt/test_codec_text.py checks
# that each name matches its text's entry).
_R_VARINT_RANGE = const(0)
_R_STRING_LONG = const(1)
_R_TOPIC_EMPTY = const(2)
_R_TOPIC_WILDCARD = const(3)
_R_TOPIC_NUL = const(4)
_R_PROP_UNKNOWN = const(5)
_R_PROPS_NEED_V5 = const(6)
_R_BUFFER_SMALL = const(7)
_R_PID_RANGE = const(8)
_R_ACK_TYPE = const(9)
_R_REASON_NEEDS_V5 = const(10)
_R_REASON_HERE = const(11)
_R_LEVEL = const(12)
_R_PASSWORD_USER = const(13)
_R_WILL_QOS = const(14)
_R_WILL_TOPIC = const(15)
_R_SUBSCRIBE_EMPTY = const(16)
_R_UNSUBSCRIBE_EMPTY = const(17)
_R_HAS_BODY = const(18)
_R_FILTER_EMPTY = const(19)
_R_FILTER_NUL = const(20)
_R_FILTER_HASH = const(21)
_R_FILTER_PLUS = const(22)
_R_SUB_QOS3 = const(23)
_R_SUB_RESERVED = const(24)
_R_SUB_RESERVED_V5 = const(25)
_R_END_IN_U16 = const(26)
_R_END_IN_U32 = const(27)
_R_END_IN_VARINT = const(28)
_R_VARINT_LONG = const(29)
_R_FIELD_PAST_END = const(30)
_R_UTF8_INVALID = const(31)
_R_UTF8_NUL = const(32)
_R_PROPS_PAST_END = const(33)
_R_PROP_NOT_ALLOWED = const(34)
_R_END_IN_PROP = const(35)
_R_SUBSCRIPTION_ID_0 = const(36)
_R_PROP_PAST_LENGTH = const(37)
_R_PROP_TWICE = const(38)
_R_TRAILING_BYTES = const(39)
_R_PID_ZERO = const(40)
_R_PUBLISH_QOS3 = const(41)
_R_PUBLISH_DUP_QOS0 = const(42)
_R_FLAGS_0010 = const(43)
_R_FLAGS_0000 = const(44)
_R_TYPE_15 = const(45)
_R_TYPE_0 = const(46)
_R_PUBLISH_NO_TOPIC = const(47)
_R_PUBLISH_WILDCARD = const(48)
_R_ACK_LENGTH = const(49)
_R_REASON_NOT_ALLOWED = const(50)
_R_CONNACK_SHORT = const(51)
_R_CONNACK_FLAGS = const(52)
_R_CONNACK_REASON = const(53)
_R_CONNACK_RETURN = const(54)
_R_SUBACK_EMPTY = const(55)
_R_SUBACK_CODE = const(56)
_R_UNSUBACK_REASON = const(57)
_R_LENGTH_LONG = const(58)
_R_TOO_LARGE = const(59)


def refused(rule, arg=None, reason_code=MALFORMED_PACKET):
    """The CodecError for a broken rule; `arg` fills the %-fields of its text, which comes from codec_text.py for
    this refusal only (errors.explain): 60-odd texts would otherwise hold about 5 KB of a deployed board's heap
    for good. A board without the memory (or the file) for them names the rule's number."""
    return CodecError(explain("dmqtt.codec_text", rule, arg), reason_code)


# ---------------------------------------------------------------------------------------------------------
# MQTT 5.0 properties. Each entry: (wire type, mask of packet types allowed to carry it). Bit 0 of the mask
# stands for the Will Properties of CONNECT (packet type 0 does not exist).

_P_BYTE = const(1)
_P_U16 = const(2)
_P_U32 = const(3)
_P_VARINT = const(4)
_P_STR = const(5)
_P_BIN = const(6)
_P_PAIR = const(7)

_WILL = const(1)
_M_PUB = const(1 << 3)
_M_CONNECT = const(1 << 1)
_M_CONNACK = const(1 << 2)
_M_ACKS = const((1 << 4) | (1 << 5) | (1 << 6) | (1 << 7))
_M_SUB = const(1 << 8)
_M_SUBACK = const(1 << 9)
_M_UNSUBACK = const(1 << 11)
_M_DISC = const(1 << 14)
_M_AUTH = const(1 << 15)

# Per property id (the index), its wire type << 16 | the mask of packets that may carry it; 0: no such property.
# A tuple of small integers, folded at compile time: 0.4 KB of a deployed board's heap, where a dict of tuples
# took 2 KB.
_PROPERTIES = (
    0,  # 0x00
    _P_BYTE << 16 | _M_PUB | _WILL,  # 0x01 Payload Format Indicator
    _P_U32 << 16 | _M_PUB | _WILL,  # 0x02 Message Expiry Interval
    _P_STR << 16 | _M_PUB | _WILL,  # 0x03 Content Type
    0,  # 0x04
    0,  # 0x05
    0,  # 0x06
    0,  # 0x07
    _P_STR << 16 | _M_PUB | _WILL,  # 0x08 Response Topic
    _P_BIN << 16 | _M_PUB | _WILL,  # 0x09 Correlation Data
    0,  # 0x0A
    _P_VARINT << 16 | _M_PUB | _M_SUB,  # 0x0B Subscription Identifier
    0,  # 0x0C
    0,  # 0x0D
    0,  # 0x0E
    0,  # 0x0F
    0,  # 0x10
    _P_U32 << 16 | _M_CONNECT | _M_CONNACK | _M_DISC,  # 0x11 Session Expiry Interval
    _P_STR << 16 | _M_CONNACK,  # 0x12 Assigned Client Identifier
    _P_U16 << 16 | _M_CONNACK,  # 0x13 Server Keep Alive
    0,  # 0x14
    _P_STR << 16 | _M_CONNECT | _M_CONNACK | _M_AUTH,  # 0x15 Authentication Method
    _P_BIN << 16 | _M_CONNECT | _M_CONNACK | _M_AUTH,  # 0x16 Authentication Data
    _P_BYTE << 16 | _M_CONNECT,  # 0x17 Request Problem Information
    _P_U32 << 16 | _WILL,  # 0x18 Will Delay Interval
    _P_BYTE << 16 | _M_CONNECT,  # 0x19 Request Response Information
    _P_STR << 16 | _M_CONNACK,  # 0x1A Response Information
    0,  # 0x1B
    _P_STR << 16 | _M_CONNACK | _M_DISC,  # 0x1C Server Reference
    0,  # 0x1D
    0,  # 0x1E
    _P_STR << 16 | _M_CONNACK | _M_ACKS | _M_SUBACK | _M_UNSUBACK | _M_DISC | _M_AUTH,  # 0x1F Reason String
    0,  # 0x20
    _P_U16 << 16 | _M_CONNECT | _M_CONNACK,  # 0x21 Receive Maximum
    _P_U16 << 16 | _M_CONNECT | _M_CONNACK,  # 0x22 Topic Alias Maximum
    _P_U16 << 16 | _M_PUB,  # 0x23 Topic Alias
    _P_BYTE << 16 | _M_CONNACK,  # 0x24 Maximum QoS
    _P_BYTE << 16 | _M_CONNACK,  # 0x25 Retain Available
    _P_PAIR << 16 | _ANY_PACKET,  # 0x26 User Property (may repeat)
    _P_U32 << 16 | _M_CONNECT | _M_CONNACK,  # 0x27 Maximum Packet Size
    _P_BYTE << 16 | _M_CONNACK,  # 0x28 Wildcard Subscription Available
    _P_BYTE << 16 | _M_CONNACK,  # 0x29 Subscription Identifiers Available
    _P_BYTE << 16 | _M_CONNACK,  # 0x2A Shared Subscription Available
)

# Properties that may appear more than once; decoded as lists. Every other property appearing twice is a
# Protocol Error (MQTT 5.0 section 2.2.2.2).
USER_PROPERTY = const(0x26)
SUBSCRIPTION_IDENTIFIER = const(0x0B)
TOPIC_ALIAS = const(0x23)
TOPIC_ALIAS_MAXIMUM = const(0x22)
RECEIVE_MAXIMUM = const(0x21)
MAXIMUM_QOS = const(0x24)
RETAIN_AVAILABLE = const(0x25)
MAXIMUM_PACKET_SIZE = const(0x27)
SESSION_EXPIRY_INTERVAL = const(0x11)
SERVER_KEEP_ALIVE = const(0x13)
REASON_STRING = const(0x1F)


def _is_repeatable(pid):
    return pid == USER_PROPERTY or pid == SUBSCRIPTION_IDENTIFIER


def _prop(pid):
    """The property's table entry (wire type << 16 | mask); an unknown id is refused."""
    entry = _PROPERTIES[pid] if pid < len(_PROPERTIES) else 0
    if not entry:
        raise refused(_R_PROP_UNKNOWN, pid)
    return entry


# ---------------------------------------------------------------------------------------------------------
# Primitive writers: each takes (buffer, position, value) and returns the position after what it wrote.


def varint_size(value):
    if value < 128:
        return 1
    if value < 16384:
        return 2
    if value < 2097152:
        return 3
    if value <= _MAX_REMAINING:
        return 4
    raise refused(_R_VARINT_RANGE, value)


def put_varint(buf, pos, value):
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            buf[pos] = byte | 0x80
            pos += 1
        else:
            buf[pos] = byte
            return pos + 1


def put_u16(buf, pos, value):
    buf[pos] = (value >> 8) & 0xFF
    buf[pos + 1] = value & 0xFF
    return pos + 2


def _put_u32(buf, pos, value):
    buf[pos] = (value >> 24) & 0xFF
    buf[pos + 1] = (value >> 16) & 0xFF
    buf[pos + 2] = (value >> 8) & 0xFF
    buf[pos + 3] = value & 0xFF
    return pos + 4


def put_raw(buf, pos, data):
    end = pos + len(data)
    buf[pos:end] = data
    return end


def _put_field(buf, pos, data):
    return put_raw(buf, put_u16(buf, pos, len(data)), data)


def _utf8(text):
    # Strings go on the wire as bytes; callers on the hot path pass bytes they encoded once.
    data = text.encode() if isinstance(text, str) else text
    if len(data) > 65535:
        raise refused(_R_STRING_LONG)
    return data


def props_size(props):
    if not props:
        return 0
    size = 0
    for pid in props:
        kind = _prop(pid) >> 16
        values = props[pid] if _is_repeatable(pid) else (props[pid],)
        for value in values:
            size += 1 + _prop_value_size(kind, value)
    return size


def _prop_value_size(kind, value):
    if kind == _P_BYTE:
        return 1
    if kind == _P_U16:
        return 2
    if kind == _P_U32:
        return 4
    if kind == _P_VARINT:
        return varint_size(value)
    if kind == _P_PAIR:
        return 4 + len(_utf8(value[0])) + len(_utf8(value[1]))
    return 2 + len(_utf8(value))


def put_props(buf, pos, props, size):
    pos = put_varint(buf, pos, size)
    if not props:
        return pos
    # Sorted so that the same properties give the same bytes on both interpreters (dict order differs).
    for pid in sorted(props):
        kind = _PROPERTIES[pid] >> 16
        values = props[pid] if _is_repeatable(pid) else (props[pid],)
        for value in values:
            buf[pos] = pid
            pos += 1
            if kind == _P_BYTE:
                buf[pos] = value
                pos += 1
            elif kind == _P_U16:
                pos = put_u16(buf, pos, value)
            elif kind == _P_U32:
                pos = _put_u32(buf, pos, value)
            elif kind == _P_VARINT:
                pos = put_varint(buf, pos, value)
            elif kind == _P_PAIR:
                pos = _put_field(buf, _put_field(buf, pos, _utf8(value[0])), _utf8(value[1]))
            else:
                pos = _put_field(buf, pos, _utf8(value))
    return pos


def props_block_size(version, props):
    """Bytes of a properties block (length prefix included) in `version`; 0 before MQTT 5.0."""
    if version != V5:
        if props:
            raise refused(_R_PROPS_NEED_V5)
        return 0
    size = props_size(props)
    return varint_size(size) + size


def start_packet(into, remaining, at=0):
    """The output buffer: the caller's (checked for room from `at` on) or a new one."""
    total = 1 + varint_size(remaining) + remaining
    if into is None:
        return bytearray(total)
    if len(into) < at + total:
        raise refused(_R_BUFFER_SMALL, total)
    return into


def put_header(buf, first_byte, remaining, at=0):
    """Write the fixed header at `at`; returns the position after it. (Two calls rather than one returning a
    tuple, so that encoding into a caller's buffer allocates nothing on MicroPython.)"""
    buf[at] = first_byte
    return put_varint(buf, at + 1, remaining)


def finish_packet(into, buf, pos):
    return pos if into is not None else bytes(buf)


def check_pid(pid):
    if not 0 < pid <= 0xFFFF:
        raise refused(_R_PID_RANGE)  # [MQTT-2.3.1-1]


# ---------------------------------------------------------------------------------------------------------
# Encoders. `into`: optional bytearray/memoryview to write into; returns its length used, else new bytes. The
# two a session sends most (write_publish, encode_ack) also write at `at` in `into`, behind packets already there,
# and return where they end: the client hands the transport several packets in one write.


def check_topic(topic: "Text", allow_empty: bool = False) -> bytes:
    """A topic name (bytes or str) checked once, as bytes, so that write_publish can skip it on every send.
    allow_empty: a 5.0 PUBLISH whose Topic Alias names the topic."""
    data = _utf8(topic)
    if not data and not allow_empty:
        raise refused(_R_TOPIC_EMPTY)  # [MQTT-4.7.3-1]
    if b"+" in data or b"#" in data:
        raise refused(_R_TOPIC_WILDCARD)  # [MQTT-3.3.2-2]
    if b"\x00" in data:
        raise refused(_R_TOPIC_NUL)  # [MQTT-1.5.3-2]
    return data


def publish_size(topic_len, payload_len, qos, version):
    """Bytes of a PUBLISH without properties, fixed header included: what a Maximum Packet Size limits
    [MQTT-3.2.2-15], known before anything is encoded or journaled."""
    remaining = 2 + topic_len + (2 if qos else 0) + props_block_size(version, None) + payload_len
    return 1 + varint_size(remaining) + remaining


def write_publish(
    topic: "Bytes",
    payload: "Bytes",
    flags: int,
    pid: int,
    version: int,
    props: "Props" = None,
    into: "bytearray | memoryview | None" = None,
    at: int = 0,
    alias: int = 0,
) -> "Any":
    """encode_publish for a topic already validated (check_topic) and arguments already checked: the board
    resends journaled messages with this, the topic a memoryview into the journal's read buffer. Written out
    rather than through the put_ helpers: it runs for every message, and on MicroPython each call costs more than
    the bytes it writes. alias: a 5.0 Topic Alias (0: none), written without the general property encoder, which
    allocates (a sorted list, a tuple per property) and took four times the rest of the packet's time. flags:
    RETAIN_FLAG, the QoS << QOS_SHIFT and DUP_FLAG, or-ed: the fixed header's flags as the wire has them."""
    qos = (flags >> QOS_SHIFT) & 3
    tlen = len(topic)
    if version == V5:
        if alias and props:
            props = dict(props)
            props[TOPIC_ALIAS] = alias
            alias = 0
        psize = props_size(props) if props else 3 if alias else 0
        pblock = (1 if psize < 128 else varint_size(psize)) + psize
    elif props or alias:
        raise refused(_R_PROPS_NEED_V5)
    else:
        pblock = 0
    remaining = 2 + tlen + (2 if qos else 0) + pblock + len(payload)
    buf = start_packet(into, remaining, at)
    buf[at] = 0x30 | flags
    if remaining < 128:
        buf[at + 1] = remaining
        pos = at + 2
    else:
        pos = put_varint(buf, at + 1, remaining)
    buf[pos] = tlen >> 8
    buf[pos + 1] = tlen & 0xFF
    pos += 2
    buf[pos : pos + tlen] = topic
    pos += tlen
    if qos:
        buf[pos] = pid >> 8
        buf[pos + 1] = pid & 0xFF
        pos += 2
    if pblock == 1:
        buf[pos] = 0  # no properties
        pos += 1
    elif alias:
        buf[pos] = 3
        buf[pos + 1] = TOPIC_ALIAS
        buf[pos + 2] = alias >> 8
        buf[pos + 3] = alias & 0xFF
        pos += 4
    elif pblock:
        pos = put_props(buf, pos, props, psize)
    end = pos + len(payload)
    buf[pos:end] = payload
    return finish_packet(into, buf, end)


def encode_ack(
    ptype: int,
    pid: int,
    reason: int = SUCCESS,
    version: int = V311,
    props: "Props" = None,
    into: bytearray | None = None,
    at: int = 0,
) -> "Any":
    """PUBACK, PUBREC, PUBREL or PUBCOMP. In MQTT 5.0 the short form (packet id only) is used when the reason is
    Success with no properties (MQTT 5.0 section 3.4.2.1)."""
    if ptype < PUBACK or ptype > PUBCOMP:
        raise refused(_R_ACK_TYPE, ptype)
    check_pid(pid)
    if version == V5:
        check_reason(reason, _REL_REASONS if ptype >= PUBREL else _PUB_REASONS)
        if props:
            remaining = 3 + props_block_size(version, props)
        elif reason:
            remaining = 3
        else:
            remaining = 2
    elif reason or props:
        raise refused(_R_REASON_NEEDS_V5)
    else:
        remaining = 2
    # PUBREL's reserved flags are 0010 [MQTT-3.6.1-1]; the others are 0000 [MQTT-2.2.2-1].
    buf = start_packet(into, remaining, at)
    pos = put_header(buf, (ptype << 4) | (0x02 if ptype == PUBREL else 0), remaining, at)
    pos = put_u16(buf, pos, pid)
    if remaining > 2:
        buf[pos] = reason
        pos += 1
        if remaining > 3:
            pos = put_props(buf, pos, props, props_size(props))
    return finish_packet(into, buf, pos)


def check_reason(reason, allowed):
    if reason not in allowed:
        raise refused(_R_REASON_HERE, reason, PROTOCOL_ERROR)


def encode_connect(
    client_id: "Text",
    version: int = V311,
    keepalive: int = 60,
    clean: bool = True,
    username: "Text | None" = None,
    password: "Bytes | None" = None,
    will_topic: "Text | None" = None,
    will_payload: "Bytes" = b"",
    will_qos: int = 0,
    will_retain: bool = False,
    will_props: "Props" = None,
    props: "Props" = None,
    into: bytearray | None = None,
) -> "Any":
    if version == V31:
        name = b"MQIsdp"
    elif version == V311 or version == V5:
        name = b"MQTT"
    else:
        raise refused(_R_LEVEL, version, UNSUPPORTED_PROTOCOL_VERSION)
    if version == V311 and password is not None and username is None:
        raise refused(_R_PASSWORD_USER)  # [MQTT-3.1.2-22]
    if will_qos not in (0, 1, 2):
        raise refused(_R_WILL_QOS)  # [MQTT-3.1.2-14]
    cid = _utf8(client_id)
    flags = 0x02 if clean else 0
    remaining = 2 + len(name) + 1 + 1 + 2 + props_block_size(version, props) + 2 + len(cid)
    if will_topic is not None:
        wtopic = check_topic(will_topic)
        flags |= 0x04 | (will_qos << 3) | (0x20 if will_retain else 0)
        remaining += props_block_size(version, will_props) + 2 + len(wtopic) + 2 + len(will_payload)
    elif will_qos or will_retain or will_props:
        raise refused(_R_WILL_TOPIC)  # [MQTT-3.1.2-11]
    if username is not None:
        user = _utf8(username)
        flags |= 0x80
        remaining += 2 + len(user)
    if password is not None:
        flags |= 0x40
        remaining += 2 + len(password)
    buf = start_packet(into, remaining)
    pos = put_header(buf, CONNECT << 4, remaining)
    pos = _put_field(buf, pos, name)
    buf[pos] = version
    buf[pos + 1] = flags
    pos = put_u16(buf, pos + 2, keepalive)
    if version == V5:
        pos = put_props(buf, pos, props, props_size(props))
    pos = _put_field(buf, pos, cid)
    if will_topic is not None:
        if version == V5:
            pos = put_props(buf, pos, will_props, props_size(will_props))
        pos = _put_field(buf, _put_field(buf, pos, wtopic), will_payload)
    if username is not None:
        pos = _put_field(buf, pos, user)
    if password is not None:
        pos = _put_field(buf, pos, password)
    return finish_packet(into, buf, pos)


def encode_subscribe(
    pid: int, topics: list, version: int = V311, props: "Props" = None, into: bytearray | None = None
) -> "Any":
    """topics: list of (filter, options); options is the QoS in 3.1/3.1.1 and the full 5.0 options byte."""
    check_pid(pid)
    if not topics:
        raise refused(_R_SUBSCRIBE_EMPTY)  # [MQTT-3.8.3-3]
    encoded = []
    remaining = 2 + props_block_size(version, props)
    for flt, options in topics:
        data = _utf8(flt)
        check_filter(data)
        check_sub_options(options, version)
        encoded.append((data, options))
        remaining += 3 + len(data)
    buf = start_packet(into, remaining)
    pos = put_header(buf, (SUBSCRIBE << 4) | 0x02, remaining)  # flags 0010 [MQTT-3.8.1-1]
    pos = put_u16(buf, pos, pid)
    if version == V5:
        pos = put_props(buf, pos, props, props_size(props))
    for data, options in encoded:
        pos = _put_field(buf, pos, data)
        buf[pos] = options
        pos += 1
    return finish_packet(into, buf, pos)


def encode_unsubscribe(
    pid: int, filters: list, version: int = V311, props: "Props" = None, into: bytearray | None = None
) -> "Any":
    check_pid(pid)
    if not filters:
        raise refused(_R_UNSUBSCRIBE_EMPTY)  # [MQTT-3.10.3-2]
    encoded = [_utf8(f) for f in filters]
    for data in encoded:
        check_filter(data)
    remaining = 2 + props_block_size(version, props) + sum(2 + len(d) for d in encoded)
    buf = start_packet(into, remaining)
    pos = put_header(buf, (UNSUBSCRIBE << 4) | 0x02, remaining)  # flags 0010 [MQTT-3.10.1-1]
    pos = put_u16(buf, pos, pid)
    if version == V5:
        pos = put_props(buf, pos, props, props_size(props))
    for data in encoded:
        pos = _put_field(buf, pos, data)
    return finish_packet(into, buf, pos)


def encode_empty(ptype: int, into: bytearray | None = None) -> "Any":
    """PINGREQ, PINGRESP, and the 3.1/3.1.1 DISCONNECT: a fixed header with Remaining Length 0."""
    if ptype not in (PINGREQ, PINGRESP, DISCONNECT):
        raise refused(_R_HAS_BODY, ptype)
    buf = start_packet(into, 0)
    pos = put_header(buf, ptype << 4, 0)
    return finish_packet(into, buf, pos)


def encode_disconnect(
    reason: int = SUCCESS, version: int = V311, props: "Props" = None, into: bytearray | None = None
) -> "Any":
    return encode_reason_only(DISCONNECT, _DISCONNECT_REASONS, reason, version, props, into)


def encode_reason_only(ptype, allowed, reason, version, props, into):
    # DISCONNECT and AUTH may drop the reason and properties when the reason is Success and there are none
    # (MQTT 5.0 sections 3.14.2.1 and 3.15.2.1).
    if version != V5:
        if reason or props:
            raise refused(_R_REASON_NEEDS_V5)
        return encode_empty(ptype, into)
    check_reason(reason, allowed)
    remaining = 0
    if props:
        remaining = 1 + props_block_size(version, props)
    elif reason:
        remaining = 1
    buf = start_packet(into, remaining)
    pos = put_header(buf, ptype << 4, remaining)
    if remaining:
        buf[pos] = reason
        pos += 1
        if props:
            pos = put_props(buf, pos, props, props_size(props))
    return finish_packet(into, buf, pos)


# ---------------------------------------------------------------------------------------------------------
# Validation shared by both directions.


def check_filter(data):
    if not data:
        raise refused(_R_FILTER_EMPTY)  # [MQTT-4.7.3-1]
    if b"\x00" in data:
        raise refused(_R_FILTER_NUL)  # [MQTT-1.5.3-2]
    levels = data.split(b"/")
    last = len(levels) - 1
    for i, level in enumerate(levels):
        if b"#" in level and (level != b"#" or i != last):
            raise refused(_R_FILTER_HASH)  # [MQTT-4.7.1-2]
        if b"+" in level and level != b"+":
            raise refused(_R_FILTER_PLUS)  # [MQTT-4.7.1-3]


def check_sub_options(options, version):
    if options & 0x03 == 0x03:
        raise refused(_R_SUB_QOS3)  # [MQTT-3.8.3-4]
    # 3.1.1 reserves the upper six bits [MQTT-3-8.3-4]; 5.0 reserves bits 6-7 and Retain Handling 3.
    if version != V5 and options & 0xFC:
        raise refused(_R_SUB_RESERVED)  # [MQTT-3-8.3-4]
    if version == V5 and (options & 0xC0 or options & 0x30 == 0x30):
        raise refused(_R_SUB_RESERVED_V5)  # (MQTT 5.0 3.8.3.1)


# ---------------------------------------------------------------------------------------------------------
# Primitive readers over a body (bytes or memoryview). They check bounds and raise CodecError.


def u16_at(body, pos):
    if pos + 2 > len(body):
        raise refused(_R_END_IN_U16)
    return (body[pos] << 8) | body[pos + 1]


def _u32_at(body, pos):
    if pos + 4 > len(body):
        raise refused(_R_END_IN_U32)
    return (body[pos] << 24) | (body[pos + 1] << 16) | (body[pos + 2] << 8) | body[pos + 3]


def varint_at(body, pos):
    value = 0
    shift = 0
    for i in range(4):
        if pos + i >= len(body):
            raise refused(_R_END_IN_VARINT)
        byte = body[pos + i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos + i + 1
        shift += 7
    raise refused(_R_VARINT_LONG)


def field_at(body, pos):
    """A two-byte-length-prefixed field as a memoryview slice, and the position after it."""
    n = u16_at(body, pos)
    end = pos + 2 + n
    if end > len(body):
        raise refused(_R_FIELD_PAST_END)
    return memoryview(body)[pos + 2 : end], end


def str_at(body, pos):
    raw, pos = field_at(body, pos)
    return decode_utf8(raw), pos


def decode_utf8(raw):
    try:
        text = str(raw, "utf-8")
    except UnicodeError:
        raise refused(_R_UTF8_INVALID)  # [MQTT-1.5.3-1]
    if "\x00" in text:
        raise refused(_R_UTF8_NUL)  # [MQTT-1.5.3-2]
    return text


def props_at(body, pos, ptype):
    """Decode a properties block into {id: value}; User Property and Subscription Identifier become lists."""
    size, pos = varint_at(body, pos)
    end = pos + size
    if end > len(body):
        raise refused(_R_PROPS_PAST_END)
    props: dict = {}
    mask = 1 << ptype
    while pos < end:
        pid, pos = varint_at(body, pos)
        entry = _prop(pid)
        kind = entry >> 16
        if not entry & mask:
            raise refused(_R_PROP_NOT_ALLOWED, (pid, ptype), PROTOCOL_ERROR)
        if kind == _P_BYTE:
            if pos >= end:
                raise refused(_R_END_IN_PROP)
            value = body[pos]
            pos += 1
        elif kind == _P_U16:
            value = u16_at(body, pos)
            pos += 2
        elif kind == _P_U32:
            value = _u32_at(body, pos)
            pos += 4
        elif kind == _P_VARINT:
            value, pos = varint_at(body, pos)
            if value == 0:
                raise refused(_R_SUBSCRIPTION_ID_0, None, PROTOCOL_ERROR)  # (MQTT 5.0 3.3.2.3.8)
        elif kind == _P_STR:
            value, pos = str_at(body, pos)
        elif kind == _P_BIN:
            raw, pos = field_at(body, pos)
            value = bytes(raw)
        else:
            key, pos = str_at(body, pos)
            text, pos = str_at(body, pos)
            value = (key, text)
        if pos > end:
            raise refused(_R_PROP_PAST_LENGTH)
        if _is_repeatable(pid):
            props.setdefault(pid, []).append(value)
        elif pid in props:
            raise refused(_R_PROP_TWICE, pid, PROTOCOL_ERROR)
        else:
            props[pid] = value
    return props, end


def expect_end(body, pos):
    if pos != len(body):
        raise refused(_R_TRAILING_BYTES, (len(body) - pos))


def _pid_at(body, pos):
    pid = u16_at(body, pos)
    if pid == 0:
        raise refused(_R_PID_ZERO)  # [MQTT-2.3.1-1]
    return pid


# ---------------------------------------------------------------------------------------------------------
# Body decoders. They return tuples (cheap on the board) and raise CodecError.


def check_flags(ptype, flags, version):
    """Fixed-header flag rules [MQTT-2.2.2-1] [MQTT-2.2.2-2], checked before the body is read."""
    if ptype == PUBLISH:
        if flags & 0x06 == 0x06:
            raise refused(_R_PUBLISH_QOS3)  # [MQTT-3.3.1-4]
        if flags & 0x08 and not flags & 0x06:
            raise refused(_R_PUBLISH_DUP_QOS0)  # [MQTT-3.3.1-2]
    elif ptype == PUBREL or ptype == SUBSCRIBE or ptype == UNSUBSCRIBE:
        # MQTT 3.1 and the 1999 draft leave PUBREL's flags unused ("xxxx"); their SUBSCRIBE and UNSUBSCRIBE
        # carried QoS 1 in the same bits, so the strict rule only holds from 3.1.1 on.
        if flags != 0x02 and version != V31:
            raise refused(_R_FLAGS_0010, ptype)  # [MQTT-3.6.1-1]
    elif flags and version != V31:
        raise refused(_R_FLAGS_0000, ptype)  # [MQTT-2.2.2-1]
    if ptype == AUTH and version != V5:
        raise refused(_R_TYPE_15)
    if ptype == 0:
        raise refused(_R_TYPE_0)


def decode_publish(flags: int, body: "Bytes", version: int = V311) -> "tuple[str, int, memoryview, Props]":
    """-> (topic, packet id (0 at QoS 0), payload memoryview, properties or None). qos/dup/retain are in flags."""
    topic_raw, pos = field_at(body, 0)
    topic = decode_utf8(topic_raw)
    qos = (flags >> 1) & 0x03
    pid = 0
    if qos:
        pid = _pid_at(body, pos)  # non-zero when QoS > 0 [MQTT-2.3.1-1]
        pos += 2
    props = None
    if version == V5:
        props, pos = props_at(body, pos, PUBLISH)
    if not topic and not (props and TOPIC_ALIAS in props):
        raise refused(_R_PUBLISH_NO_TOPIC)  # [MQTT-3.3.2-1]
    if "+" in topic or "#" in topic:
        raise refused(_R_PUBLISH_WILDCARD)  # [MQTT-3.3.2-2]
    return topic, pid, memoryview(body)[pos:], props


def check_ack(ptype: int, body: "Bytes", version: int = V311) -> int:
    """Validate a PUBACK/PUBREC/PUBREL/PUBCOMP body and return its packet id; ack_reason() gives the reason.
    Allocates nothing unless the ack carries properties (the board's hot path). MQTT 5.0 allows lengths 2
    (Success), 3 (reason) and 4+ (reason and properties); 3.1 and 3.1.1 only 2."""
    pid = _pid_at(body, 0)
    n = len(body)
    if version != V5:
        if n != 2:
            raise refused(_R_ACK_LENGTH, n)
        return pid
    if n > 2:
        reason = body[2]
        if reason not in (_REL_REASONS if ptype >= PUBREL else _PUB_REASONS):
            raise refused(_R_REASON_NOT_ALLOWED, (reason, ptype), PROTOCOL_ERROR)
        if n > 3:
            expect_end(body, props_at(body, 3, ptype)[1])
    return pid


def ack_reason(body):
    """The reason code of a checked acknowledgement: Success when the short form omits it."""
    return body[2] if len(body) > 2 else SUCCESS


def decode_connack(body, version=V311):
    """-> (session present, return/reason code, properties or None)."""
    if len(body) < 2:
        raise refused(_R_CONNACK_SHORT)
    flags = body[0]
    code = body[1]
    if version == V5:
        if flags & 0xFE:
            raise refused(_R_CONNACK_FLAGS)  # [MQTT-3.2.2-1]
        if code not in CONNACK_REASONS:
            raise refused(_R_CONNACK_REASON, code, PROTOCOL_ERROR)
        props, pos = props_at(body, 2, CONNACK)
        expect_end(body, pos)
        return bool(flags & 1), code, props
    expect_end(body, 2)
    if version == V311 and flags & 0xFE:
        raise refused(_R_CONNACK_FLAGS)  # [MQTT-3.2.2-1]
    if code > 5:
        raise refused(_R_CONNACK_RETURN, code)
    # MQTT 3.1 reserves the whole first byte: there is no session-present flag.
    return version == V311 and bool(flags & 1), code, None


def pid_and_props(body, ptype, version):
    """The packet id and, in MQTT 5.0, the properties that open SUBSCRIBE, SUBACK, UNSUBSCRIBE and UNSUBACK:
    -> (packet id, properties or None, position after them)."""
    pid = _pid_at(body, 0)
    if version != V5:
        return pid, None, 2
    props, pos = props_at(body, 2, ptype)
    return pid, props, pos


def decode_suback(body, version=V311):
    """-> (packet id, [return codes], properties or None)."""
    pid, props, pos = pid_and_props(body, SUBACK, version)
    codes = list(bytes(memoryview(body)[pos:]))
    if not codes:
        raise refused(_R_SUBACK_EMPTY)
    for code in codes:
        if (version == V5 and code not in SUBACK_REASONS) or (version != V5 and code not in (0, 1, 2, 0x80)):
            raise refused(_R_SUBACK_CODE, code, PROTOCOL_ERROR)  # [MQTT-3.9.3-2]
    return pid, codes, props


def decode_unsuback(body, version=V311):
    """-> (packet id, [reason codes] (empty before 5.0), properties or None)."""
    pid, props, pos = pid_and_props(body, UNSUBACK, version)
    if version != V5:
        expect_end(body, pos)
        return pid, [], None
    codes = list(bytes(memoryview(body)[pos:]))
    for code in codes:
        if code not in UNSUBACK_REASONS:
            raise refused(_R_UNSUBACK_REASON, code, PROTOCOL_ERROR)
    return pid, codes, props


def decode_reason_only(ptype, body, version=V311):
    """DISCONNECT or AUTH -> (reason code, properties or None); an empty body means Success."""
    if version != V5:
        expect_end(body, 0)
        return SUCCESS, None
    if not len(body):
        return SUCCESS, None
    reason = body[0]
    if reason not in (AUTH_REASONS if ptype == AUTH else _DISCONNECT_REASONS):
        raise refused(_R_REASON_NOT_ALLOWED, (reason, ptype), PROTOCOL_ERROR)
    props = None
    if len(body) > 1:
        props, pos = props_at(body, 1, ptype)
        expect_end(body, pos)
    return reason, props


# ---------------------------------------------------------------------------------------------------------
# Incremental stream decoder.

_WANT_TYPE = const(0)
_WANT_LENGTH = const(1)
_WANT_BODY = const(2)
_FAILED = const(3)
_SMALL_BODY = const(5)  # bodies of acks (2 to 4 bytes) and PINGRESP (0): views made once, none per packet
_BYTE_COPY = const(16)  # chunks shorter than this are copied byte by byte: a slice would allocate


class StreamDecoder:
    """Cuts whole packets out of a byte stream delivered in chunks of any size.

    feed(data, start) consumes bytes up to the end of one packet and returns how many it took; when a packet is
    complete, `ready` is True and `ptype`, `flags` and `body` (a memoryview into the decoder's own buffer, valid
    until the next feed) describe it. The buffer is preallocated (`capacity`) and grows only up to
    `max_packet_size`, so a hostile Remaining Length cannot make it allocate without bound. Fixed-header flags
    are checked here, before any body byte is buffered. After an error every feed raises it again: the
    connection has to be closed.
    """

    def __init__(self, version: int = V311, max_packet_size: int = 65536, capacity: int | None = None) -> None:
        self.version = version
        self.max_packet_size = max_packet_size
        self._use(bytearray(capacity if capacity is not None else min(max_packet_size, 1024)))
        self.restart()

    def restart(self):
        """Forget any partial packet and any error: a new connection starts (the buffer is kept)."""
        self._reset()
        self._error = None

    def _use(self, buf):
        self._buf = buf
        self._mv = memoryview(buf)
        # Views of the first n bytes for small bodies, made once: acks and pings then cost no allocation.
        self._small = [self._mv[0:n] for n in range(_SMALL_BODY)]

    def _reset(self):
        self._state = _WANT_TYPE
        self.ready = False
        self.ptype = 0
        self.flags = 0
        self._length = 0
        self._shift = 0
        self._header = 0
        self._got = 0
        self.body = self._small[0]

    def feed(self, data: "Bytes", start: int = 0, end: int = -1) -> int:
        """Take bytes of data[start:end] (end -1: to its end, as a slice would; given, so that a caller's receive
        buffer needs no slice object per read) up to the end of one packet; returns how many were taken."""
        if self._error is not None:
            raise self._error
        if self.ready:
            self._reset()
        try:
            return self._feed(data, start, len(data) if end < 0 else end)
        except CodecError as exc:
            self._state = _FAILED
            self._error = exc
            raise

    def short_ack(self, data, pos, end):
        """The PUBACK, PUBREC or PUBCOMP at data[pos:] when it is whole there, between packets, and a success
        without properties: its 2-byte form (a packet id only: 3.1.1, or Success in 5.0 section 3.4.2.1), or in
        5.0 its 3-byte form with Success or, for PUBACK and PUBREC, No matching subscribers (0x10: what
        Mosquitto answers a message no one subscribes to). Returns reason << 24 | remaining length << 20 | packet
        type << 16 | packet id, read without a feed; 0 for anything else (feed() then takes it, and refuses what
        is wrong, a packet id 0 included). A publisher's acknowledgements are all this: their path stays short."""
        if pos + 4 > end or not (self.ready or self._state == _WANT_TYPE):
            return 0
        first = data[pos]
        size = data[pos + 1]
        # The reason, or for any other length a value no reason has: (size - 2) << 8 (0 for the 2-byte form).
        reason = data[pos + 4] if size == 3 and pos + 4 < end and self.version == V5 else (size - 2) << 8
        # flags 0000 [MQTT-2.2.2-1]; success only (PUBCOMP's only Success): refusals and anything else go
        # through feed() and check_ack(), which also refuses what an acknowledgement may not carry.
        if first != 0x40 and first != 0x50 and first != 0x70 or reason and (reason != 0x10 or first == 0x70):
            return 0
        pid = (data[pos + 2] << 8) | data[pos + 3]
        return reason << 24 | size << 20 | (first >> 4) << 16 | pid if pid else 0

    def _feed(self, data, start, end):
        pos = start
        while pos < end:
            state = self._state
            if state == _WANT_TYPE:
                first = data[pos]
                pos += 1
                self.ptype = first >> 4
                self.flags = first & 0x0F
                check_flags(self.ptype, self.flags, self.version)
                self._state = _WANT_LENGTH
            elif state == _WANT_LENGTH:
                byte = data[pos]
                pos += 1
                self._length |= (byte & 0x7F) << self._shift
                self._shift += 7
                self._header += 1
                if byte & 0x80:
                    if self._header == 4:
                        raise refused(_R_LENGTH_LONG)  # (MQTT 3.1.1 section 2.2.3)
                    continue
                if 1 + self._header + self._length > self.max_packet_size:
                    size = 1 + self._header + self._length
                    raise refused(_R_TOO_LARGE, (size, self.max_packet_size), PACKET_TOO_LARGE)
                if self._length > len(self._buf):
                    self._use(bytearray(self._length))
                self._state = _WANT_BODY
                if self._length == 0:
                    return self._complete(pos, start)
            else:
                take = min(self._length - self._got, end - pos)
                got = self._got
                if take < _BYTE_COPY:
                    # Byte by byte: slicing would allocate, and small bodies (acks) are the hot path.
                    buf = self._buf
                    for i in range(take):
                        buf[got + i] = data[pos + i]
                else:
                    self._mv[got : got + take] = memoryview(data)[pos : pos + take]
                self._got = got + take
                pos += take
                if self._got == self._length:
                    return self._complete(pos, start)
        return pos - start

    def _complete(self, pos, start):
        self.ready = True
        n = self._length
        self.body = self._small[n] if n < _SMALL_BODY else self._mv[0:n]
        return pos - start
