"""Building blocks of the bench's scenarios: a board's config.json for a QoS flow over TCP or the serial link,
and one board's run through power cuts, reported as the verdict's BoardRun."""

from __future__ import annotations

import random
from typing import Any

from host_bridge.hil.cycle import CutPlan, run_to_completion
from host_bridge.hil.dut import Dut, DutError
from host_bridge.hil.verdict import BoardRun

TOPIC = "sensors/{client_id}/telemetry"


def app_config(
    dut: Dut,
    client_id: str,
    broker: str,
    qos: int,
    count: int,
    version: str = "3.1.1",
    transport: str = "tcp",
    baud: int = 115200,
    **extra: Any,
) -> dict[str, Any]:
    """config.json for the board application: `count` telemetry messages at `qos` over `transport`. Over the
    serial link the board's link UART (id and pins) comes from its board definition."""
    publish = {"topic": TOPIC, "qos": qos, "count": count, "payload_bytes": 100}
    publish.update(extra.pop("publish", {}))
    config: dict[str, Any] = {
        "client_id": client_id,
        "mqtt_version": version,
        "transport": transport,
        "publish": publish,
    }
    if transport == "tcp":
        config["broker"] = broker
    else:
        uart = dut.board.uart
        config["uart"] = {"id": uart.id if uart else 1, "baud": baud}
        if uart is not None and not dut.board.virtual:
            config["uart"].update({"tx": uart.tx, "rx": uart.rx})
    config.update(extra)
    return config


def run_board(
    dut: Dut, config: dict[str, Any], plan: CutPlan, seed: int, timeout: float = 300, refused: int = 0
) -> BoardRun:
    """Configure `dut`, then boot it through `plan`'s power cuts until its run completes: every message of the
    run accepted (its total the configured count) and `refused` of them refused, or DutError."""
    dut.configure(config)
    result = run_to_completion(dut, plan, random.Random(seed), timeout)
    run = BoardRun.from_cycle(dut, result, int(config["publish"]["qos"]))
    assert result.summary is not None
    count = int(config["publish"]["count"])
    if (run.sent, result.summary["refused"]) != (count - refused, refused):
        raise DutError(
            f"{dut.name}: the run accepted {run.sent} of {count} messages and refused {result.summary['refused']} "
            f"(expected {count - refused} and {refused}); console log {dut.console.path}"
        )
    return run
