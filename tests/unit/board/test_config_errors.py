"""Every error of the board's config checker (firmware/app/config.py), one row each: the config that trips it
and the words the board prints after `config error:`. Run on CPython through the very module the board runs
(what `host-bridge deploy` checks a config with before it ships); the board's own printing of one of them is
tests/integration/test_tcp_publish.py's. The last test proves the table has a row for every error there is."""

from __future__ import annotations

import ast
import re
from typing import Any

import pytest

from host_bridge import assets
from host_bridge.boards.board_config import checker

config = checker()
GOOD: dict[str, Any] = {"client_id": "b1", "broker": "127.0.0.1:1883"}

# (what trips it, the config (merged over GOOD unless it is not a dict), the message, as a regular expression)
ROWS: list[tuple[str, Any, str]] = [
    ("not an object", [1, 2], r"config.json must hold a JSON object"),
    ("no client id", {"client_id": ""}, r"client_id must be a non-empty string"),
    ("unknown MQTT version", {"mqtt_version": "4"}, r"mqtt_version must be one of 3.1, 3.1.1, 5"),
    ("unknown transport", {"transport": "udp"}, r'transport must be "tcp", "serial" or "espnow"'),
    ("a node without its gateway", {"transport": "espnow", "sleep": {}}, r"espnow must be \{gateway"),
    (
        "a node's gateway not a MAC address",
        {"transport": "espnow", "espnow": {"gateway": "24:d7:eb"}, "sleep": {}},
        r"espnow must be \{gateway",
    ),
    ("a node that stays awake", {"transport": "espnow", "espnow": {"gateway": "24d7eb00aa01"}}, r"a node .* sleeps"),
    (
        "a node that subscribes",
        {"transport": "espnow", "espnow": {"gateway": "24d7eb00aa01"}, "sleep": {}, "subscribe": [{"topic": "a"}]},
        r"publishes at QoS 1 or 2 only",
    ),
    ("broker without a port", {"broker": "localhost"}, r"broker must be host:port, got 'localhost'"),
    ("uart not an object", {"uart": 1}, r"uart must be \{id, baud, tx, rx, pause\}"),
    ("uart pause not a boolean", {"uart": {"pause": 1}}, r"uart.pause must be true or false"),
    ("wifi without ssid", {"wifi": {"password": "x"}}, r"wifi must be \{ssid, password, ip, bssid\}"),
    ("wifi ip of three", {"wifi": {"ssid": "l", "ip": ["10.0.0.2", "255.255.255.0", "10.0.0.1"]}}, r"wifi.ip must be"),
    (
        "wifi ip not dotted",
        {"wifi": {"ssid": "l", "ip": ["10.0.0.300", "255.255.255.0", "10.0.0.1", "1.1.1.1"]}},
        r"wifi.ip must be \[address, mask, gateway, dns\]",
    ),
    ("wifi bssid short", {"wifi": {"ssid": "l", "bssid": "02:00:00:00:aa"}}, r"wifi.bssid must be six hex bytes"),
    (
        "sleep not an object",
        {"sleep": 60},
        r"sleep must be \{every_s, awake_s, readings_per_send, queue_limit, max_reading_age_s\}",
    ),
    (
        "store-and-forward at QoS 0",
        {"sleep": {"readings_per_send": 10}, "publish": {"qos": 0}},
        r"sleep.readings_per_send above 1 needs publish.qos 1 or 2",
    ),
    ("store-and-forward queue of none", {"sleep": {"queue_limit": 0}}, r"queue_limit must be an integer from 1 to 255"),
    ("sleep period zero", {"sleep": {"every_s": 0}}, r"every_s must be an integer from 1 to 86400"),
    ("will without topic", {"will": {"payload": "x"}}, r"will must be \{topic, payload, qos 0..2, retain\}"),
    ("password not text", {"password": 5}, r"password must be a string"),
    ("publish not an object", {"publish": 3}, r"publish must be an object"),
    ("publish QoS 3", {"publish": {"qos": 3}}, r"publish.qos must be 0, 1 or 2"),
    ("subscription without qos range", {"subscribe": [{"topic": "a", "qos": 5}]}, r"subscribe entries must be"),
    ("wildcard in the publish topic", {"publish": {"topic": "a/#"}}, r"publish.topic 'a/#': .*wildcard"),
    ("bad filter", {"subscribe": [{"topic": "a/#/b", "qos": 1}]}, r"subscribe topic 'a/#/b': "),
    ("will topic with a wildcard", {"will": {"topic": "w/+"}}, r"will.topic 'w/\+': "),
    ("tls over the serial link", {"transport": "serial", "tls": {"ca": "ca.pem"}}, r"tls is for transport tcp"),
    ("tls not an object", {"tls": "yes"}, r"tls must be \{ca, cert, key, server_hostname, insecure\}"),
    ("tls.ca empty", {"tls": {"ca": ""}}, r"tls.ca must be a path on the board or PEM text"),
    ("tls.insecure not a bool", {"tls": {"ca": "c", "insecure": "no"}}, r"tls.insecure must be true or false"),
    ("tls without a CA", {"tls": {}}, r"tls.ca is required to verify the broker"),
    ("confirm not an object", {"confirm": True}, r"confirm must be \{topic, timeout_s, hold\}"),
    ("confirm at QoS 0", {"confirm": {}, "publish": {"qos": 0}}, r"confirm is for publish.qos 1 and 2"),
    ("confirm.hold not a bool", {"confirm": {"hold": 1}}, r"confirm.hold must be true or false"),
    ("confirm topic with a wildcard", {"confirm": {"topic": "c/#"}}, r"confirm.topic 'c/#': "),
    ("cert without key", {"tls": {"ca": "c", "cert": "x"}}, r"tls.cert and tls.key go together"),
    ("keepalive out of range", {"keepalive_s": 70000}, r"keepalive_s must be an integer from 0 to 65535"),
    ("window zero", {"window": 0}, r"window must be an integer from 1 to 65535"),
    ("group commit too large", {"group_commit": 17}, r"group_commit must be an integer from 0 to 16"),
    ("payload too large", {"publish": {"payload_bytes": 901}}, r"payload_bytes must be an integer from 0 to 900"),
    ("uart id", {"uart": {"id": 3}}, r"id must be an integer from 0 to 2"),
    ("uart baud", {"uart": {"baud": 300}}, r"baud must be an integer from 1200 to 5000000"),
    ("count negative", {"publish": {"count": -1}}, r"count must be an integer from 0 to 2147483647"),
    ("a misspelt key", {"publsh": {}}, r"unknown key publsh$"),
    ("a misspelt publish key", {"publish": {"qso": 2}}, r"unknown key publish.qso$"),
    ("a misspelt tls key", {"tls": {"ca": "c", "cafile": "x"}}, r"unknown key tls.cafile$"),
    ("a misspelt subscription key", {"subscribe": [{"topic": "a", "qso": 1}]}, r"unknown key subscribe.qso$"),
    ("a misspelt uart key", {"uart": {"pins": 1}}, r"unknown key uart.pins$"),
]


