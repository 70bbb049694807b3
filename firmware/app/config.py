# The board's configuration, config.json on its filesystem (config_file.py finds it: on a real ESP32 the
# filesystem is mounted at "/", on the virtual board at "/flash"). check() turns the JSON into plain values and
# explains what is wrong with a bad file; board_app.py prints that and stops, it never crash-loops. store()
# keeps the check beside config.json, so that the boots after do not load this module while the files are the same.

import json

from dmqtt.errors import explain

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


# The refusals' words are in config_text (errors.explain), one per number here: loaded only to say what is wrong,
# so that a board whose config is right does not keep them (string constants are interned names, which a board
# keeps for good, in the heap and in the pool of names its image leaves it: docs/virtual-board.md).
_T_UNKNOWN_KEY = const(0)
_T_NO_CONFIG = const(1)
_T_NO_FILE = const(2)
_T_IS_NOT_VALID_JSON = const(3)
_T_NOT_OBJECTS = const(4)
_T_MUST_BE_AN_OBJECT = const(5)
_T_TLS_IS_FOR_TRANSPORT = const(6)
_T_TLS_MUST_BE_CA = const(7)
_T_TLS_MUST_BE_A = const(8)
_T_TLS_INSECURE_MUST_BE = const(9)
_T_TLS_CA_IS_REQUIRED = const(10)
_T_TLS_CERT_AND_TLS = const(11)
_T_WIFI_MUST_BE_SSID = const(12)
_T_WIFI_IP_MUST_BE = const(13)
_T_WIFI_BSSID_MUST_BE = const(14)
_T_SLEEP_MUST_BE = const(15)
_T_MUST_BE_AN_INTEGER = const(16)
_T_TOPIC_NOT_UTF8 = const(17)
_T_TOPIC_INVALID = const(18)
_T_CONFIRM_MUST_BE_TOPIC = const(19)
_T_CONFIRM_IS_FOR_PUBLISH = const(20)
_T_CONFIRM_HOLD_MUST_BE = const(21)
_T_NOT_AN_OBJECT = const(22)
_T_CLIENT_ID_MUST_BE_A = const(23)
_T_MQTT_VERSION_MUST_BE_ONE = const(24)
_T_TRANSPORT_MUST_BE_TCP = const(25)
_T_BROKER_MUST_BE_HOST = const(26)
_T_UART_MUST_BE_ID = const(27)
_T_UART_PAUSE_MUST_BE = const(28)
_T_WILL_MUST_BE_TOPIC = const(29)
_T_MUST_BE_A_STRING = const(30)
_T_PUBLISH_MUST_BE_AN = const(31)
_T_PUBLISH_QOS_MUST_BE = const(32)
_T_SUBSCRIBE_ENTRIES_MUST_BE = const(33)
_T_BATCH_NEEDS_QOS = const(34)
_T_SENSOR_MUST_BE = const(35)

VERSIONS = {"3.1": 3, "3.1.1": 4, "5": 5, "5.0": 5}


class ConfigError(Exception):
    pass


def _refuse(rule, arg=None):
    raise ConfigError(explain("config_text", rule, arg))


# Every key config.json may hold (a dotted name per nested key): any other is refused, so that a misspelt "qso"
# does not leave QoS at its default without a word.
KEYS = (
    "client_id mqtt_version transport broker uart wifi will username password publish subscribe tls keepalive_s"
    " session_expiry_s window group_commit heap_log_every publish.topic publish.qos publish.count"
    " publish.interval_ms publish.payload_bytes publish.sensor uart.id uart.baud uart.tx uart.rx uart.pause wifi.ssid"
    " wifi.password wifi.ip wifi.bssid sleep sleep.every_s sleep.awake_s sleep.readings_per_send sleep.queue_limit"
    " sleep.max_reading_age_s"
    " will.topic will.payload will.qos will.retain tls.ca tls.cert tls.key tls.server_hostname tls.insecure"
    " subscribe.topic subscribe.qos confirm confirm.topic confirm.timeout_s confirm.hold"
    " espnow espnow.gateway espnow.channel espnow.lmk"
).split()


def _known(obj, where):
    for key in obj:
        name = where + key
        if name not in KEYS:
            _refuse(_T_UNKNOWN_KEY, name)
        value = obj[key]
        for item in value if isinstance(value, list) else (value,):
            if isinstance(item, dict):
                _known(item, name + ".")


SECRET_KEYS = ("username", "password")  # also wifi.password and tls.key, merged from secrets.json


def load(base):
    """config.json and secrets.json in the folder `base` (None: no config.json was found), checked."""
    if base is None:
        _refuse(_T_NO_CONFIG)
    raw = _json(base + "/config.json", True)
    secrets = _json(base + "/secrets.json", False)
    if secrets is not None:
        merge_secrets(raw, secrets)
    cfg = check(raw)
    cfg["root"] = base
    return cfg


