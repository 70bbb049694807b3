# The rest of the MQTT codec: the packets a broker sends or decodes (CONNACK, SUBACK, UNSUBACK, AUTH out;
# CONNECT, SUBSCRIBE, UNSUBSCRIBE in) and whole-packet decoding into Packet objects. Same rules as codec.py
# (sans-I/O, runs on MicroPython and CPython, tested on both by the shared vectors); kept apart so the board,
# a client, never loads it. The host and the tests' scripted broker import this module: it re-exports codec.

from dmqtt.codec import *  # noqa: F401,F403  (the whole codec, one namespace for host code)
from dmqtt.codec import (
    _AUTH_REASONS,
    _CONNACK_REASONS,
    _SUBACK_REASONS,
    _UNSUBACK_REASONS,
    _check_filter,
    _check_pid,
    _check_reason,
    _check_sub_options,
    _decode_utf8,
    _encode_reason_only,
    _expect_end,
    _field_at,
    _finish,
    _header,
    _malformed,
    _pid_and_props,
    _props_at,
    _props_block_size,
    _props_size,
    _protocol_error,
    _put_props,
    _put_raw,
    _put_u16,
    _start,
    _str_at,
    _u16_at,
)
from dmqtt.codec import StreamDecoder as _StreamDecoder


def encode_connack(session_present, code=0, version=V311, props=None, into=None):
    if version == V5:
        _check_reason(code, _CONNACK_REASONS)
    elif not 0 <= code <= 5:
        raise CodecError("CONNACK return code must be 0..5 in 3.1/3.1.1")
    remaining = 2 + _props_block_size(version, props)
    buf = _start(into, remaining)
    pos = _header(buf, CONNACK << 4, remaining)
    # MQTT 3.1 has no session-present flag: its first variable-header byte is reserved.
    buf[pos] = 1 if (session_present and version != V31) else 0
    buf[pos + 1] = code
    pos += 2
    if version == V5:
        pos = _put_props(buf, pos, props, _props_size(props))
    return _finish(into, buf, pos)


def encode_suback(pid, codes, version=V311, props=None, into=None):
    _check_pid(pid)
    for code in codes:
        if version == V5:
            _check_reason(code, _SUBACK_REASONS)
        elif code not in (0, 1, 2, 0x80):
            raise CodecError("SUBACK return code 0x%02x is not allowed [MQTT-3.9.3-2]" % code)
    return _encode_pid_props_codes(SUBACK, pid, codes, version, props, into)


def encode_unsuback(pid, codes=(), version=V311, props=None, into=None):
    """MQTT 3.1/3.1.1 UNSUBACK carries only the packet id; 5.0 adds properties and a reason per filter."""
    _check_pid(pid)
    if version == V5:
        for code in codes:
            _check_reason(code, _UNSUBACK_REASONS)
    elif codes or props:
        raise CodecError("UNSUBACK reason codes need MQTT 5.0")
    return _encode_pid_props_codes(UNSUBACK, pid, codes, version, props, into)


def _encode_pid_props_codes(ptype, pid, codes, version, props, into):
    """SUBACK and UNSUBACK: packet id, 5.0 properties, one code per filter (none in a 3.1.1 UNSUBACK); the
    encoding side of codec._pid_and_props."""
    remaining = 2 + _props_block_size(version, props) + len(codes)
    buf = _start(into, remaining)
    pos = _put_u16(buf, _header(buf, ptype << 4, remaining), pid)
    if version == V5:
        pos = _put_props(buf, pos, props, _props_size(props))
    pos = _put_raw(buf, pos, bytes(codes))
    return _finish(into, buf, pos)


def encode_auth(reason=SUCCESS, props=None, into=None):
    return _encode_reason_only(AUTH, _AUTH_REASONS, reason, V5, props, into)


