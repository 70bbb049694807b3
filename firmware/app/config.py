# The board's configuration, config.json on its filesystem (on a real ESP32 the filesystem is mounted at "/",
# on the virtual board at "/flash": both are tried). check() turns the JSON into plain values and explains
# what is wrong with a bad file; main.py prints that and stops, it never crash-loops.

import json

ROOTS = ("/flash", "")
VERSIONS = {"3.1": 3, "3.1.1": 4, "5": 5, "5.0": 5}


class ConfigError(Exception):
    pass


# Every key config.json may hold (a dotted name per nested key): any other is refused, so that a misspelt "qso"
# does not leave QoS at its default without a word.
KEYS = (
    "client_id mqtt_version transport broker uart wifi will username password publish subscribe tls keepalive_s"
    " session_expiry_s window group_commit heap_log_every publish.topic publish.qos publish.count"
    " publish.interval_ms publish.payload_bytes uart.id uart.baud uart.tx uart.rx uart.pause wifi.ssid"
    " wifi.password wifi.ip wifi.bssid sleep sleep.every_s sleep.awake_s"
    " will.topic will.payload will.qos will.retain tls.ca tls.cert tls.key tls.server_hostname tls.insecure"
    " subscribe.topic subscribe.qos confirm confirm.topic confirm.timeout_s confirm.hold"
).split()


def _known(obj, where):
    for key in obj:
        name = where + key
        if name not in KEYS:
            raise ConfigError("unknown key %s" % name)
        value = obj[key]
        for item in value if isinstance(value, list) else (value,):
            if isinstance(item, dict):
                _known(item, name + ".")


def root():
    """Where the filesystem is: /flash on the virtual board (and pyboard-style ports), / on an ESP32."""
    import os

    for candidate in ROOTS:
        try:
            os.stat(candidate + "/config.json")
            return candidate
        except OSError:
            pass
    raise ConfigError("no config.json in /flash or /")


SECRET_KEYS = ("username", "password")  # also wifi.password and tls.key, merged from secrets.json


def load():
    base = root()
    raw = _json(base + "/config.json", True)
    secrets = _json(base + "/secrets.json", False)
    if secrets is not None:
        merge_secrets(raw, secrets)
    return check(raw)


def _json(path, required):
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        if required:
            raise ConfigError("no %s" % path)
        return None
    try:
        return json.loads(text)
    except ValueError:
        raise ConfigError("%s is not valid JSON" % path)


def merge_secrets(raw, secrets):
    """secrets.json beside config.json (so that config.json can be shared and committed): username, password,
    {"wifi": {"password"}}, {"tls": {"key"}} override what config.json says."""
    if not isinstance(raw, dict) or not isinstance(secrets, dict):
        raise ConfigError("config.json and secrets.json must each hold a JSON object")
    for key in SECRET_KEYS:
        if key in secrets:
            raw[key] = secrets[key]
    for section, key in (("wifi", "password"), ("tls", "key")):
        value = secrets.get(section, {})
        if isinstance(value, dict) and key in value:
            raw.setdefault(section, {})
            if not isinstance(raw[section], dict):
                raise ConfigError("%s must be an object" % section)
            raw[section][key] = value[key]


def _tls(raw, transport):
    """tls: {ca, cert, key, server_hostname, insecure}; None without it. Messages name fields, never values:
    a key must not reach the console."""
    tls = raw.get("tls")
    if tls is None:
        return None
    if transport != "tcp":
        raise ConfigError("tls is for transport tcp (over the serial link the bridge speaks TLS to the broker)")
    if not isinstance(tls, dict):
        raise ConfigError("tls must be {ca, cert, key, server_hostname, insecure}")
    for key in ("ca", "cert", "key", "server_hostname"):
        if tls.get(key) is not None and (not isinstance(tls[key], str) or not tls[key]):
            raise ConfigError("tls.%s must be a path on the board or PEM text" % key)
    insecure = tls.get("insecure", False)
    if not isinstance(insecure, bool):
        raise ConfigError("tls.insecure must be true or false")
    if not tls.get("ca") and not insecure:
        raise ConfigError('tls.ca is required to verify the broker (or "insecure": true, for lab use only)')
    if bool(tls.get("cert")) != bool(tls.get("key")):
        raise ConfigError("tls.cert and tls.key go together (a client certificate and its key)")
    return {
        "ca": tls.get("ca"),
        "cert": tls.get("cert"),
        "key": tls.get("key"),
        "server_hostname": tls.get("server_hostname"),
        "insecure": insecure,
    }


