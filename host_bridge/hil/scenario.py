"""Building blocks of the bench's scenarios: a board's config.json for a QoS flow over TCP or the serial link,
and one board's run through power cuts, reported as the verdict's BoardRun."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

from dboard import console_host
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
    wifi: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    """config.json for the board application: `count` telemetry messages at `qos` over `transport`. Over the
    serial link the board's link UART (id and pins) comes from its board definition. On TCP a real board joins
    the bench's network (--hil-wifi), and so does a virtual one when the scenario asks (`wifi`: its access
    point)."""
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
        if dut.wifi is not None and (wifi or not dut.board.virtual):
            config["wifi"] = dict(dut.wifi)
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


class Fleet:
    """Boards that run to completion at once, each in a thread of its own (run_board, through its plan's power
    cuts, none unless given), while the test's thread disturbs them (power cuts, access point outages) at
    moments it chooses by what they say. A board whose run fails fails the test: runs() raises its error."""

    def __init__(
        self,
        duts: list[Dut],
        configs: list[dict[str, Any]],
        plans: list[CutPlan] | None = None,
        timeout: float = 300,
    ) -> None:
        self.duts = duts
        self.timeout = timeout  # each board's run, from its start
        self._results: list[BoardRun | BaseException | None] = [None] * len(duts)
        plans = plans or [CutPlan.none()] * len(duts)
        self._threads = [
            threading.Thread(target=self._run, args=(i, config, plan, timeout), name=f"fleet-{dut.name}", daemon=True)
            for i, (dut, config, plan) in enumerate(zip(duts, configs, plans, strict=True))
        ]
        for thread in self._threads:
            thread.start()

    def _run(self, i: int, config: dict[str, Any], plan: CutPlan, timeout: float) -> None:
        try:
            self._results[i] = run_board(self.duts[i], config, plan, seed=i, timeout=timeout)
        except BaseException as exc:  # noqa: BLE001 (handed to the test's thread, which raises it)
            self._results[i] = exc

    def accepted(self, dut: Dut) -> int:
        """Messages `dut` has said it accepted, over every boot so far."""
        return len(console_host.lines(dut.console.all(), "accepted"))

    def wait(self, what: str, done: Callable[[], bool], timeout: float = 120) -> None:
        """Until done() (checked every 10 ms); AssertionError naming `what` if it does not come, or at once if a
        board's run has failed meanwhile."""
        deadline = time.monotonic() + timeout
        while not done():
            for result in self._results:
                if isinstance(result, BaseException):
                    raise result
            assert time.monotonic() < deadline, f"{what} did not happen within {timeout:.0f} s"
            time.sleep(0.01)

    def wait_accepted(self, n: int, timeout: float = 120) -> None:
        """Until every board has said it accepted at least `n` messages."""
        self.wait(
            f"{n} accepted messages on every board", lambda: all(self.accepted(d) >= n for d in self.duts), timeout
        )

    def finished(self) -> bool:
        """Whether every board's run has ended (completed or failed)."""
        return not any(thread.is_alive() for thread in self._threads)

    def runs(self, timeout: float | None = None) -> list[BoardRun]:
        """Every board's run once it has completed (waited for up to `timeout`; by default the runs' own
        timeout, which a long dose raises); the first failure raised."""
        wait = self.timeout if timeout is None else timeout
        for thread in self._threads:
            thread.join(wait)
            if thread.is_alive():
                raise DutError(f"{thread.name}: the run did not complete within {wait:.0f} s")
        runs = []
        for result in self._results:
            if isinstance(result, BaseException):
                raise result
            assert result is not None
            runs.append(result)
        return runs