def decode_connect(body):
    """-> dict with version, client_id, keepalive, clean, username, password, will_* and props."""
    name, pos = _str_at(body, 0)
    if pos >= len(body):
        raise _malformed("CONNECT ends after the protocol name")
    version = body[pos]
    if not ((name == "MQTT" and version in (V311, V5)) or (name == "MQIsdp" and version == V31)):
        raise CodecError("unsupported protocol %r level %d" % (name, version), UNSUPPORTED_PROTOCOL_VERSION)
    if pos + 1 >= len(body):
        raise _malformed("CONNECT ends before its flags")
    flags = body[pos + 1]
    if flags & 0x01:
        raise _malformed("CONNECT reserved flag set [MQTT-3.1.2-3]")
    will = flags & 0x04
    will_qos = (flags >> 3) & 0x03
    if will_qos == 3 or (not will and (will_qos or flags & 0x20)):
        raise _malformed("inconsistent will flags [MQTT-3.1.2-11] [MQTT-3.1.2-14]")
    if version == V311 and flags & 0x40 and not flags & 0x80:
        raise _malformed("password without user name [MQTT-3.1.2-22]")
    out = {
        "version": version,
        "clean": bool(flags & 0x02),
        "keepalive": _u16_at(body, pos + 2),
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
    if version == V5:
        out["props"], pos = _props_at(body, pos, CONNECT)
    out["client_id"], pos = _str_at(body, pos)
    if will:
        if version == V5:
            out["will_props"], pos = _props_at(body, pos, 0)
        out["will_topic"], pos = _str_at(body, pos)
        raw, pos = _field_at(body, pos)
        out["will_payload"] = bytes(raw)
    if flags & 0x80:
        out["username"], pos = _str_at(body, pos)
    if flags & 0x40:
        raw, pos = _field_at(body, pos)
        out["password"] = bytes(raw)
    _expect_end(body, pos)
    return out


def decode_subscribe(body, version=V311):
    """-> (packet id, [(filter, options)], properties or None)."""
    pid, props, pos = _pid_and_props(body, SUBSCRIBE, version)
    topics = []
    while pos < len(body):
        raw, pos = _field_at(body, pos)
        if pos >= len(body):
            raise _malformed("SUBSCRIBE ends before the subscription options")
        options = body[pos]
        pos += 1
        flt = _decode_utf8(raw)
        try:
            _check_filter(bytes(raw))
        except CodecError as exc:
            raise _malformed(exc.reason)
        _check_sub_options(options, version)
        topics.append((flt, options))
    if not topics:
        raise _protocol_error("SUBSCRIBE without a topic filter [MQTT-3.8.3-3]")
    return pid, topics, props


def decode_unsubscribe(body, version=V311):
    """-> (packet id, [filters], properties or None)."""
    pid, props, pos = _pid_and_props(body, UNSUBSCRIBE, version)
    filters = []
    while pos < len(body):
        raw, pos = _field_at(body, pos)
        filters.append(_decode_utf8(raw))
    if not filters:
        raise _protocol_error("UNSUBSCRIBE without a topic filter [MQTT-3.10.3-2]")
    return pid, filters, props


class Packet:
    """A decoded packet: `type`, `flags` and the fields of its kind as attributes."""

    def __init__(self, ptype, flags, fields):
        self.type = ptype
        self.flags = flags
        self.fields = fields
        for key in fields:
            setattr(self, key, fields[key])

    def __repr__(self):
        return "%s%r" % (NAMES[self.type], self.fields)


def decode(ptype, flags, body, version=V311):
    """Decode a whole packet body into a Packet. Copies what it keeps out of the shared buffer."""
    if ptype == PUBLISH:
        topic, pid, payload, props = decode_publish(flags, body, version)
        fields = {
            "topic": topic,
            "pid": pid,
            "payload": bytes(payload),
            "qos": (flags >> 1) & 3,
            "dup": bool(flags & 8),
            "retain": bool(flags & 1),
            "props": props,
        }
    elif PUBACK <= ptype <= PUBCOMP:
        pid, reason, props = decode_ack(ptype, body, version)
        fields = {"pid": pid, "reason": reason, "props": props}
    elif ptype == CONNECT:
        fields = decode_connect(body)
    elif ptype == CONNACK:
        present, code, props = decode_connack(body, version)
        fields = {"session_present": present, "reason": code, "props": props}
    elif ptype == SUBSCRIBE:
        pid, topics, props = decode_subscribe(body, version)
        fields = {"pid": pid, "topics": topics, "props": props}
    elif ptype == SUBACK or ptype == UNSUBACK:
        pid, codes, props = (decode_suback if ptype == SUBACK else decode_unsuback)(body, version)
        fields = {"pid": pid, "codes": codes, "props": props}
    elif ptype == UNSUBSCRIBE:
        pid, filters, props = decode_unsubscribe(body, version)
        fields = {"pid": pid, "filters": filters, "props": props}
    elif ptype == DISCONNECT or ptype == AUTH:
        reason, props = decode_reason_only(ptype, body, version)
        fields = {"reason": reason, "props": props}
    else:  # PINGREQ, PINGRESP
        _expect_end(body, 0)
        fields = {}
    return Packet(ptype, flags, fields)


class StreamDecoder(_StreamDecoder):  # type: ignore[no-redef]
    """codec.StreamDecoder with a generator of decoded Packet objects (host convenience)."""

    def packets(self, data):
        """Feed a whole chunk and yield every packet it completes, decoded (host convenience)."""
        pos = 0
        while pos < len(data):
            pos += self.feed(data, pos)
            if self.ready:
                yield decode(self.ptype, self.flags, self.body, self.version)
