# A gateway board's config.json, checked (docs/nodes.md): config.py hands it over when "gateway" is there, on the
# board at boot and on the host before anything is written or booted (host_bridge/boards/board_config.py runs this
# very file); and a node's link to its gateway (link(): config.py's check of a board with transport espnow).
# Refusals say the field and what it must be.
#   {"gateway": {"channel": 1..14, "pmk": 16 characters, "nodes": [{"mac", "client_id", "lmk", "will"}]},
#    "uart": {"id", "baud", "tx", "rx"}, "mqtt_version", "keepalive_s"}

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


SLOT_SECTORS = const(8)  # each node's journal: 8 sectors (32 KB) of the mqttlog partition, at its index * 8
_MAX_PEERS = const(20)  # espnow.MAX_TOTAL_PEER_NUM
_MAX_ENCRYPTED = const(6)  # espnow.MAX_ENCRYPT_PEER_NUM
_KEYS = ("gateway", "uart", "mqtt_version", "keepalive_s", "transport")
_NODE_KEYS = ("mac", "client_id", "lmk", "will")
_VERSIONS = {"3.1": 3, "3.1.1": 4, "5": 5, "5.0": 5}


def check(raw, error, node=None):
    """The gateway's config, checked; `error` (config.ConfigError) raised with what is wrong. With `node` (the
    node's sleep, whether it asks for a network of its own, its QoS), a node's link instead (link()), `error`
    config.py's refusal."""
    if node is not None:
        sleep, network, qos = node
        return link(raw, sleep, network, qos, error)
    for key in raw:
        if key not in _KEYS:
            raise error("unknown key %s (a gateway's config.json holds %s)" % (key, ", ".join(_KEYS)))
    if raw.get("transport", "serial") != "serial":
        raise error("a gateway reaches the broker over the serial link: transport serial (docs/nodes.md)")
    gw = raw["gateway"]
    if not isinstance(gw, dict) or any(k not in ("channel", "pmk", "nodes") for k in gw):
        raise error("gateway must be {channel, pmk, nodes}")
    channel = gw.get("channel", 1)
    if not isinstance(channel, int) or not 1 <= channel <= 14:
        raise error("gateway.channel must be a WiFi channel, 1 to 14")
    found = gw.get("nodes")
    if not isinstance(found, list) or not found:
        raise error("gateway.nodes must list the nodes: [{mac, client_id, lmk, will}]")
    room = _slots()
    if room is not None and len(found) > room:
        raise error("gateway.nodes: %d nodes, and the mqttlog partition holds journals for %d" % (len(found), room))
    nodes = []
    macs = []
    encrypted = 0
    for i, node in enumerate(found):
        where = "gateway.nodes[%d]" % i
        if not isinstance(node, dict) or any(k not in _NODE_KEYS for k in node):
            raise error("%s must be {mac, client_id, lmk, will}" % where)
        mac = _mac(node.get("mac"), where + ".mac", error)
        if mac in macs:
            raise error("%s.mac is listed twice" % where)
        macs.append(mac)
        cid = node.get("client_id")
        if not isinstance(cid, str) or not cid:
            raise error("%s.client_id must be a non-empty string" % where)
        lmk = _key(node.get("lmk"), where + ".lmk", error)
        encrypted += 1 if lmk else 0
        will = node.get("will")
        if will is not None:
            if (
                not isinstance(will, dict)
                or not isinstance(will.get("topic"), str)
                or will.get("qos", 0) not in (0, 1, 2)
            ):
                raise error("%s.will must be {topic, payload, qos 0..2, retain}" % where)
            will = [will["topic"], str(will.get("payload", "")), will.get("qos", 0), bool(will.get("retain"))]
        nodes.append({"mac": mac, "client_id": cid, "lmk": lmk, "will": will})
    if encrypted > _MAX_ENCRYPTED or len(nodes) > _MAX_PEERS:
        raise error("ESP-NOW takes 20 peers, 6 of them encrypted: %d nodes, %d with an lmk" % (len(nodes), encrypted))
    uart = raw.get("uart", {})
    if not isinstance(uart, dict):
        raise error("uart must be {id, baud, tx, rx}")
    version = _VERSIONS.get(str(raw.get("mqtt_version", "3.1.1")))
    if version is None:
        raise error("mqtt_version must be one of 3.1, 3.1.1, 5")
    keepalive = raw.get("keepalive_s", 60)
    if not isinstance(keepalive, int) or not 0 <= keepalive <= 65535:
        raise error("keepalive_s must be an integer from 0 to 65535")
    return {
        "gateway": {"channel": channel, "pmk": _key(gw.get("pmk"), "gateway.pmk", error), "nodes": nodes},
        "uart": {
            "id": uart.get("id", 1),
            "baud": uart.get("baud", 115200),
            "pins": {k: uart[k] for k in ("tx", "rx") if isinstance(uart.get(k), int)},
        },
        "version": version,
        "keepalive": keepalive,
    }


def _slots():
    """How many nodes' journals the board's mqttlog partition holds (None on the host: no partition to ask)."""
    try:
        import esp32
    except ImportError:
        return None
    found = esp32.Partition.find(esp32.Partition.TYPE_DATA, label="mqttlog")
    return found[0].ioctl(4, 0) // SLOT_SECTORS if found else 0


def _mac(text, where, error):
    """A MAC address as 12 hex digits (lower case), from "aa:bb:cc:dd:ee:ff" or "aabbccddeeff"."""
    raw = text.replace(":", "").lower() if isinstance(text, str) else ""
    if len(raw) != 12 or any(c not in "0123456789abcdef" for c in raw):
        raise error('%s must be a MAC address, "aa:bb:cc:dd:ee:ff"' % where)
    return raw


def _key(text, where, error):
    if text is None:
        return None
    if not isinstance(text, str) or len(text) != 16:
        raise error("%s must be 16 characters (an ESP-NOW key)" % where)
    return text


_T_ESPNOW_MUST_BE = const(36)  # config_text's numbers (config.py's _T_ESPNOW_MUST_BE, _T_NODE_MUST)
_T_NODE_MUST = const(37)


def link(raw, sleep, network, qos, refuse):
    """A node's link to its gateway (transport espnow): {gateway: its MAC as 12 hex digits, channel, lmk: 16
    characters or None}. A node sleeps between readings, sends each at its own wake, publishes at QoS 1 or 2 only
    and has no network of its own (`network`: a subscription, confirmation or TLS the config asks for): the gateway
    holds its session. `refuse(rule)`: config.py's refusal."""
    found = raw.get("espnow")
    if not isinstance(found, dict):
        refuse(_T_ESPNOW_MUST_BE)
    mac = str(found.get("gateway", "")).replace(":", "").lower()
    lmk = found.get("lmk")
    channel = found.get("channel", 1)
    if (
        len(mac) != 12
        or any(c not in "0123456789abcdef" for c in mac)
        or (lmk is not None and (not isinstance(lmk, str) or len(lmk) != 16))
        or not isinstance(channel, int)
        or not 1 <= channel <= 14
    ):
        refuse(_T_ESPNOW_MUST_BE)
    if sleep is None or network or raw.get("wifi") is not None or not qos or sleep.get("readings_per_send", 1) != 1:
        refuse(_T_NODE_MUST)
    return {"gateway": mac, "channel": channel, "lmk": lmk}