def _wifi(wifi):
    """wifi: {ssid, password, ip, bssid}; None without it. ip: [address, mask, gateway, dns] for a static address
    (no DHCP); bssid: the access point's, "aa:bb:cc:dd:ee:ff" (no scan of every channel)."""
    if wifi is None:
        return None
    if not isinstance(wifi, dict) or not isinstance(wifi.get("ssid"), str) or not wifi["ssid"]:
        raise ConfigError("wifi must be {ssid, password, ip, bssid}")
    ip = wifi.get("ip")
    if ip is not None and not (isinstance(ip, list) and len(ip) == 4 and all(_dotted(a, ".", 10, 4) for a in ip)):
        raise ConfigError("wifi.ip must be [address, mask, gateway, dns], four dotted addresses")
    bssid = wifi.get("bssid")
    if bssid is not None and not _dotted(bssid, ":", 16, 6):
        raise ConfigError('wifi.bssid must be six hex bytes, "aa:bb:cc:dd:ee:ff"')
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


def _sleep(raw):
    """sleep: {every_s, awake_s}: a reading at each wake, then deep sleep; None without it."""
    sleep = raw.get("sleep")
    if sleep is None:
        return None
    if not isinstance(sleep, dict):
        raise ConfigError("sleep must be {every_s, awake_s}")
    return {"every_s": _int(sleep, "every_s", 60, 1, 86400), "awake_s": _int(sleep, "awake_s", 30, 1, 3600)}


def _int(raw, key, default, low, high):
    value = raw.get(key, default)
    if not isinstance(value, int) or not low <= value <= high:
        raise ConfigError("%s must be an integer from %d to %d" % (key, low, high))
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
        raise ConfigError("%s %r: not well-formed UTF-8 [MQTT-1.5.3-1]" % (what, topic))
    try:
        if is_filter:
            codec.check_filter(data)
        else:
            codec.check_topic(data)
    except codec.CodecError as exc:
        raise ConfigError("%s %r: %s" % (what, topic, exc))


def _confirm(raw, cid, qos):
    """confirm: {topic, timeout_s, hold} (end-to-end confirmation by the recorder); None without it."""
    confirm = raw.get("confirm")
    if confirm is None:
        return None
    if not isinstance(confirm, dict):
        raise ConfigError("confirm must be {topic, timeout_s, hold}")
    if qos == 0:
        raise ConfigError("confirm is for publish.qos 1 and 2 (QoS 0 messages are not journaled)")
    topic = str(confirm.get("topic", "confirm/{client_id}")).replace("{client_id}", cid)
    _topic(topic, "confirm.topic", False)
    hold = confirm.get("hold", False)
    if not isinstance(hold, bool):
        raise ConfigError("confirm.hold must be true or false")
    # Named as dmqtt.confirm.ConfirmingClient takes them.
    return {"confirm_topic": topic, "timeout_s": _int(confirm, "timeout_s", 30, 1, 86400), "hold": hold}


