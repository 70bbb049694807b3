# The board's configuration, /flash/config.json (on a real ESP32 the filesystem is mounted at "/", on the
# virtual board at "/flash": both are tried). A bad config is reported on the console, never a crash loop.

import json

PATHS = ("/flash/config.json", "/config.json")
VERSIONS = {"3.1": 3, "3.1.1": 4, "5": 5, "5.0": 5}


class ConfigError(Exception):
    pass


def load():
    for path in PATHS:
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        try:
            raw = json.loads(text)
        except ValueError:
            raise ConfigError("%s is not valid JSON" % path)
        return check(raw)
    raise ConfigError("no config.json in /flash or /")


def check(raw):
    if not isinstance(raw, dict):
        raise ConfigError("config.json must hold a JSON object")
    cid = raw.get("client_id")
    if not isinstance(cid, str) or not cid:
        raise ConfigError("client_id must be a non-empty string")
    version = VERSIONS.get(str(raw.get("mqtt_version", "3.1.1")))
    if version is None:
        raise ConfigError("mqtt_version must be one of 3.1, 3.1.1, 5")
    broker = str(raw.get("broker", ""))
    host, _, port = broker.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError("broker must be host:port, got %r" % broker)
    pub = raw.get("publish", {})
    qos = pub.get("qos", 1)
    if qos not in (0, 1, 2):
        raise ConfigError("publish.qos must be 0, 1 or 2")
    return {
        "client_id": cid,
        "version": version,
        "host": host,
        "port": int(port),
        "keepalive": int(raw.get("keepalive_s", 60)),
        "topic": str(pub.get("topic", "sensors/{client_id}/telemetry")).replace("{client_id}", cid),
        "qos": qos,
        "count": int(pub.get("count", 10)),
        "interval_ms": int(pub.get("interval_ms", 0)),
        "payload_bytes": int(pub.get("payload_bytes", 0)),
    }
