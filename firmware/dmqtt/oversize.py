# A message too large for an MQTT 3.1/3.1.1 broker. Those versions cannot say a broker's packet limit (5.0's
# CONNACK carries Maximum Packet Size [MQTT-3.2.2-15]); a broker that has one (Mosquitto's max_packet_size) drops
# the connection on a larger PUBLISH, and a client that sends it again at every reconnect never gets past it.
# The client learns the limit from the drops instead: when a connection ends with a message in flight that is
# larger than every message a broker has acknowledged since boot (Session.suspect), and the next connection that
# ends does so with the same message in flight, that message is over the limit. The limit (its PUBLISH's size
# less one) becomes broker_max_packet until the next boot: the message's flow ends refused (0x95, as MQTT 5.0's
# would: counted in `refused`, told to on_published), and publish() refuses a message as large with
# PublishRefused. A connection that merely flaps cannot do this to a message no larger than one acknowledged.
#
# Loaded only when a 3.1/3.1.1 connection ends with such a message in flight.

from dmqtt import codec
from dmqtt import journal_record as rec

_SUSPECT: dict = {}  # id(client): (serial, drops) of the message the last dropped connection had in flight


def dropped(client, i):
    """The connection of `client` is ending, slot `i` (Session.suspect) in flight."""
    session = client.session
    serial = session._serial[i]
    known = _SUSPECT.get(id(client))
    drops = known[1] + 1 if known is not None and known[0] == serial else 1
    if drops < 2:
        _SUSPECT[id(client)] = (serial, drops)
        return
    del _SUSPECT[id(client)]
    n = session.journal.read(session._addr[i])
    body = session.journal.record
    size = codec.publish_size(
        len(rec.pub_topic(body)), len(rec.pub_payload(body, n)), rec.pub_qos(body), client.version
    )
    limit = size - 1
    if limit < client.broker_max_packet:
        client.broker_max_packet = limit
        session.max_packet = limit  # the flow ends refused when it would be sent again (Session.next_packet)
