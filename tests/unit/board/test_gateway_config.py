"""A gateway's config.json and a node's link to it (firmware/app/gateway_config.py), checked by the very checker the
board runs, on the host before anything is deployed (host_bridge/boards/board_config.py): what is right reads back
as the gateway and the node use it; what is wrong is refused with the field and what it must be."""

from __future__ import annotations

from typing import Any

import pytest

from host_bridge.boards.board_config import BoardConfigError, check_value

GATEWAY = {
    "gateway": {
        "channel": 6,
        "nodes": [
            {"mac": "24:D7:EB:00:BB:01", "client_id": "shed-7", "lmk": "a-16-byte-secret",
             "will": {"topic": "status/shed-7", "payload": "gone", "qos": 1}},
            {"mac": "24d7eb00bb02", "client_id": "shed-8"},
        ],
    },
    "uart": {"id": 1, "baud": 921600},
    "mqtt_version": "5",
}  # fmt: skip
NODE = {
    "client_id": "shed-7",
    "transport": "espnow",
    "espnow": {"gateway": "24:d7:eb:00:aa:01", "channel": 6, "lmk": "a-16-byte-secret"},
    "publish": {"qos": 2},
    "sleep": {"every_s": 60, "awake_s": 3},
}


def test_a_gateway_s_config_reads_as_the_gateway_uses_it() -> None:
    cfg = check_value(GATEWAY)
    nodes = cfg["gateway"]["nodes"]
    assert [n["mac"] for n in nodes] == ["24d7eb00bb01", "24d7eb00bb02"]
    assert nodes[0]["lmk"] == "a-16-byte-secret" and nodes[1]["lmk"] is None
    assert nodes[0]["will"] == ["status/shed-7", "gone", 1, False]
    assert cfg["version"] == 5 and cfg["uart"]["baud"] == 921600 and cfg["keepalive"] == 60


def test_a_node_s_config_reads_as_the_node_uses_it() -> None:
    cfg = check_value(NODE)
    assert cfg["espnow"] == {"gateway": "24d7eb00aa01", "channel": 6, "lmk": "a-16-byte-secret"}
    assert cfg["window"] == 1 and cfg["connect"] == "dlink.now_transport" and cfg["host"] == ""


def changed(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    import copy

    out = copy.deepcopy(base)
    *parents, last = path.split(".")
    where = out
    for key in parents:
        where = where[key] if not key.isdigit() else where[int(key)]
    if value is None:
        del where[last]
    else:
        where[last] = value
    return out


@pytest.mark.parametrize(
    ("config", "said"),
    [
        (changed(GATEWAY, "gateway.nodes", []), r"gateway\.nodes must list the nodes"),
        (changed(GATEWAY, "gateway.channel", 15), r"gateway\.channel must be a WiFi channel"),
        (changed(GATEWAY, "gateway.nodes.1.mac", "24:d7:eb:00:bb:01"), r"nodes\[1\]\.mac is listed twice"),
        (changed(GATEWAY, "gateway.nodes.0.mac", "24:d7:eb"), r"nodes\[0\]\.mac must be a MAC address"),
        (changed(GATEWAY, "gateway.nodes.0.lmk", "short"), r"nodes\[0\]\.lmk must be 16 characters"),
        (changed(GATEWAY, "wifi", {"ssid": "x"}), r"unknown key wifi"),
        (changed(GATEWAY, "transport", "tcp"), r"over the serial link"),
        (
            changed(
                GATEWAY,
                "gateway.nodes",
                [{"mac": f"24d7eb00cc{i:02x}", "client_id": f"n{i}", "lmk": "a-16-byte-secret"} for i in range(7)],
            ),
            r"6 of them encrypted",
        ),  # fmt: skip
        (changed(NODE, "espnow.channel", 0), r"espnow must be \{gateway"),
        (changed(NODE, "publish.qos", 0), r"publishes at QoS 1 or 2 only"),
        (changed(NODE, "sleep", None), r"a node .* sleeps"),
        (changed(NODE, "confirm", {}), r"publishes at QoS 1 or 2 only"),
    ],
)
def test_what_is_wrong_is_refused_with_its_field(config: dict[str, Any], said: str) -> None:
    with pytest.raises(BoardConfigError, match=said):
        check_value(config)
