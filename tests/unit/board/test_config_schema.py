"""docs/config.schema.json (config.json for editors) against the board's own checker (firmware/app/config.py,
the one owner of the rules): the same keys; every config the board takes, the schema takes; and every error in
the checker's table (tests/unit/board/test_config_errors.py) an editor flags too, except the few rules a JSON Schema
cannot say, each named here with why."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from host_bridge.boards.board_config import checker
from tests.conftest import REPO
from tests.unit.board.test_config_errors import GOOD, ROWS

SCHEMA = json.loads((REPO / "docs" / "config.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
config = checker()

# Rules only the firmware checks (MQTT's topic filter grammar, a section that depends on another's value).
BOARD_ONLY = {
    "bad filter": "a filter's wildcard placement is MQTT's grammar [MQTT-4.7.1-2], beyond a pattern an editor shows",
    "tls over the serial link": "tls depends on transport's value",
}

VALID: list[dict[str, Any]] = [
    GOOD,
    {"client_id": "s1", "transport": "serial", "uart": {"id": 1, "baud": 921600, "tx": 17, "rx": 16}},
    {
        "client_id": "full",
        "mqtt_version": "5",
        "broker": "broker.lan:8883",
        "wifi": {
            "ssid": "lab",
            "password": "x",
            "ip": ["10.0.0.9", "255.255.255.0", "10.0.0.1", "10.0.0.1"],
            "bssid": "02:00:00:00:aa:01",
        },
        "sleep": {"every_s": 300, "awake_s": 20, "readings_per_send": 10, "queue_limit": 32, "max_reading_age_s": 3600},
        "will": {"topic": "status/{client_id}", "payload": "gone", "qos": 1, "retain": True},
        "username": "u",
        "password": "p",
        "publish": {"topic": "t/{client_id}", "qos": 2, "count": 0, "interval_ms": 1000, "payload_bytes": 64},
        "subscribe": [{"topic": "cmd/{client_id}/#", "qos": 2}, {"topic": "all/+"}],
        "tls": {"ca": "ca.pem", "cert": "c.pem", "key": "k.pem", "server_hostname": "broker.lan"},
        "keepalive_s": 30,
        "session_expiry_s": 86400,
        "window": 4,
        "group_commit": 8,
        "heap_log_every": 100,
    },
    {"client_id": "lab", "broker": "10.0.0.2:8883", "tls": {"insecure": True}, "window": "auto"},
]


def dotted(schema: dict[str, Any], prefix: str = "") -> set[str]:
    names = set()
    for key, sub in schema.get("properties", {}).items():
        names.add(prefix + key)
        names |= dotted(sub.get("items", sub), prefix + key + ".")
    return names


def test_the_schema_and_the_board_know_the_same_keys() -> None:
    assert dotted(SCHEMA) == set(config.KEYS)


def test_every_object_refuses_unknown_keys() -> None:
    def objects(node: Any) -> list[dict[str, Any]]:
        found = []
        if isinstance(node, dict):
            if node.get("type") == "object":
                found.append(node)
            for value in node.values():
                found += objects(value)
        elif isinstance(node, list):
            for value in node:
                found += objects(value)
        return found

    assert all(o.get("additionalProperties") is False for o in objects(SCHEMA))


@pytest.mark.parametrize("raw", VALID, ids=[c["client_id"] for c in VALID])
def test_what_the_board_takes_the_schema_takes(raw: dict[str, Any]) -> None:
    config.check(json.loads(json.dumps(raw)))  # the board takes it
    assert not list(VALIDATOR.iter_errors(raw))


@pytest.mark.parametrize(("why", "raw", "message"), ROWS, ids=[r[0] for r in ROWS])
def test_what_the_board_refuses_an_editor_flags(why: str, raw: Any, message: str) -> None:
    value = {**GOOD, **raw} if isinstance(raw, dict) else raw
    flagged = bool(list(VALIDATOR.iter_errors(value)))
    assert flagged != (why in BOARD_ONLY), f"{why}: the schema {'flags' if flagged else 'takes'} {value}"
