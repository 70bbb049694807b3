# A message too large for an MQTT 3.1/3.1.1 broker. Those versions cannot say a broker's packet limit (5.0's
# CONNACK carries Maximum Packet Size [MQTT-3.2.2-15]); a broker that has one (Mosquitto's max_packet_size) drops
# the connection on a larger PUBLISH, and a client that sends it again at every reconnect never gets past it.
# The client learns the limit from the drops instead: when a connection ends with a message in flight that is
# larger than every message a broker has acknowledged since boot, and the next connection that ends does so with
# the same message in flight, that message is over the limit. The limit (its PUBLISH's size less one) becomes
# broker_max_packet until the next boot: the message's flow ends refused (0x95, as MQTT 5.0's would: counted in
# `refused`, told to on_published), and publish() refuses a message as large with PublishRefused. A connection
# that merely flaps cannot do this to a message no larger than one acknowledged.
#
# Loaded by the client when a 3.1/3.1.1 connection ends with flows in flight, and dropped again after (its code
# would otherwise hold a deployed board's heap): what it remembers lives on the session.

from dmqtt import codec
from dmqtt import journal_record as rec
from dmqtt.errors import forget
from dmqtt.session import WAIT_ACK


def dropped(client):
    """The connection of `client` is ending under it with flows in flight."""
    session = client.session
    memory = session._rel_addr  # [-1]: the largest acknowledged; [-2]: the last drop's suspect (Session)
    try:
        i = _suspect(session, memory[-1])
        serial = session._serial[i] if i >= 0 else 0
        if serial == 0 or memory[-2] != serial:
            memory[-2] = serial  # the first drop with it in flight, or none
            return
        memory[-2] = 0
        n = session.journal.read(session._addr[i])
        body = session.journal.record
        size = codec.publish_size(
            len(rec.pub_topic(body)), len(rec.pub_payload(body, n)), rec.pub_qos(body), client.version
        )
        limit = size - 1
        if limit < client.broker_max_packet:
            client.broker_max_packet = limit
            session.max_packet = limit  # the flow ends refused when it would be sent again (Session.next_packet)
    finally:
        forget("dmqtt.oversize")


def _suspect(session, acked):
    """The flow the connection may have died of: the largest message sent on it and not acknowledged, when larger
    than `acked`, the largest acknowledged since boot (until PUBREC a slot's _rel_addr holds its PUB record's
    size); its slot, or -1."""
    best = -1
    size = acked
    for i in range(len(session._state)):
        if session._tx[i] and session._state[i] == WAIT_ACK and session._rel_addr[i] > size:
            best = i
            size = session._rel_addr[i]
    return best