def _json(path, required):
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        if required:
            _refuse(_T_NO_FILE, path)
        return None
    try:
        return json.loads(text)
    except ValueError:
        _refuse(_T_IS_NOT_VALID_JSON, path)


def merge_secrets(raw, secrets):
    """secrets.json beside config.json (so that config.json can be shared and committed): username, password,
    {"wifi": {"password"}}, {"tls": {"key"}} override what config.json says."""
    if not isinstance(raw, dict) or not isinstance(secrets, dict):
        _refuse(_T_NOT_OBJECTS)
    for key in SECRET_KEYS:
        if key in secrets:
            raw[key] = secrets[key]
    for section, key in (("wifi", "password"), ("tls", "key")):
        value = secrets.get(section, {})
        if isinstance(value, dict) and key in value:
            raw.setdefault(section, {})
            if not isinstance(raw[section], dict):
                _refuse(_T_MUST_BE_AN_OBJECT, section)
            raw[section][key] = value[key]


def _tls(raw, transport):
    """tls: {ca, cert, key, server_hostname, insecure}; None without it. Messages name fields, never values:
    a key must not reach the console."""
    tls = raw.get("tls")
    if tls is None:
        return None
    if transport != "tcp":
        _refuse(_T_TLS_IS_FOR_TRANSPORT)
    if not isinstance(tls, dict):
        _refuse(_T_TLS_MUST_BE_CA)
    for key in ("ca", "cert", "key", "server_hostname"):
        if tls.get(key) is not None and (not isinstance(tls[key], str) or not tls[key]):
            _refuse(_T_TLS_MUST_BE_A, key)
    insecure = tls.get("insecure", False)
    if not isinstance(insecure, bool):
        _refuse(_T_TLS_INSECURE_MUST_BE)
    if not tls.get("ca") and not insecure:
        _refuse(_T_TLS_CA_IS_REQUIRED)
    if bool(tls.get("cert")) != bool(tls.get("key")):
        _refuse(_T_TLS_CERT_AND_TLS)
    return {
        "ca": tls.get("ca"),
        "cert": tls.get("cert"),
        "key": tls.get("key"),
        "server_hostname": tls.get("server_hostname"),
        "insecure": insecure,
    }


def _wifi(wifi):
    """wifi: {ssid, password, ip, bssid}; None without it. ip: [address, mask, gateway, dns] for a static address
    (no DHCP); bssid: the access point's, "aa:bb:cc:dd:ee:ff" (one of several of that name; the scan for it remains)."""
    if wifi is None:
        return None
    if not isinstance(wifi, dict) or not isinstance(wifi.get("ssid"), str) or not wifi["ssid"]:
        _refuse(_T_WIFI_MUST_BE_SSID)
    ip = wifi.get("ip")
    if ip is not None and not (isinstance(ip, list) and len(ip) == 4 and all(_dotted(a, ".", 10, 4) for a in ip)):
        _refuse(_T_WIFI_IP_MUST_BE)
    bssid = wifi.get("bssid")
    if bssid is not None and not _dotted(bssid, ":", 16, 6):
        _refuse(_T_WIFI_BSSID_MUST_BE)
    return {
        "ssid": wifi["ssid"],
        "password": str(wifi.get("password", "")),
        "ip": tuple(ip) if ip else None,
        "bssid": bytes(int(b, 16) for b in bssid.split(":")) if bssid else None,
    }


def _dotted(text, sep, base, count):
    """`text` is `count` bytes written in `base` and joined by `sep` (an IPv4 address, a MAC address)."""
    try:
        parts = [int(p, base) for p in text.split(sep)]
    except (AttributeError, ValueError):
        return False
    return len(parts) == count and all(0 <= p < 256 for p in parts)


def _int(raw, key, default, low, high):
    value = raw.get(key, default)
    if not isinstance(value, int) or not low <= value <= high:
        _refuse(_T_MUST_BE_AN_INTEGER, (key, low, high))
    return value


def _topic(topic, what, is_filter):
    """Every topic checked now with the codec's own rules, so that a bad one is a config error at boot, not a
    crash at the first publish; and as well-formed UTF-8 [MQTT-1.5.3-1], which the codec leaves to the
    application's text."""
    from dmqtt import codec

    try:
        data = topic.encode()
        data.decode()
    except UnicodeError:
        _refuse(_T_TOPIC_NOT_UTF8, (what, topic))
    try:
        if is_filter:
            codec.check_filter(data)
        else:
            codec.check_topic(data)
    except codec.CodecError as exc:
        _refuse(_T_TOPIC_INVALID, (what, topic, exc))


