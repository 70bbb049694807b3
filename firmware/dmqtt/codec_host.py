# The rest of the MQTT codec: the packets a broker sends or decodes (CONNACK, SUBACK, UNSUBACK, AUTH out;
# CONNECT, SUBSCRIBE, UNSUBSCRIBE in), encode_publish with every argument checked, and whole-packet decoding
# into Packet objects. Same rules as codec.py (sans-I/O, runs on MicroPython and CPython, tested on both by the
# shared vectors); kept apart so the board, a client, never loads it (firmware/manifest.py leaves it out). The
# host and the tests' scripted broker import this module: it re-exports codec.

from dmqtt import codec
from dmqtt.codec import *  # noqa: F403  (re-exported: host code sees the whole codec in one namespace)
from dmqtt.errors import CodecError

if False:  # type checkers only: MicroPython has no typing module
    from typing import Any, Iterator

    from dmqtt.interfaces import Bytes, Props, Text


def malformed(why):
    return CodecError(why, codec.MALFORMED_PACKET)


def protocol_error(why):
    return CodecError(why, codec.PROTOCOL_ERROR)


def encode_publish(
    topic: "Text",
    payload: "Bytes",
    qos: int = 0,
    pid: int = 0,
    retain: bool = False,
    dup: bool = False,
    version: int = codec.V311,
    props: "Props" = None,
    into: "bytearray | None" = None,
) -> "Any":
    """A PUBLISH with every argument checked (the board checks its topic once and uses codec.write_publish)."""
    if qos not in (0, 1, 2):
        raise CodecError("QoS must be 0, 1 or 2 [MQTT-3.3.1-4]")
    if qos == 0 and dup:
        raise CodecError("DUP must be 0 on QoS 0 [MQTT-3.3.1-2]")
    if qos:
        codec.check_pid(pid)
    aliased = version == codec.V5 and props is not None and codec.TOPIC_ALIAS in props
    data = codec.check_topic(topic, aliased)
    flags = qos << codec.QOS_SHIFT | (codec.RETAIN_FLAG if retain else 0) | (codec.DUP_FLAG if dup else 0)
    return codec.write_publish(data, payload, flags, pid, version, props, into)


def decode_ack(ptype, body, version=codec.V311):
    """PUBACK/PUBREC/PUBREL/PUBCOMP -> (packet id, reason code, properties or None)."""
    pid = codec.check_ack(ptype, body, version)
    props = codec.props_at(body, 3, ptype)[0] if version == codec.V5 and len(body) > 3 else None
    return pid, codec.ack_reason(body), props


def encode_connack(
    session_present: bool,
    code: int = 0,
    version: int = codec.V311,
    props: "dict | None" = None,
    into: "bytearray | None" = None,
) -> "Any":
    if version == codec.V5:
        codec.check_reason(code, codec.CONNACK_REASONS)
    elif not 0 <= code <= 5:
        raise CodecError("CONNACK return code must be 0..5 in 3.1/3.1.1")
    remaining = 2 + codec.props_block_size(version, props)
    buf = codec.start_packet(into, remaining)
    pos = codec.put_header(buf, codec.CONNACK << 4, remaining)
    # MQTT 3.1 has no session-present flag: its first variable-header byte is reserved.
    buf[pos] = 1 if (session_present and version != codec.V31) else 0
    buf[pos + 1] = code
    pos += 2
    if version == codec.V5:
        pos = codec.put_props(buf, pos, props, codec.props_size(props))
    return codec.finish_packet(into, buf, pos)


def encode_suback(pid, codes, version=codec.V311, props=None, into=None):
    codec.check_pid(pid)
    for code in codes:
        if version == codec.V5:
            codec.check_reason(code, codec.SUBACK_REASONS)
        elif code not in (0, 1, 2, 0x80):
            raise CodecError("SUBACK return code 0x%02x is not allowed [MQTT-3.9.3-2]" % code)
    return _encode_pid_props_codes(codec.SUBACK, pid, codes, version, props, into)


