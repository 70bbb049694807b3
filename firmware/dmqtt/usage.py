# The client's answers to the calls that are not the common case, loaded only when one is made (MQTTClient): a
# protocol version written as text, a payload that is not bytes or a bytearray, a wake whose last one went to deep
# sleep without settle(). A board that passes numbers and bytes and settles never loads this code, nor spends its
# heap (UsageError's class included).

from dmqtt.errors import DmqttError, PublishRefused, explain

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


# Failures in words: numbers into client_text.TEXT (after session.py's and inbox.py's).
_T_VERSION = const(19)
_T_PAYLOAD = const(20)
_T_UNSETTLED = const(23)
_PAYLOAD_FORMAT_INVALID = const(0x99)  # codec.PAYLOAD_FORMAT_INVALID


class UsageError(DmqttError):
    """MQTTClient(version=...) is none of the versions the client speaks (3 or "3.1", 4 or "3.1.1", 5, "5" or
    "5.0")."""


def _text(rule, arg=None):
    return explain("dmqtt.client_text", rule, arg)


def version_number(given):
    """The MQTT version as the codec numbers it (3, 4, 5), from the ways people write it: config.json's "3.1",
    "3.1.1", "5", the specification's "5.0"."""
    if given in ("3.1", "3"):
        return 3
    if given in ("3.1.1", "4"):
        return 4
    if given in ("5", "5.0"):
        return 5
    raise UsageError(_text(_T_VERSION, repr(given)))


def payload_bytes(payload):
    """A payload publish() can send: a str as its UTF-8 bytes, a memoryview as it is."""
    if isinstance(payload, str):
        return payload.encode()
    if isinstance(payload, memoryview):
        return payload
    raise PublishRefused(_text(_T_PAYLOAD, type(payload).__name__), _PAYLOAD_FORMAT_INVALID)


def unsettled(waiting, flags):
    """Said once (MQTTClient.open, at a wake from deep sleep whose last wake slept with its connection up and
    `waiting` messages journaled; `flags`: client.sleep_flags): that wake never read the acknowledgements of what it
    sent, and they go again now, as at every wake that does the same. Not again until a wake ends with our own
    DISCONNECT (settle(), disconnect())."""
    flags(2, 0)
    print("dmqtt: " + _text(_T_UNSETTLED, waiting))
