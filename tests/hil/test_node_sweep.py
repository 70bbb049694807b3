"""A cut at every flash operation of a node's sending wake (docs/nodes.md), on the virtual board, each in the same
life: the node journals its reading at the hint, sends it to the gateway in one ESP-NOW frame and, once the gateway
has it on flash, marks it done. Each of that wake's operations is cut two ways, as tests/integration/
test_sampling_sweep.py cuts a WiFi board's sampling wake:

- a power cut: RTC memory is lost with the hint, so the next boot is a power-on that opens the whole journal and
  sends what is outstanding through the client over ESP-NOW;
- a reset that keeps RTC memory as the cut left it (a watchdog, a panic, a brown-out of the CPU alone while the
  radio sends), taken for a wake from deep sleep: the next boot's check against the flash must find what the torn
  wake left; a reading the gateway already holds goes again under its packet id, which the gateway takes as a
  copy; and the next reading takes the next seq, not the torn wake's.

Between two cut wakes the node makes one clean wake, so that each cut falls in a wake that appends at its hint. The
life then runs to its end, and the witness judges it: every reading the node said it accepted reaches the broker,
and at QoS 2 once. `make test` sweeps at QoS 2; NODES_SOAK=1 (in `make soak`) at QoS 1 and 2, each kind of cut twice."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from dboard.console_host import acceptances
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.nodes import NodeRig, NodeSpec, node_mac
from host_bridge.hil.subscriber import Subscriber
from host_bridge.vboard.runner import (
    DEEPSLEEP_EXIT_STATUS,
    DEEPSLEEP_RESET,
    POWER_CUT_EXIT_STATUS,
    TIMER_WAKE,
    VirtualBoard,
)
from tests.integration.boards import NOT_WHERE_LEFT

SOAK = os.environ.get("NODES_SOAK") == "1"
ROUNDS = 2 if SOAK else 1  # sweeps of every operation, each kind of cut
READINGS = 36 * ROUNDS  # enough for the sweeps' wakes (about 25 a round), the rest taken after them
SETTLED = " ms, 0 in flight"  # a wake that left nothing in flight (its console's sleep line)


class NodeLife:
    """One node's boots, what each printed, and the modules each wake had loaded."""

    def __init__(self, folder: Path, rig: NodeRig, spec: NodeSpec) -> None:
        folder.mkdir()
        self.flash = folder / "node.flash"
        settings = folder / "config.json"
        settings.write_text(json.dumps(spec.config()))
        self.board = VirtualBoard(
            self.flash, config=settings, uid=node_mac(0), air=rig.air, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, seed=11,
        )  # fmt: skip
        self.out: list[str] = []
        self.wakes: list[dict[str, object]] = []

    def boot(self) -> int:
        self.board.start()
        self.out.append(self.board.output(60))
        status = self.board.wait()
        self.wakes.append(self.board.last_wake() if status == DEEPSLEEP_EXIT_STATUS else {})
        return status

    def woken(self) -> None:
        """The next boot is a wake from deep sleep by the timer, whatever ended the last."""
        self.board.reset_cause, self.board.wake_reason = DEEPSLEEP_RESET, TIMER_WAKE

    def accepted(self) -> set[tuple[str, str]]:
        return {(str(boot), str(seq)) for out in self.out for boot, seqs in acceptances(out).items() for seq in seqs}

    def console(self) -> str:
        return "".join(f"--- boot {i}\n{out}" for i, out in enumerate(self.out))


def arrived(observer: Subscriber, dev: str, expected: set[tuple[str, str]], timeout: float = 30) -> Counter[str]:
    """Every delivery's "boot seq" for `dev`, once `expected` have all arrived or at `timeout`."""
    deadline = time.monotonic() + timeout
    with observer.arrived:
        while True:
            found = Counter(
                (str(r.telemetry.boot), str(r.telemetry.seq))
                for r in observer.records
                if r.telemetry is not None and r.telemetry.dev == dev
            )
            left = deadline - time.monotonic()
            if expected <= set(found) or left <= 0:
                return found  # type: ignore[return-value]
            observer.arrived.wait(left)


@pytest.mark.parametrize("qos", [1, 2] if SOAK else [2])
def test_a_cut_at_every_operation_of_a_nodes_wake_loses_nothing(hil_broker: Mosquitto, hil_log: Path, qos: int) -> None:
    dev = f"node-sweep-{qos}"
    spec = NodeSpec(dev, qos=qos, count=READINGS)
    rig = NodeRig(hil_log / "rig", hil_broker.address, [spec])
    observer = Subscriber(hil_broker.address, f"{dev}-observer", f"sensors/{dev}/#")
    rig.start()
    life = NodeLife(hil_log / "node", rig, spec)
    cuts: list[str] = []
    caught = False  # a reset's next wake found what the torn wake left
    try:
        status = life.boot()  # the power-on
        for kind in ("power cut", "reset") * ROUNDS:
            op = 0
            while True:
                op += 1
                assert status == DEEPSLEEP_EXIT_STATUS, life.out[-1][-3000:]
                for _ in range(5):  # clean wakes, until one leaves nothing in flight: the next appends at its hint
                    life.board.next_boot(status)
                    status = life.boot()
                    assert status == DEEPSLEEP_EXIT_STATUS, life.out[-1][-3000:]
                    if SETTLED in life.out[-1]:
                        break
                else:
                    raise AssertionError(f"five wakes in a row left a reading in flight: {life.console()[-3000:]}")
                life.board.next_boot(status)
                life.board.cut_at_op = op
                status = life.boot()
                life.board.cut_at_op = 0
                if status == DEEPSLEEP_EXIT_STATUS:
                    break  # the wake made fewer operations than `op`: each has been cut
                assert status == POWER_CUT_EXIT_STATUS, life.out[-1][-3000:]
                cuts.append(f"{kind} at operation {op} of boot {len(life.out) - 1}")
                if kind == "reset":
                    life.woken()  # (RTC memory as the cut left it)
                else:
                    life.board.next_boot(status)
                status = life.boot()
                caught = caught or (kind == "reset" and NOT_WHERE_LEFT in life.out[-1])
            assert op > 2, f"a node's sending wake made {op - 1} flash operations: {life.console()[-3000:]}"
        # The life to its end: the readings all taken and acknowledged.
        while status != 0:
            assert status == DEEPSLEEP_EXIT_STATUS, life.out[-1][-3000:]
            assert len(life.out) < 3 * READINGS, "the run never completed"
            life.board.next_boot(status)
            status = life.boot()
        expected = life.accepted()
        found = arrived(observer, dev, expected)
    finally:
        life.board.close()
        observer.close()
        rig.close()
    (hil_log / "node-console.log").write_text(life.console())
    missing = expected - set(found)
    assert not missing, f"accepted and never arrived: {sorted(missing)}; cuts {cuts}"
    if qos == 2:
        twice = {key: n for key, n in found.items() if n > 1}
        assert not twice, f"delivered more than once: {twice}; cuts {cuts}"
    assert caught, f"no reset left a torn wake that the next wake's check found; cuts {cuts}"
    shutil.rmtree(hil_log / "node", ignore_errors=True)
