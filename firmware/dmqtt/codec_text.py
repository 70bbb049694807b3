# The codec's refusals in words (codec.refused): one text per rule, in the order of codec.py's _R_ numbers, with
# the spec id of the statement broken where there is one. Loaded only when a packet is refused, and dropped
# again on the board, so that its text costs a deployed board no heap while nothing is wrong.

TEXT = (
    "variable byte integer out of range: %d",  # _R_VARINT_RANGE
    "string longer than 65535 bytes",  # _R_STRING_LONG
    "topic name must not be empty [MQTT-4.7.3-1]",  # _R_TOPIC_EMPTY
    "topic name must not contain wildcards [MQTT-3.3.2-2]",  # _R_TOPIC_WILDCARD
    "topic name must not contain U+0000 [MQTT-1.5.3-2]",  # _R_TOPIC_NUL
    "unknown property 0x%02x",  # _R_PROP_UNKNOWN
    "properties need MQTT 5.0",  # _R_PROPS_NEED_V5
    "output buffer too small: %d bytes needed",  # _R_BUFFER_SMALL
    "packet identifier must be 1..65535 [MQTT-2.3.1-1]",  # _R_PID_RANGE
    "not an acknowledgement type: %d",  # _R_ACK_TYPE
    "reason codes and properties need MQTT 5.0",  # _R_REASON_NEEDS_V5
    "reason code 0x%02x is not allowed here",  # _R_REASON_HERE
    "unsupported protocol level %r",  # _R_LEVEL
    "a password needs a user name in 3.1.1 [MQTT-3.1.2-22]",  # _R_PASSWORD_USER
    "will QoS must be 0, 1 or 2 [MQTT-3.1.2-14]",  # _R_WILL_QOS
    "will QoS/retain/properties need a will topic [MQTT-3.1.2-11]",  # _R_WILL_TOPIC
    "SUBSCRIBE needs at least one topic filter [MQTT-3.8.3-3]",  # _R_SUBSCRIBE_EMPTY
    "UNSUBSCRIBE needs at least one topic filter [MQTT-3.10.3-2]",  # _R_UNSUBSCRIBE_EMPTY
    "packet type %d has a body",  # _R_HAS_BODY
    "topic filter must not be empty [MQTT-4.7.3-1]",  # _R_FILTER_EMPTY
    "topic filter must not contain U+0000 [MQTT-1.5.3-2]",  # _R_FILTER_NUL
    "'#' must be a whole last level [MQTT-4.7.1-2]",  # _R_FILTER_HASH
    "'+' must be a whole level [MQTT-4.7.1-3]",  # _R_FILTER_PLUS
    "subscription QoS 3 is malformed [MQTT-3.8.3-4]",  # _R_SUB_QOS3
    "reserved subscription option bits set [MQTT-3-8.3-4]",  # _R_SUB_RESERVED
    "reserved subscription option bits set (MQTT 5.0 3.8.3.1)",  # _R_SUB_RESERVED_V5
    "packet ends inside a two-byte integer",  # _R_END_IN_U16
    "packet ends inside a four-byte integer",  # _R_END_IN_U32
    "packet ends inside a variable byte integer",  # _R_END_IN_VARINT
    "variable byte integer longer than 4 bytes",  # _R_VARINT_LONG
    "field length runs past the end of the packet",  # _R_FIELD_PAST_END
    "invalid UTF-8 [MQTT-1.5.3-1]",  # _R_UTF8_INVALID
    "UTF-8 string contains U+0000 [MQTT-1.5.3-2]",  # _R_UTF8_NUL
    "property length runs past the end of the packet",  # _R_PROPS_PAST_END
    "property 0x%02x is not allowed in packet type %d",  # _R_PROP_NOT_ALLOWED
    "packet ends inside a property",  # _R_END_IN_PROP
    "subscription identifier 0 is a protocol error (MQTT 5.0 3.3.2.3.8)",  # _R_SUBSCRIPTION_ID_0
    "property runs past the property length",  # _R_PROP_PAST_LENGTH
    "property 0x%02x appears twice",  # _R_PROP_TWICE
    "%d unexpected bytes at the end of the packet",  # _R_TRAILING_BYTES
    "packet identifier 0 [MQTT-2.3.1-1]",  # _R_PID_ZERO
    "PUBLISH with both QoS bits set [MQTT-3.3.1-4]",  # _R_PUBLISH_QOS3
    "DUP set on a QoS 0 PUBLISH [MQTT-3.3.1-2]",  # _R_PUBLISH_DUP_QOS0
    "reserved flags of packet type %d must be 0010 [MQTT-3.6.1-1]",  # _R_FLAGS_0010
    "reserved flags of packet type %d must be 0000 [MQTT-2.2.2-1]",  # _R_FLAGS_0000
    "packet type 15 is reserved before MQTT 5.0",  # _R_TYPE_15
    "packet type 0 is reserved",  # _R_TYPE_0
    "PUBLISH without a topic name [MQTT-3.3.2-1]",  # _R_PUBLISH_NO_TOPIC
    "topic name contains a wildcard [MQTT-3.3.2-2]",  # _R_PUBLISH_WILDCARD
    "acknowledgement of length %d (must be 2)",  # _R_ACK_LENGTH
    "reason code 0x%02x is not allowed in packet type %d",  # _R_REASON_NOT_ALLOWED
    "CONNACK shorter than 2 bytes",  # _R_CONNACK_SHORT
    "CONNACK reserved flags set [MQTT-3.2.2-1]",  # _R_CONNACK_FLAGS
    "CONNACK reason code 0x%02x is not allowed (1 to 5 are MQTT 3.1.1's refusals: a broker that does not speak"
    " MQTT 5.0; connect with mqtt_version 4)",  # _R_CONNACK_REASON
    "CONNACK return code %d is reserved",  # _R_CONNACK_RETURN
    "SUBACK without return codes",  # _R_SUBACK_EMPTY
    "SUBACK return code 0x%02x is not allowed [MQTT-3.9.3-2]",  # _R_SUBACK_CODE
    "UNSUBACK reason code 0x%02x is not allowed",  # _R_UNSUBACK_REASON
    "Remaining Length longer than 4 bytes (MQTT 3.1.1 section 2.2.3)",  # _R_LENGTH_LONG
    "packet of %d bytes exceeds the maximum packet size %d",  # _R_TOO_LARGE
)
