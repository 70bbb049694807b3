"""Nodes and their gateway on the bench (docs/nodes.md): a gateway board on a serial line to `host-bridge run`, its
nodes on the ESP-NOW air the virtual boards share, each node a board application that deep-sleeps between readings
and sends each at its wake. The rig starts and stops them as one, and gives the disturbances the scenarios need:
the gateway's power cut and back, the bridge killed and started again, the air made lossy, the gateway away for a
number of a node's wakes (out of range from its Kth wake to its Lth: the air acts at the node's own wake events).

Each node is a VirtualDut, run to completion by the bench's cycle (host_bridge.hil.cycle) with its power cuts, and
judged by the witness like any board (host_bridge.hil.verdict)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from host_bridge.boards.definition import BoardDefinition
from host_bridge.bridge.run_command import command as bridge_command
from host_bridge.errors import HostBridgeError
from host_bridge.hil.dut import DutError
from host_bridge.hil.virtual_dut import VirtualDut
from host_bridge.processes import ManagedProcess
from host_bridge.vboard.air import Air, LinkModel
from host_bridge.vboard.events import EventSpec
from host_bridge.vboard.serial_line import LineFaults

BAUD = 115200
GATEWAY_MAC = "24d7eb00aa01"
CHANNEL = 6
SERVED = "gateway: the host bridge serves its nodes"
# A node's lowest free heap on the deployed path (its power-on and backlog wakes run the client over ESP-NOW),
# the floor it keeps instead of the budget (host_bridge.hil.verdict.HEAP_GOAL): the node's link (dlink.now,
# now_radio, now_transport) and its journal's 64 slots (sleep.queue_limit) cost it about 2 KB more than a WiFi
# board that sleeps, on this 64-bit build, and a backlog of QoS 2 flows sent over a lossy air a little more.
# Measured: 30,560 bytes at the power-on, 28,864 at the lowest a backlog wake reached (tests/hil/test_nodes.py's
# lossy scenario, make soak's dose); frozen or in ROMFS a node keeps 100 KB and 61 KB (docs/nodes.md, "Heap").
NODE_HEAP_FLOOR = 28_160
# Each slot of sleep.queue_limit above its default 64 costs a node's session about 17 bytes (measured: 832 bytes
# from 16 slots to 64).
_SLOT_BYTES = 20


def node_heap_goal(spec: NodeSpec) -> int:
    """The lowest free heap a node of this spec must keep on the deployed path: the floor, less its slots above 64."""
    return NODE_HEAP_FLOOR - _SLOT_BYTES * max(0, spec.queue_limit - 64)


def node_mac(i: int) -> str:
    return f"24d7eb00bb{i + 1:02x}"


@dataclass
class NodeSpec:
    """A node of the rig: its client id, QoS, readings, and (optionally) its key."""

    client_id: str
    qos: int = 1
    count: int = 10
    lmk: str | None = None
    awake_s: int = 3
    queue_limit: int = 64  # readings a node's journal holds while its gateway is away
    sensor: str | None = None  # publish.sensor: "module.function" (None: the stand-in reading)
    payload_bytes: int = 60

    def config(self, gateway: str = GATEWAY_MAC, channel: int = CHANNEL) -> dict[str, Any]:
        link: dict[str, Any] = {"gateway": gateway, "channel": channel}
        if self.lmk:
            link["lmk"] = self.lmk
        publish: dict[str, Any] = {"qos": self.qos, "count": self.count, "payload_bytes": self.payload_bytes}
        if self.sensor:
            publish["sensor"] = self.sensor
        return {
            "client_id": self.client_id,
            "transport": "espnow",
            "espnow": link,
            "publish": publish,
            "sleep": {"every_s": 60, "awake_s": self.awake_s, "queue_limit": self.queue_limit},
        }


@dataclass
class NodeRig:
    """A gateway, its bridge and its nodes over one air; `close()` stops every process it started."""

    work: Path
    broker: str
    nodes: list[NodeSpec]
    default: LinkModel = field(default_factory=LinkModel)
    seed: int = 0
    board: BoardDefinition = field(default_factory=lambda: BoardDefinition.load("sim"))
    install: str = "deployed"  # the nodes' install path (the gateway's firmware is frozen)
    app: Path | None = None  # the nodes' application folder (None: the board application)
    extra_env: dict[str, str] = field(default_factory=dict)  # the nodes' environment besides the runner's

    def __post_init__(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        self.air = Air(self.default, self.seed)
        self.gateway = VirtualDut(
            "gateway",
            self.board,
            flash=self.work / "gateway" / "board.flash",
            console_log=self.work / "gateway" / "console.log",
            faults=LineFaults(baud=BAUD),
            uid=GATEWAY_MAC,
            air=self.air,
            install="frozen",  # (a gateway's firmware is frozen into its image: docs/nodes.md, its heap)
        )
        self.gateway.configure(self.gateway_config())
        self.bridge: ManagedProcess | None = None
        self.duts = [self.node(i, spec) for i, spec in enumerate(self.nodes)]
        # The gateway is booted from a thread that lives as long as the rig: a board dies with the thread that
        # started it (host_bridge.processes.dies_with_parent), and a scenario cuts and restarts it from a helper.
        self._jobs: queue.Queue[tuple[Callable[[], None], queue.Queue[BaseException | None]] | None] = queue.Queue()
        self._keeper = threading.Thread(target=self._keep, name="node-rig-gateway", daemon=True)
        self._keeper.start()

    def _keep(self) -> None:
        while (job := self._jobs.get()) is not None:
            action, done = job
            try:
                action()
                done.put(None)
            except BaseException as exc:  # noqa: BLE001 (handed to the caller's thread)
                done.put(exc)

    def _on_keeper(self, action: Callable[[], None]) -> None:
        done: queue.Queue[BaseException | None] = queue.Queue()
        self._jobs.put((action, done))
        error = done.get(timeout=60)
        if error is not None:
            raise error

    def gateway_config(self) -> dict[str, Any]:
        entries = []
        for i, spec in enumerate(self.nodes):
            entry: dict[str, Any] = {"mac": node_mac(i), "client_id": spec.client_id}
            if spec.lmk:
                entry["lmk"] = spec.lmk
            entries.append(entry)
        return {"gateway": {"channel": CHANNEL, "nodes": entries}, "uart": {"id": 1, "baud": BAUD}}

    def node(self, i: int, spec: NodeSpec) -> VirtualDut:
        options: dict[str, Any] = {"app": self.app} if self.app is not None else {}
        dut = VirtualDut(
            spec.client_id,
            self.board,
            flash=self.work / spec.client_id / "board.flash",
            console_log=self.work / spec.client_id / "console.log",
            uid=node_mac(i),
            air=self.air,
            install=self.install,
            extra_env=self.extra_env,
            optimise=True,  # (an application of the bench's own, figure 14's forgetful node, compiled as (e) is)
            **options,
        )
        dut.configure(spec.config())
        return dut

    # -- the gateway and the bridge ------------------------------------------------------------------------

    def start(self, timeout: float = 60) -> None:
        """The gateway and the bridge up, until the gateway says the bridge serves its nodes."""
        self.start_gateway()
        self.start_bridge()
        self.wait_served(timeout)

    def start_gateway(self) -> None:
        self._on_keeper(self.gateway.start)

    def wait_served(self, timeout: float = 60, after: int = 0) -> None:
        """Until the gateway's console says, for the (after+1)th time, that the bridge serves its nodes."""
        deadline = time.monotonic() + timeout
        while self.gateway.console.all().count(SERVED) <= after:
            if not self.gateway.alive():
                raise DutError(f"the gateway ended; console log {self.gateway.console.path}")
            if time.monotonic() > deadline:
                raise DutError(
                    f"the gateway was not served within {timeout:.0f} s; console {self.gateway.console.path}"
                )
            time.sleep(0.05)

    def start_bridge(self) -> None:
        port = self.gateway.link_port
        if port is None:
            raise HostBridgeError("the gateway has no serial line")
        log = self.work / f"bridge-{time.monotonic_ns()}.log"
        self.bridge = ManagedProcess(bridge_command(self.broker, BAUD, {"gateway": port}, 1), log)

    def kill_bridge(self) -> None:
        """SIGKILL of the bridge, as a crash would end it."""
        if self.bridge is not None:
            self.bridge.process.kill()
            self.bridge.process.wait()
            self.bridge.log.close()
            self.bridge = None

    def cut_gateway(self) -> None:
        """The gateway's power cut (its flash keeps what was programmed) and back on."""
        self._on_keeper(self.gateway.power_cut)
        self._on_keeper(self.gateway.start)

    # -- the air -------------------------------------------------------------------------------------------

    def away_for_wakes(self, node: int, first: int, last: int) -> None:
        """Node `node`'s gateway out of range from the node's `first` wake to before its `last`: the air acts at the
        node's own wakes, whatever the host's load."""
        mac = node_mac(node)
        self.air.at(EventSpec("wake", first), lambda: self.air.link(mac, GATEWAY_MAC, in_range=False), board=mac)
        self.air.at(EventSpec("wake", last), lambda: self.air.link(mac, GATEWAY_MAC, in_range=True), board=mac)

    def close(self) -> None:
        for dut in self.duts:
            dut.close()
        self.kill_bridge()
        self._on_keeper(self.gateway.close)
        self._jobs.put(None)
        self._keeper.join(10)
        self.air.close()


def run_nodes(rig: NodeRig, body: Any, timeout: float = 600) -> list[Any]:
    """Run `body(dut)` for every node at once (a thread each); their results in order, the first error raised."""
    results: list[Any] = [None] * len(rig.duts)
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            results[i] = body(rig.duts[i])
        except BaseException as exc:  # noqa: BLE001 (raised in the caller's thread)
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(rig.duts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    if errors:
        raise errors[0]
    return results
