"""Figure 14's rows (e) and (f): a reading's charge on a node that sends it over ESP-NOW at its own wake
(docs/nodes.md), against the WiFi boards' rows of tools/bench_energy.py, which runs this.

    (e) the board application as a durable node: each reading journaled at the hint, sent as one frame to the
        gateway, its flow completed in the journal once the gateway has it on flash;
    (f) the forgetful ESP-NOW node (tools/bench_apps/forgetful_now), as mqtt_as's gateway nodes are: one frame a
        wake, no journal, no answer awaited beyond the gateway's radio's acknowledgement.

Measured on the virtual board, as (a) to (d) are: each node wake's interpreter time (the emulated hardware's own
and its waits on the air left out) and its light sleep (the AHT20's conversion), in both install paths; for (e),
the gateway's turnaround: its interpreter's work from taking the node's frame to sending the answer (the air keeps
it: Air.turnarounds), scaled by the same ratio as the node's, to which the gateway's flash program of the message
and the answer's time on the air are added; the node's radio listens meanwhile. The host's own time on the air
(sockets between processes) is no chip's and is not charged. From public figures, fixed before the result:
ESP-NOW's own time and charge on an ESP32 (INPUTS, "espnow_ms" and "espnow_mc": an optimised boot that sends one
frame, less the boot alone), and the answer's airtime ("answer_air_ms"). The
same power cuts, each inside a deep sleep, through (e) and (f), and the gateway out of range for some wakes: the
readings each loses."""

from __future__ import annotations

import json
import random
import re
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from host_bridge.boards.firmware_build import stage_firmware
from host_bridge.hil.cycle import boot_once
from host_bridge.hil.nodes import GATEWAY_MAC, NodeRig, NodeSpec
from host_bridge.hil.subscriber import Subscriber
from host_bridge.hil.virtual_dut import VirtualDut

# Public figures (glenn20/upy-esp32-experiments, ESPNowvsWifiEnergyUsage: an ESP32 with MicroPython's optimised
# boot, measured with a Power Profiler Kit II): a fast boot to _boot.py alone 70 ms and 3.32 mC; the same boot
# sending one ESP-NOW frame that the peer acknowledged 119 ms and 7.68 mC; one the peer did not, 145 ms and 15.4 mC.
INPUTS: dict[str, dict[str, Any]] = {
    "espnow_ms": {"value": 49, "what": "ESP-NOW up, one frame sent and acknowledged, down (the boot left out)",
                  "source": "glenn20/upy-esp32-experiments, ESPNowvsWifiEnergyUsage, an ESP32 and a PPK2: 119 ms "
                            "for a fast boot and one acknowledged send, less 70 ms for the fast boot alone"},
    "espnow_mc": {"value": 4.36, "what": "the charge of that, mC (1.21 uAh)",
                  "source": "the same: 7.68 mC less 3.32 mC"},
    "answer_air_ms": {"value": 0.9, "what": "the gateway's answer on the air, the node's radio acknowledging it",
                      "source": "Espressif's ESP-NOW documentation: a vendor-specific action frame of 43 bytes "
                                "besides its body, sent at 1 Mbps by default; IEEE 802.11b's DSSS timing: a long "
                                "PLCP preamble and header of 192 us, 8 us a byte. The answer (6 bytes of body) "
                                "0.58 ms, SIFS 10 us, the 14-byte acknowledgement 0.30 ms"},
}  # fmt: skip


def value(name: str) -> float:
    return float(INPUTS[name]["value"])


