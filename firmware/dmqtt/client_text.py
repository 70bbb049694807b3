# The client's and the session's failures in words (errors.explain): one text per _T_ number of client.py,
# session.py and inbox.py, in order. Loaded only when one is raised or told to on_disconnect, and dropped again
# on the board, so that its text costs a deployed board no heap while nothing is wrong
# (tests/unit/test_client_text.py checks the numbers).

TEXT = (
    "expected CONNACK, got packet type %d",  # _T_NOT_CONNACK
    "the broker refused the connection: code 0x%02x",  # _T_REFUSED
    "a PUBLISH of %d bytes exceeds the broker's Maximum Packet Size of %d",  # _T_TOO_LARGE
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
    "message of %d bytes exceeds the journal record size",  # _T_RECORD_LARGE
    "more incoming QoS 2 messages than our Receive Maximum",  # _T_RX_MAX
    "an incoming QoS 2 message larger than the journal's records",  # _T_RX_LARGE
    "the broker sends faster than acknowledgements can go out",  # _T_ACKS_BEHIND
    "no free packet identifier",  # _T_NO_PID
    "not connected",  # _T_NOT_CONNECTED
)