def encode_unsuback(pid, codes=(), version=codec.V311, props=None, into=None):
    """MQTT 3.1/3.1.1 UNSUBACK carries only the packet id; 5.0 adds properties and a reason per filter."""
    codec.check_pid(pid)
    if version == codec.V5:
        for code in codes:
            codec.check_reason(code, codec.UNSUBACK_REASONS)
    elif codes or props:
        raise CodecError("UNSUBACK reason codes need MQTT 5.0")
    return _encode_pid_props_codes(codec.UNSUBACK, pid, codes, version, props, into)


def _encode_pid_props_codes(ptype, pid, codes, version, props, into):
    """SUBACK and UNSUBACK: packet id, 5.0 properties, one code per filter (none in a 3.1.1 UNSUBACK); the
    encoding side of codec.pid_and_props."""
    remaining = 2 + codec.props_block_size(version, props) + len(codes)
    buf = codec.start_packet(into, remaining)
    pos = codec.put_u16(buf, codec.put_header(buf, ptype << 4, remaining), pid)
    if version == codec.V5:
        pos = codec.put_props(buf, pos, props, codec.props_size(props))
    pos = codec.put_raw(buf, pos, bytes(codes))
    return codec.finish_packet(into, buf, pos)


def encode_auth(reason=codec.SUCCESS, props=None, into=None):
    return codec.encode_reason_only(codec.AUTH, codec.AUTH_REASONS, reason, codec.V5, props, into)


def decode_connect(body):
    """-> dict with version, client_id, keepalive, clean, username, password, will_* and props."""
    name, pos = codec.str_at(body, 0)
    if pos >= len(body):
        raise malformed("CONNECT ends after the protocol name")
    version = body[pos]
    if not ((name == "MQTT" and version in (codec.V311, codec.V5)) or (name == "MQIsdp" and version == codec.V31)):
        raise CodecError("unsupported protocol %r level %d" % (name, version), codec.UNSUPPORTED_PROTOCOL_VERSION)
    if pos + 1 >= len(body):
        raise malformed("CONNECT ends before its flags")
    flags = body[pos + 1]
    if flags & 0x01:
        raise malformed("CONNECT reserved flag set [MQTT-3.1.2-3]")
    will = flags & 0x04
    will_qos = (flags >> 3) & 0x03
    if will_qos == 3 or (not will and (will_qos or flags & 0x20)):
        raise malformed("inconsistent will flags [MQTT-3.1.2-11] [MQTT-3.1.2-14]")
    if version == codec.V311 and flags & 0x40 and not flags & 0x80:
        raise malformed("password without user name [MQTT-3.1.2-22]")
    out = {
        "version": version,
        "clean": bool(flags & 0x02),
        "keepalive": codec.u16_at(body, pos + 2),
        "props": None,
        "will_topic": None,
        "will_payload": None,
        "will_qos": will_qos,
        "will_retain": bool(flags & 0x20),
        "will_props": None,
        "username": None,
        "password": None,
    }
    pos += 4
    if version == codec.V5:
        out["props"], pos = codec.props_at(body, pos, codec.CONNECT)
    out["client_id"], pos = codec.str_at(body, pos)
    if will:
        if version == codec.V5:
            out["will_props"], pos = codec.props_at(body, pos, 0)
        out["will_topic"], pos = codec.str_at(body, pos)
        raw, pos = codec.field_at(body, pos)
        out["will_payload"] = bytes(raw)
    if flags & 0x80:
        out["username"], pos = codec.str_at(body, pos)
    if flags & 0x40:
        raw, pos = codec.field_at(body, pos)
        out["password"] = bytes(raw)
    codec.expect_end(body, pos)
    return out


def decode_subscribe(body, version=codec.V311):
    """-> (packet id, [(filter, options)], properties or None)."""
    pid, props, pos = codec.pid_and_props(body, codec.SUBSCRIBE, version)
    topics = []
    while pos < len(body):
        raw, pos = codec.field_at(body, pos)
        if pos >= len(body):
            raise malformed("SUBSCRIBE ends before the subscription options")
        options = body[pos]
        pos += 1
        flt = codec.decode_utf8(raw)
        try:
            codec.check_filter(bytes(raw))
        except CodecError as exc:
            raise malformed(exc.reason)
        codec.check_sub_options(options, version)
        topics.append((flt, options))
    if not topics:
        raise protocol_error("SUBSCRIBE without a topic filter [MQTT-3.8.3-3]")
    return pid, topics, props