class NodeBench:
    """Node runs on one broker: (e)'s, through a gateway on its serial line (host_bridge.hil.nodes.NodeRig), and
    (f)'s, the forgetful node's, through the same kind of gateway."""

    def __init__(self, work: Path, broker: str, board_app: Path, aht20: Path, sensor: dict[int, Any]) -> None:
        self.work = work
        self.broker = broker
        self.board_app = board_app  # the board application with the AHT20's driver beside it (its sensor hook)
        self.aht20 = aht20
        self.sensor = sensor
        self.cuts = random.Random(62)
        self.runs = 0

    def _rig(self, name: str, spec: NodeSpec, install: str, app: Path | None = None) -> NodeRig:
        self.runs += 1
        rig = NodeRig(
            self.work / f"{name}-{self.runs}",
            self.broker,
            [spec],
            install=install,
            app=app or self.board_app,
            extra_env={"VBOARD_IMPORTS": "1"},
        )
        rig.duts[0].vboard.drive(i2c=self.sensor)
        rig.start()
        return rig

    def _cut(self, dut: VirtualDut, cuts: int) -> None:
        """`cuts` power cuts, each inside a deep sleep drawn from the first ten after a power-on."""
        for _ in range(cuts):
            end = boot_once(dut, cut_in_sleep=self.cuts.randint(1, 10), timeout=120)
            if end.kind != "power-cut":
                raise SystemExit(f"{dut.name}: a run to cut ended {end.kind}:\n{end.console[-2000:]}")

    def durable(self, count: int, install: str = "deployed", cuts: int = 0, away: int = 0) -> dict[str, Any]:
        """(e): the board application as a node, `count` readings (after `cuts` power cuts in deep sleeps), the
        gateway out of range for `away` of its wakes (from the 3rd). Its node wakes' times, what they load, and its
        witness (its `accepted` lines) against what the broker has."""
        dev = f"node-e-{install}-{self.runs + 1}"
        spec = NodeSpec(dev, qos=1, count=count + 10 * cuts, sensor="aht20.temperature", queue_limit=max(64, away + 8),
                        payload_bytes=PAYLOAD)  # fmt: skip
        rig = self._rig(dev, spec, install)
        subscriber = Subscriber(self.broker, f"{dev}-observer", f"sensors/{dev}/telemetry")
        try:
            dut = rig.duts[0]
            self._cut(dut, cuts)
            if away:
                rig.away_for_wakes(0, 3, 3 + away)
            end = boot_once(dut, timeout=120 + count)
            if end.kind != "done":
                raise SystemExit(f"{dev}: the run did not complete:\n{end.console[-2000:]}")
            sleeps = list(dut.vboard.sleeps)
            turnarounds = list(rig.air.turnarounds.get(GATEWAY_MAC, []))
            accepted = witnessed(dut)
            subscriber.wait_for(dev, len(accepted), timeout=30)
            received = subscriber.distinct(dev)
        finally:
            rig.close()
            subscriber.close()
        staged = stage_firmware(self.board_app)
        wakes = [s for s in sleeps if s["script"] == "boot.py"]  # (the application's wakes sleep from main.py)
        return {
            "install": install,
            "cuts": cuts,
            "away": away,
            "taken": len(accepted),
            "lost": len(accepted - received),
            **times(wakes),
            "turnaround_us": statistics.median(turnarounds) if turnarounds else None,
            "modules": sorted(mpy_files(staged, wakes[-1]["loaded"])) if wakes else [],
            "mpy_bytes": loaded_bytes(staged, wakes[-1]["loaded"]) if wakes else 0,
        }

    def forgetful(self, wakes: int, install: str = "deployed", cuts: int = 0, away: int = 0) -> dict[str, Any]:
        """(f): tools/bench_apps/forgetful_now, `wakes` wakes after `cuts` power cuts in deep sleeps, the gateway
        out of range for `away` of them: its wakes' times, and the readings it took against those the broker has."""
        dev = f"node-f-{install}-{self.runs + 1}"
        app = self.work / f"{dev}-app"
        shutil.copytree(Path(__file__).resolve().parent / "bench_apps" / "forgetful_now", app)
        shutil.copy(self.aht20, app)
        rig_work = self.work / f"{dev}-{self.runs + 1}"
        topic = f"sensors/{dev}/telemetry"
        settings = {"CLIENT_ID": dev, "GATEWAY": "24d7eb00aa01", "CHANNEL": 6, "TOPIC": topic, "SIZE": PAYLOAD,
                    "WAKES": wakes, "PERIOD_MS": 60000}  # fmt: skip
        (app / "settings.py").write_text("".join(f"{k} = {v!r}\n" for k, v in settings.items()))
        rig = self._rig(dev, NodeSpec(dev, qos=1, count=wakes), install, app=app)
        subscriber = Subscriber(self.broker, f"{dev}-observer", topic)
        try:
            dut = rig.duts[0]
            dut.summary_keys = ("forgetful_now",)
            self._cut(dut, cuts)
            if away:
                rig.away_for_wakes(0, 3, 3 + away)
            before = len(dut.vboard.sleeps)
            end = boot_once(dut, timeout=120 + wakes)
            if end.kind != "done":
                raise SystemExit(f"{dev}: the run did not complete:\n{end.console[-2000:]}")
            sleeps = list(dut.vboard.sleeps)[before:]
            taken = re.findall(r"^taken ([0-9a-f]{8})$", dut.console.all(), re.M)
            _arrivals(subscriber, len(taken))
            with subscriber.lock:
                received = {bytes(r.payload)[:8].decode() for r in subscriber.records}
        finally:
            rig.close()
            subscriber.close()
        del rig_work
        staged = stage_firmware(app, optimise=True)
        return {
            "install": install,
            "cuts": cuts,
            "away": away,
            "taken": len(taken),
            "lost": len(set(taken) - received),
            **times(sleeps),
            "modules": sorted(mpy_files(staged, sleeps[-1]["loaded"])) if sleeps else [],
            "mpy_bytes": loaded_bytes(staged, sleeps[-1]["loaded"]) if sleeps else 0,
        }


