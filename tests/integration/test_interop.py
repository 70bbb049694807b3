"""The interop matrix (docs/brokers.md, host_bridge/campaigns/interop.py): the board's client on a virtual board
against brokers other than Mosquitto, each started on loopback and stopped by the test, through a power cut in the
middle of each flow. `make test` runs amqtt (PyPI), a fast peer; `make soak` (INTEROP_ALL=1) every broker this
machine installs: Mosquitto, amqtt, Aedes, RabbitMQ's MQTT plugin and ejabberd's mod_mqtt."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from host_bridge.broker.peers import PEERS
from host_bridge.campaigns.interop import Cell, run_matrix

ALL = os.environ.get("INTEROP_ALL") == "1"


def by_key(cells: list[Cell]) -> dict[tuple[str, str, int], Cell]:
    return {(c.broker, c.mqtt, c.qos): c for c in cells}


def test_amqtt_keeps_every_promise_over_311_and_does_not_answer_50(tmp_path: Path) -> None:
    """amqtt 0.12 speaks MQTT 3.1.1 only. Over 3.1.1 every promise holds through a power cut mid-flow, QoS 2
    included (where the cut lands just so, amqtt sends a PUBREC of a flow that has ended after the reconnect: the
    client answers it, tests/integration/test_client_wire.py). A 5.0 CONNECT gets no answer: the client says so
    and keeps the messages."""
    cells = by_key(run_matrix(["amqtt"], tmp_path, count=6, every=False, say=lambda _: None))
    for qos in (0, 1, 2):
        cell = cells[("amqtt", "3.1.1", qos)]
        assert cell.outcome == "kept", cell
    refused = cells[("amqtt", "5", 1)]
    assert refused.outcome == "refused" and "no answer from the broker" in refused.detail, refused


@pytest.mark.skipif(not ALL, reason="make soak: INTEROP_ALL=1 (every broker, RabbitMQ and ejabberd from Debian)")
def test_every_broker_of_the_matrix(tmp_path: Path) -> None:
    """Every cell runs to an outcome. Where a broker keeps the protocol, every promise holds; where it breaks one,
    the client names what it did instead of waiting (RabbitMQ's PUBACK for QoS 2)."""
    cells = run_matrix(list(PEERS), tmp_path, count=12, say=print)
    assert all(c.outcome in ("kept", "fault", "refused") for c in cells), [
        c for c in cells if c.outcome not in ("kept", "fault", "refused")
    ]
    found = by_key(cells)
    for name in ("mosquitto", "ejabberd"):
        for mqtt in ("3.1.1", "5"):
            for qos in (0, 1, 2):
                assert found[(name, mqtt, qos)].outcome == "kept", found[(name, mqtt, qos)]
    rabbit = found[("rabbitmq", "3.1.1", 2)]
    assert rabbit.outcome == "fault" and "PUBACK" in rabbit.detail, rabbit
