# The client's and the session's failures in words (errors.explain): one text per _T_ number of client.py,
# session.py, inbox.py and usage.py, in order. Loaded only when one is raised or told to on_disconnect, and
# dropped again on the board, so that its text costs a deployed board no heap while nothing is wrong
# (tests/unit/dmqtt/test_client_text.py checks the numbers).

# CONNACK's refusals by name: MQTT 3.1.1's return codes (3.1's are the same) and MQTT 5.0's reason codes.
_REFUSED_3 = {
    1: "unacceptable protocol version",
    2: "client identifier rejected",
    3: "server unavailable",
    4: "bad user name or password",
    5: "not authorized",
}
_REFUSED_5 = {
    0x80: "unspecified error",
    0x81: "malformed packet",
    0x82: "protocol error",
    0x83: "implementation specific error",
    0x84: "unsupported protocol version",
    0x85: "client identifier not valid",
    0x86: "bad user name or password",
    0x87: "not authorized",
    0x88: "server unavailable",
    0x89: "server busy",
    0x8A: "banned",
    0x8C: "bad authentication method",
    0x90: "topic name invalid",
    0x95: "packet too large",
    0x97: "quota exceeded",
    0x99: "payload format invalid",
    0x9A: "retain not supported",
    0x9B: "QoS not supported",
    0x9C: "use another server",
    0x9D: "server moved",
    0x9F: "connection rate exceeded",
}


def _refused(arg):
    code, version, id_length = arg
    name = (_REFUSED_5 if version == 5 else _REFUSED_3).get(code, "a code the protocol does not define")
    text = "the broker refused the connection: %s (code 0x%02x)" % (name, code)
    if version != 5 and code == 2 and id_length > 23:
        # [MQTT-3.1.3-5]: a 3.1.1 broker must take 1 to 23 characters; more only if it chooses to.
        text += "; the client id has %d characters, and a 3.1.1 broker need take no more than 23" % id_length
    return text


def _too_large(arg):
    size, limit, version = arg
    if version == 5:
        return "a PUBLISH of %d bytes exceeds the broker's Maximum Packet Size of %d" % (size, limit)
    # MQTT 3.1/3.1.1 have no Maximum Packet Size: the limit is what the broker's dropped connections showed
    # (dmqtt.oversize).
    return (
        "a PUBLISH of %d bytes is more than this broker takes: it dropped the connection twice on one of %d bytes"
        " (MQTT %s cannot say its limit; Mosquitto's is max_packet_size): send it smaller or raise the limit"
        % (size, limit + 1, "3.1" if version == 3 else "3.1.1")
    )


def _wrong_ack(arg):
    ptype, pid, qos = arg
    name = ("PUBACK", "PUBREC", "", "PUBCOMP")[ptype - 4]  # (codec's packet types 4, 5 and 7)
    if not qos:
        return "the broker sent %s for packet id %d, which is in no flow of ours" % (name, pid)
    text = "the broker answered a QoS %d PUBLISH (packet id %d) with %s, which MQTT forbids" % (qos, pid, name)
    if qos == 2 and ptype == 4:
        text += ": it does not support QoS 2 (RabbitMQ's MQTT plugin downgrades it); publish at QoS 1"
    return text


TEXT = (
    "expected CONNACK, got packet type %d",  # _T_NOT_CONNACK
    _refused,  # _T_REFUSED
    _too_large,  # _T_TOO_LARGE
    "not connected: QoS 0 messages are not queued",  # _T_QOS0_OFFLINE
    "%d messages in flight and none acknowledged",  # _T_WINDOW_FULL
    "no SUBACK/UNSUBACK within %d ms",  # _T_NO_SUBACK
    "no PINGRESP within the keep-alive period",  # _T_NO_PINGRESP
    "packet of %d bytes exceeds the broker's Maximum Packet Size",  # _T_PACKET_LARGE
    "the connection took no data for %d s",  # _T_STALLED
    "unexpected packet type %d from the broker",  # _T_UNEXPECTED
    "journal: message %d does not fit in %d slots; raise max_messages or it will be lost",  # _T_NO_SLOT
    "accept() is for QoS 1 and 2; QoS 0 is sent without a journal",  # _T_NOT_JOURNALED
    "%d messages in flight",  # _T_SLOTS_FULL
    "a message of %d bytes does not fit the journal's records of %d: open the journal with a larger record_max"
    " (open_journal(record_max=...)), or send it smaller",  # _T_RECORD_LARGE
    "more incoming QoS 2 messages than our Receive Maximum",  # _T_RX_MAX
    "an incoming QoS 2 message larger than the journal's records",  # _T_RX_LARGE
    "the broker sends faster than acknowledgements can go out",  # _T_ACKS_BEHIND
    "no free packet identifier",  # _T_NO_PID
    "not connected",  # _T_NOT_CONNECTED
    'unknown MQTT version %s: give 3 or "3.1", 4 or "3.1.1", 5 or "5" (dmqtt.codec.V31, V311, V5)',  # _T_VERSION
    "a payload of type %s: give bytes, bytearray, memoryview or str (sent as UTF-8)",  # _T_PAYLOAD
    "QoS %s: give 0, 1 or 2",  # _T_QOS
    "a PUBLISH of %d bytes does not fit the client's packet buffer of %d: raise max_packet (MQTTClient(...,"
    " max_packet=...)), or send it smaller",  # _T_OUR_LIMIT
    "the last wake went to deep sleep with its connection up: %d messages it may have sent were not acknowledged"
    " and go again now, as they will at every wake; end a wake with client.settle(timeout_ms) before"
    " machine.deepsleep() (docs/low-power.md)",  # _T_UNSETTLED
    _wrong_ack,  # _T_WRONG_ACK
    "the broker's Maximum QoS is %d and journaled messages ask QoS %d: they stay journaled; publish at a QoS the"
    " broker takes (docs/brokers.md)",  # _T_ABOVE_MAX_QOS
)