def _confirm(raw, cid, qos):
    """confirm: {topic, timeout_s, hold} (end-to-end confirmation by the recorder); None without it."""
    confirm = raw.get("confirm")
    if confirm is None:
        return None
    if not isinstance(confirm, dict):
        _refuse(_T_CONFIRM_MUST_BE_TOPIC)
    if qos == 0:
        _refuse(_T_CONFIRM_IS_FOR_PUBLISH)
    topic = str(confirm.get("topic", "confirm/{client_id}")).replace("{client_id}", cid)
    _topic(topic, "confirm.topic", False)
    hold = confirm.get("hold", False)
    if not isinstance(hold, bool):
        _refuse(_T_CONFIRM_HOLD_MUST_BE)
    # Named as dmqtt.confirm.ConfirmingClient takes them.
    return {"confirm_topic": topic, "timeout_s": _int(confirm, "timeout_s", 30, 1, 86400), "hold": hold}


def check(raw):
    if not isinstance(raw, dict):
        _refuse(_T_NOT_AN_OBJECT)
    if "gateway" in raw:
        # A gateway board's config (docs/nodes.md): its own checker (no name of it here: a name a module holds
        # is interned when it loads, and the serial board with confirmation is near its pool's end).
        return __import__("gateway_config").check(raw, ConfigError)
    _known(raw, "")
    cid = raw.get("client_id")
    if not isinstance(cid, str) or not cid:
        _refuse(_T_CLIENT_ID_MUST_BE_A)
    version = VERSIONS.get(str(raw.get("mqtt_version", "3.1.1")))
    if version is None:
        _refuse(_T_MQTT_VERSION_MUST_BE_ONE)
    transport = raw.get("transport", "tcp")
    if transport not in ("tcp", "serial", "espnow"):
        _refuse(_T_TRANSPORT_MUST_BE_TCP)
    host, port = "", 0
    broker = str(raw.get("broker", ""))
    if transport == "espnow":
        broker = ""  # (the gateway's bridge has the broker: docs/nodes.md)
    if broker or transport == "tcp":
        # Over the serial link the broker is optional: the bridge's default broker is used without one.
        host, _, port_text = broker.rpartition(":")
        if not host or not port_text.isdigit():
            _refuse(_T_BROKER_MUST_BE_HOST, broker)
        port = int(port_text)
    uart = raw.get("uart", {})
    if not isinstance(uart, dict):
        _refuse(_T_UART_MUST_BE_ID)
    if not isinstance(uart.get("pause", True), bool):
        _refuse(_T_UART_PAUSE_MUST_BE)
    wifi = _wifi(raw.get("wifi"))
    sleep = raw.get("sleep")
    if sleep is not None and not isinstance(sleep, dict):
        _refuse(_T_SLEEP_MUST_BE)
    will = raw.get("will")
    if will is not None:
        if not isinstance(will, dict) or not isinstance(will.get("topic"), str) or will.get("qos", 0) not in (0, 1, 2):
            _refuse(_T_WILL_MUST_BE_TOPIC)
        will = (
            will["topic"].replace("{client_id}", cid),
            str(will.get("payload", "")).encode(),
            will.get("qos", 0),
            bool(will.get("retain", False)),
        )
    for key in ("username", "password"):
        if raw.get(key) is not None and not isinstance(raw.get(key), str):
            _refuse(_T_MUST_BE_A_STRING, key)
    pub = raw.get("publish", {})
    if not isinstance(pub, dict):
        _refuse(_T_PUBLISH_MUST_BE_AN)
    qos = pub.get("qos", 1)
    if qos not in (0, 1, 2):
        _refuse(_T_PUBLISH_QOS_MUST_BE)
    subs = []
    for sub in raw.get("subscribe", []):
        if not isinstance(sub, dict) or not isinstance(sub.get("topic"), str) or sub.get("qos", 0) not in (0, 1, 2):
            _refuse(_T_SUBSCRIBE_ENTRIES_MUST_BE)
        subs.append((sub["topic"].replace("{client_id}", cid), sub.get("qos", 0)))
    sensor = pub.get("sensor")
    # "module.function" (the module's name may be dotted; an import of a name that is not one fails, and says so)
    if sensor is not None and (not isinstance(sensor, str) or "" in sensor.split(".") or "." not in sensor):
        _refuse(_T_SENSOR_MUST_BE, sensor)
    topic = str(pub.get("topic", "sensors/{client_id}/telemetry")).replace("{client_id}", cid)
    _topic(topic, "publish.topic", False)
    for sub_topic, _ in subs:
        _topic(sub_topic, "subscribe topic", True)
    if will is not None:
        _topic(will[0], "will.topic", False)  # (will: (topic, payload, qos, retain), as the client takes it)
    tls = _tls(raw, transport)
    confirm = _confirm(raw, cid, qos)
    if confirm:
        subs.append((confirm["confirm_topic"], 0))  # the recorder's newest is retained: it comes at each subscribe
    # The serial link's UART: checked whatever the transport, kept only for the serial link (None over TCP: two
    # objects less that a TCP board would hold for its whole run).
    uart = {
        "id": _int(uart, "id", 1, 0, 2),
        "baud": _int(uart, "baud", 115200, 1200, 5000000),
        "pins": {k: uart[k] for k in ("tx", "rx") if isinstance(uart.get(k), int)},
        "pause": uart.get("pause", True),
    }
    if transport != "serial":
        uart = None
    link = None
    if transport == "espnow":  # a node (docs/nodes.md): its own checker, loaded for a node only
        link = __import__("gateway_config").check(raw, _refuse, (sleep, subs or confirm or tls, qos))
    if sleep is not None:
        # One reading a wake, then deep sleep until the next (every_s; a wake that cannot deliver gives up after
        # awake_s). readings_per_send above 1: store-and-forward, the readings journaled at sampling wakes
        # (sampler.py) and sent every readings_per_send-th wake, or once queue_limit wait (the journal's slots), or
        # once the oldest is max_reading_age_s old. (Keys of 10 characters and more are not interned: a board
        # keeps what config.py interns for good, and the serial board with confirmation is near its pool's end.)
        per_send = _int(sleep, "readings_per_send", 1, 1, 255)
        if per_send > 1 and not qos:
            _refuse(_T_BATCH_NEEDS_QOS)
        sleep = {
            "every_s": _int(sleep, "every_s", 60, 1, 86400),
            "awake_s": _int(sleep, "awake_s", 30, 1, 3600),
            "readings_per_send": per_send,
            "queue_limit": _int(sleep, "queue_limit", 64, 1, 255),
            "max_reading_age_s": _int(sleep, "max_reading_age_s", 0, 0, 604800),
        }
    return {
        "confirm": confirm,
        "client_id": cid,
        "tls": tls,
        "version": version,
        "transport": transport,
        "host": host,
        "port": port,
        "wifi": wifi,
        "sleep": sleep,
        "keepalive": _int(raw, "keepalive_s", 60, 0, 65535),
        "session_expiry": _int(raw, "session_expiry_s", 3600, 0, 0xFFFFFFFF),
        # (a node sends one flow at a time: its gateway knows a second copy by its packet id, docs/nodes.md)
        "window": 1 if link else "auto" if raw.get("window", "auto") == "auto" else _int(raw, "window", 8, 1, 65535),
        "group_commit": _int(raw, "group_commit", 0, 0, 16),
        "heap_log_every": _int(raw, "heap_log_every", 0, 0, 0x7FFFFFFF),
        "topic": topic,
        "qos": qos,
        "count": _int(pub, "count", 10, 0, 0x7FFFFFFF),
        "interval_ms": _int(pub, "interval_ms", 0, 0, 86400000),
        "payload_bytes": _int(pub, "payload_bytes", 0, 0, 900),
        "sensor": sensor,
        "subscribe": subs,
        "uart": uart,
        "espnow": link,
        # The module whose connect(board) makes the transport (board_app.try_connect): None for plain TCP and the
        # serial link.
        "connect": "tls_open" if tls else "dlink.now_transport" if link else None,
        "username": raw.get("username"),
        "password": raw["password"].encode() if raw.get("password") is not None else None,
        "will": will,
    }


