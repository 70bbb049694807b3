# A node's end of ESP-NOW to its gateway (docs/nodes.md): the cheap sending of one message (send(): the reading a
# wake has just journaled, with dmqtt.wake's last() and done() around it; no client, no codec), and probe(). The
# client's transport, for the wakes that have more to send (a backlog, a power-on), is dlink/now_transport.py; the
# radio, dlink/now_radio.py. A node's usual wake loads this module and the radio's only.
#
# No WiFi join, no TCP, no CONNECT on the air: the gateway holds each node's session with the broker, so the node's
# session is always "present" to it. A frame goes with espnow's sync send (the gateway's radio acknowledges it) and
# is sent again, up to `tries` times, while neither that nor the gateway's answer comes: the gateway answers once
# the message is on its flash, and takes a message again as a duplicate (dlink/now.py).

import time

from dlink import now
from dlink.now_radio import radio

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


_TRIES = const(3)
_ANSWER_MS = const(200)  # the gateway's answer, once its radio has acknowledged the frame
_PUBACK = const(4)
_PUBREC = const(5)


def probe(gateway, channel, lmk=None):
    """Whether the gateway's radio acknowledges a frame that holds no message (the gateway ignores it): a node
    with readings waiting asks this before it loads its client to send them."""
    frame = bytearray(now.HEADER)
    now.start(frame, 4)
    e = radio(gateway, channel, lmk)
    for _ in range(_TRIES):
        if e.send(gateway, frame, True):
            return True
    return False


def exchange(e, gateway, frame, n, answer, tries=_TRIES, answer_ms=_ANSWER_MS):
    """Send frame[:n] and wait for the gateway's answer; returns its bytes (a frame of acknowledgements), or None
    after `tries` sends that brought none. `answer`: a bytearray(250) the answer is read into."""
    data = memoryview(frame)[:n]
    box = [None, answer]
    for _ in range(tries):
        if not e.send(gateway, data, True):
            continue  # not heard (out of range, the gateway off, the frame or its acknowledgement lost)
        began = time.ticks_ms()
        while True:
            left = answer_ms - time.ticks_diff(time.ticks_ms(), began)
            if left <= 0:
                break
            got = e.recvinto(box, left)
            if got and box[0] == gateway:
                return memoryview(answer)[:got]
    return None


def send(pid, topic, payload, qos, gateway, channel, lmk=None, version=4):
    """One QoS 1/2 message, packet id `pid` (a journaled one's: dmqtt.wake.last()), to the gateway; True once the
    gateway has it on flash (its PUBACK, or for QoS 2 its PUBREC), after which the caller ends the message's flow
    in its journal (dmqtt.wake.done). For QoS 2 the PUBREC ends the flow on this hop: the gateway takes the
    message again only as a duplicate (docs/nodes.md). False when no answer came (the gateway away)."""
    frame = bytearray(now.MAX_FRAME)
    end = now.publish(frame, now.start(frame, version), version, qos, pid, topic, payload)
    if end < 0:
        return False  # too large for a frame: the client says so, when it sends it
    answer = exchange(radio(gateway, channel, lmk), gateway, frame, end, bytearray(now.MAX_FRAME))
    want = _PUBACK if qos == 1 else _PUBREC
    for kind, got in now.acks(answer) if answer is not None else ():
        if kind == want and got == pid:
            return True
    return False