def check(raw):
    if not isinstance(raw, dict):
        raise ConfigError("config.json must hold a JSON object")
    _known(raw, "")
    cid = raw.get("client_id")
    if not isinstance(cid, str) or not cid:
        raise ConfigError("client_id must be a non-empty string")
    version = VERSIONS.get(str(raw.get("mqtt_version", "3.1.1")))
    if version is None:
        raise ConfigError("mqtt_version must be one of 3.1, 3.1.1, 5")
    transport = raw.get("transport", "tcp")
    if transport not in ("tcp", "serial"):
        raise ConfigError('transport must be "tcp" or "serial"')
    host, port = "", 0
    broker = str(raw.get("broker", ""))
    if broker or transport == "tcp":
        # Over the serial link the broker is optional: the bridge's default broker is used without one.
        host, _, port_text = broker.rpartition(":")
        if not host or not port_text.isdigit():
            raise ConfigError("broker must be host:port, got %r" % broker)
        port = int(port_text)
    uart = raw.get("uart", {})
    if not isinstance(uart, dict):
        raise ConfigError("uart must be {id, baud, tx, rx, pause}")
    if not isinstance(uart.get("pause", True), bool):
        raise ConfigError("uart.pause must be true or false")
    wifi = _wifi(raw.get("wifi"))
    will = raw.get("will")
    if will is not None:
        if not isinstance(will, dict) or not isinstance(will.get("topic"), str) or will.get("qos", 0) not in (0, 1, 2):
            raise ConfigError("will must be {topic, payload, qos 0..2, retain}")
        will = (
            will["topic"].replace("{client_id}", cid),
            str(will.get("payload", "")).encode(),
            will.get("qos", 0),
            bool(will.get("retain", False)),
        )
    for key in ("username", "password"):
        if raw.get(key) is not None and not isinstance(raw.get(key), str):
            raise ConfigError("%s must be a string" % key)
    pub = raw.get("publish", {})
    if not isinstance(pub, dict):
        raise ConfigError("publish must be an object")
    qos = pub.get("qos", 1)
    if qos not in (0, 1, 2):
        raise ConfigError("publish.qos must be 0, 1 or 2")
    subs = []
    for sub in raw.get("subscribe", []):
        if not isinstance(sub, dict) or not isinstance(sub.get("topic"), str) or sub.get("qos", 0) not in (0, 1, 2):
            raise ConfigError("subscribe entries must be {topic, qos 0..2}")
        subs.append((sub["topic"].replace("{client_id}", cid), sub.get("qos", 0)))
    topic = str(pub.get("topic", "sensors/{client_id}/telemetry")).replace("{client_id}", cid)
    _topic(topic, "publish.topic", False)
    for sub_topic, _ in subs:
        _topic(sub_topic, "subscribe topic", True)
    if will is not None:
        _topic(will[0], "will.topic", False)
    tls = _tls(raw, transport)
    confirm = _confirm(raw, cid, qos)
    if confirm:
        subs.append((confirm["confirm_topic"], 0))  # the recorder's newest is retained: it comes at each subscribe
    return {
        "confirm": confirm,
        "client_id": cid,
        "tls": tls,
        "version": version,
        "transport": transport,
        "host": host,
        "port": port,
        "wifi": wifi,
        "sleep": _sleep(raw),
        "keepalive": _int(raw, "keepalive_s", 60, 0, 65535),
        "session_expiry": _int(raw, "session_expiry_s", 3600, 0, 0xFFFFFFFF),
        "window": "auto" if raw.get("window", "auto") == "auto" else _int(raw, "window", 8, 1, 65535),
        "group_commit": _int(raw, "group_commit", 0, 0, 16),
        "heap_log_every": _int(raw, "heap_log_every", 0, 0, 0x7FFFFFFF),
        "topic": topic,
        "qos": qos,
        "count": _int(pub, "count", 10, 0, 0x7FFFFFFF),
        "interval_ms": _int(pub, "interval_ms", 0, 0, 86400000),
        "payload_bytes": _int(pub, "payload_bytes", 0, 0, 900),
        "subscribe": subs,
        "uart": {
            "id": _int(uart, "id", 1, 0, 2),
            "baud": _int(uart, "baud", 115200, 1200, 5000000),
            "pins": {k: uart[k] for k in ("tx", "rx") if isinstance(uart.get(k), int)},
            "pause": uart.get("pause", True),
        },
        "username": raw.get("username"),
        "password": raw["password"].encode() if raw.get("password") is not None else None,
        "will": will,
    }