PAYLOAD = 100  # (tools/bench_energy.py's)


def _arrivals(subscriber: Subscriber, want: int, timeout: float = 5) -> None:
    """Until `want` messages have arrived, or `timeout` (a forgetful node's lost ones never come)."""
    deadline = time.monotonic() + timeout
    with subscriber.arrived:
        while len(subscriber.records) < want and time.monotonic() < deadline:
            subscriber.arrived.wait(max(0.01, deadline - time.monotonic()))


def times(wakes: list[dict[str, Any]]) -> dict[str, Any]:
    """The median node wake: its interpreter's time (from its first script's start to the deep sleep, the emulated
    hardware's own, its waits on the air among it, and its light sleeps left out), its light sleeps', and its
    waits on the air (host time, not charged: kept to show), in microseconds."""
    if not wakes:
        return {"wake_us": None, "slept_us": None, "air_us": None}
    return {
        "wake_us": statistics.median(w["firmware_us"] - w["emulated_us"] - w["slept_us"] for w in wakes),
        "slept_us": statistics.median(w["slept_us"] for w in wakes),
        "air_us": statistics.median(w.get("air_us", 0) for w in wakes),
    }


def witnessed(dut: VirtualDut) -> set[tuple[int, int]]:
    """What the board said it accepted, over all its boots: the (boot, seq) of each `accepted` line."""
    return {(boot, seq) for boot, seqs in dut.console.acceptances().items() for seq in seqs}


def loaded_bytes(staged: Path, loaded: list[str]) -> int:
    return sum(path.stat().st_size for path in mpy_files(staged, loaded).values())


def mpy_files(staged: Path, loaded: list[str]) -> dict[str, Path]:
    """The .mpy file of each loaded module that a deployed board loads from its filesystem (the staged root, and
    its lib/ for an application's library)."""
    found = {}
    for name in loaded:
        for folder in (staged, staged / "lib"):
            rel = name.replace(".", "/")
            for path in (folder / (rel + ".mpy"), folder / rel / "__init__.mpy"):
                if path.exists():
                    found[name] = path
    return found


def charge(
    run: dict[str, Any],
    boot_ms: float,
    ratio: float,
    cpu_ma: float,
    rx_ma: float,
    light_ma: float,
    flash: float,
    gateway_flash: float = 0.0,
) -> dict[str, float]:
    """One node wake's charge, uAh, by phase: the boot, the interpreter's work (scaled), the journal's flash time
    (`flash` ms: (e)'s PUB and DONE records; 0 for (f)), ESP-NOW's own (public figures), the wait for the gateway's
    answer ((e): the gateway's turnaround scaled as the node's work is, its flash program of the message
    (`gateway_flash` ms) and the answer's airtime, the node's radio listening) and the sensor's conversion in light
    sleep."""
    work_ms = run["wake_us"] / 1000 * ratio
    wait_ms = 0.0
    if flash:
        wait_ms = run["turnaround_us"] / 1000 * ratio + gateway_flash + value("answer_air_ms")
    phases = {
        "boot": boot_ms * cpu_ma / 3600,
        "interpreter": work_ms * cpu_ma / 3600,
        "journal": flash * cpu_ma / 3600,
        "ESP-NOW": value("espnow_mc") / 3.6,
        "gateway's answer": wait_ms * rx_ma / 3600,
        "sensor (light sleep)": run["slept_us"] / 1000 * light_ma / 3600,
    }
    phases["ms"] = boot_ms + work_ms + flash + value("espnow_ms") + wait_ms + run["slept_us"] / 1000
    return phases


def dump(runs: dict[str, Any]) -> str:
    return json.dumps(runs, indent=1)
