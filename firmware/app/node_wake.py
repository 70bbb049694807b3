# A node's sampling wake (docs/nodes.md), loaded by sampler.py for a plan whose link names a gateway: the reading
# just journaled at the hint (dmqtt.wake.journal) goes to the gateway at once, and its flow is completed in the
# journal (wake.done) once the gateway has it on flash; with readings waiting, the gateway is asked first whether it
# hears the node again, before the application loads its client to send them all, in order. The cheap wake's own
# calls (dmqtt.wake) and the node's link (dlink.now_node), no client and no codec. dmqtt.wake is imported where it
# is used: the end of an application's wake (end()) loads this module before it, on a heap still in pieces.


def link(found):
    """The plan's link to the gateway: (its MAC, the channel, the key or None). wake_plan.after() writes it: the
    MAC as 12 hex digits, the channel as 2 digits, the key's 16 characters (none without a key)."""
    text = found["link"]
    return bytes.fromhex(text[:12]), int(text[12:14]), text[14:] or None


def gateway_back(found):
    """Whether the gateway hears the node again (its radio acknowledges a frame that holds no message)."""
    from dlink import now_node

    return now_node.probe(*link(found))


def send(found, payload):
    """The reading just journaled at the hint (wake.last()), sent to the gateway and its flow completed in the
    journal (wake.done()) once the gateway has it on flash; False when it stays in flight (the gateway away, or a
    journal() that opened the whole journal: the application sends it then, with the rest)."""
    from dlink import now_node
    from dmqtt import wake

    last = wake.last()
    if last is None:
        return False
    gateway, channel, lmk = link(found)
    sent = now_node.send(last[0], found["topic"].encode(), payload, found["qos"], gateway, channel, lmk,
                         found["version"])  # fmt: skip
    return sent and wake.done(last[0])


def end():
    """The end of a node's wake that ran the application (wake_plan.after): its radio off (ESP-NOW's rule before a
    sleep) and its link's modules dropped, so that the plan's code finds room in a heap the connection left in
    pieces."""
    import gc
    import sys

    from dmqtt.errors import forget

    radio = sys.modules.get("dlink.now_radio")
    if radio is not None:
        radio.off()
    for name in ("dlink.now_transport", "dlink.now_radio", "dlink.now"):
        forget(name)
    gc.collect()