def store(cfg, key):
    """Keep the check `cfg` beside config.json for the boots after, under `key`, as config_file.read()
    reads it (config_file.py says the format). A check that cannot be kept (a full filesystem) is made again at
    the next boot."""
    frozen = dict(cfg)
    wifi = cfg["wifi"]
    if wifi is not None:
        frozen["wifi"] = dict(wifi)
        if wifi["bssid"] is not None:
            frozen["wifi"]["bssid"] = list(wifi["bssid"])
    if cfg["will"] is not None:
        topic, payload, qos, retain = cfg["will"]  # (the client's will: a tuple)
        frozen["will"] = (topic, payload.decode(), qos, retain)
    if cfg["password"] is not None:
        frozen["password"] = cfg["password"].decode()
    # Every key of the checked config's objects, each once (its nested objects are dicts, one level down).
    names = list(frozen)
    for value in frozen.values():
        if isinstance(value, dict):
            names += [name for name in value if name not in names]
    import os

    try:
        try:
            os.mkdir(cfg["root"] + "/.kept")
        except OSError:
            pass  # (there already)
        with open(cfg["root"] + "/.kept/config.checked", "w") as f:
            f.write(json.dumps([key, names]))
            f.write("\n")
            f.write(json.dumps(frozen))
    except OSError:
        pass