def decode_unsubscribe(body, version=codec.V311):
    """-> (packet id, [filters], properties or None)."""
    pid, props, pos = codec.pid_and_props(body, codec.UNSUBSCRIBE, version)
    filters = []
    while pos < len(body):
        raw, pos = codec.field_at(body, pos)
        filters.append(codec.decode_utf8(raw))
    if not filters:
        raise protocol_error("UNSUBSCRIBE without a topic filter [MQTT-3.10.3-2]")
    return pid, filters, props


class Packet:
    """A decoded packet: `type`, `flags` and the fields of its kind as attributes."""

    def __init__(self, ptype: int, flags: int, fields: dict) -> None:
        self.type = ptype
        self.flags = flags
        self.fields = fields
        for key in fields:
            setattr(self, key, fields[key])

    def __getattr__(self, name: str) -> "Any":
        """Only for names the packet's kind does not have (the fields are attributes already)."""
        raise AttributeError("%s has no field %r" % (NAMES[self.type], name))

    def __repr__(self):
        return "%s%r" % (NAMES[self.type], self.fields)


def decode(ptype: int, flags: int, body: "bytes | bytearray | memoryview", version: int = codec.V311) -> Packet:
    """Decode a whole packet body into a Packet. Copies what it keeps out of the shared buffer."""
    if ptype == codec.PUBLISH:
        topic, pid, payload, props = codec.decode_publish(flags, body, version)
        fields = {
            "topic": topic,
            "pid": pid,
            "payload": bytes(payload),
            "qos": (flags >> 1) & 3,
            "dup": bool(flags & 8),
            "retain": bool(flags & 1),
            "props": props,
        }
    elif codec.PUBACK <= ptype <= codec.PUBCOMP:
        pid, reason, props = decode_ack(ptype, body, version)
        fields = {"pid": pid, "reason": reason, "props": props}
    elif ptype == codec.CONNECT:
        fields = decode_connect(body)
    elif ptype == codec.CONNACK:
        present, code, props = codec.decode_connack(body, version)
        fields = {"session_present": present, "reason": code, "props": props}
    elif ptype == codec.SUBSCRIBE:
        pid, topics, props = decode_subscribe(body, version)
        fields = {"pid": pid, "topics": topics, "props": props}
    elif ptype == codec.SUBACK or ptype == codec.UNSUBACK:
        pid, codes, props = (codec.decode_suback if ptype == codec.SUBACK else codec.decode_unsuback)(body, version)
        fields = {"pid": pid, "codes": codes, "props": props}
    elif ptype == codec.UNSUBSCRIBE:
        pid, filters, props = decode_unsubscribe(body, version)
        fields = {"pid": pid, "filters": filters, "props": props}
    elif ptype == codec.DISCONNECT or ptype == codec.AUTH:
        reason, props = codec.decode_reason_only(ptype, body, version)
        fields = {"reason": reason, "props": props}
    else:  # PINGREQ, PINGRESP
        codec.expect_end(body, 0)
        fields = {}
    return Packet(ptype, flags, fields)


class PacketDecoder(codec.StreamDecoder):
    """codec.StreamDecoder with a generator of decoded Packet objects (host convenience)."""

    def packets(self, data: bytes | bytearray | memoryview) -> "Iterator[Packet]":
        """Feed a whole chunk and yield every packet it completes, decoded (host convenience)."""
        pos = 0
        while pos < len(data):
            pos += self.feed(data, pos)
            if self.ready:
                yield decode(self.ptype, self.flags, self.body, self.version)


# Packet names, for messages.
NAMES = (
    "RESERVED",
    "CONNECT",
    "CONNACK",
    "PUBLISH",
    "PUBACK",
    "PUBREC",
    "PUBREL",
    "PUBCOMP",
    "SUBSCRIBE",
    "SUBACK",
    "UNSUBSCRIBE",
    "UNSUBACK",
    "PINGREQ",
    "PINGRESP",
    "DISCONNECT",
    "AUTH",
)