@pytest.mark.parametrize(("why", "raw", "message"), ROWS, ids=[r[0] for r in ROWS])
def test_each_config_error_names_what_is_wrong(why: str, raw: Any, message: str) -> None:
    with pytest.raises(config.ConfigError) as caught:
        config.check({**GOOD, **raw} if isinstance(raw, dict) else raw)
    assert re.search(message, str(caught.value)), str(caught.value)


def test_secrets_merge_errors() -> None:
    with pytest.raises(config.ConfigError, match="must each hold a JSON object"):
        config.merge_secrets([], {})
    with pytest.raises(config.ConfigError, match="wifi must be an object"):
        config.merge_secrets({"wifi": "lab"}, {"wifi": {"password": "x"}})


def test_the_table_covers_every_error_the_checker_raises() -> None:
    """Each `raise ConfigError(...)` in config.py: the ones check() and merge_secrets() raise are in the tables
    above (by their message's first words); the file-reading ones (no config.json, bad JSON) are the board's and
    deploy's, tested there."""
    tree = ast.parse((assets.APP / "config.py").read_text())
    raised = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            arg = node.exc.args[0]
            text = arg.left if isinstance(arg, ast.BinOp) else arg
            if isinstance(text, ast.Constant) and isinstance(text.value, str):
                raised.append(text.value.split("%")[0].strip())
    covered = " | ".join(message for _, _, message in ROWS) + " | must each hold | must be an object"
    file_errors = {"no config.json in /flash or /", "no", ""}  # load(): a missing or unreadable file
    missing = [t for t in raised if t not in file_errors and re.escape(t)[:12].replace("\\", "") not in covered]
    assert not missing, f"config errors without a row: {missing}"
