"""Figure 10 of BENCHMARKS.md: the heap each documented configuration leaves, in each install path (deployed .mpy
files, a ROMFS image, frozen code), at each board definition's heap, against the budget of docs/install-paths.md;
and the code each module brings: its .mpy bytes against firmware/code_budget.json, and the heap its import takes
on the deployed path (64-bit objects). Each run goes through one power cut (host_bridge/hil/heap.py).

    python tools/bench_heap.py [--quick]          (part of make bench)

With BENCH_MICROPYTHON_32 naming a 32-bit build of the MicroPython Unix port (the package registries carry none:
it has to be built from MicroPython's source), the configurations without TLS (that build has no ssl module) run
on it too, in each install path: a chip's object sizes rather than the PyPI port's 64-bit ones."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench_report import Goal, Section, table
from figure_cli import print_figure

from host_bridge import assets
from host_bridge.boards.firmware_build import board_modules, stage_firmware
from host_bridge.bridge.run_command import command as bridge_command
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.broker.pki import CertificateAuthority
from host_bridge.hil.dut import Dut
from host_bridge.hil.heap import BOARDS, CONFIGURATIONS, heap_run
from host_bridge.hil.verdict import HEAP_GOAL
from host_bridge.processes import ManagedProcess
from host_bridge.vboard import VirtualBoard

INSTALLS = ["deployed", "romfs", "frozen"]

# The board's modules in the order board_app loads them (TCP and TLS, then the serial link's), for the import
# costs: the first interned name comes first, so that the pool it allocates is not charged to a module.
IMPORT_ORDER = [
    "dmqtt.errors",
    "dboard.console",
    "board_app",
    "config_file",
    "dmqtt.codec",
    "board_open",
    "config",
    "dmqtt.journal_record",
    "dmqtt.session",
    "dmqtt.journal",
    "dmqtt.journal_ring",
    "dmqtt.journal_file",
    "dmqtt.client",
    "dmqtt.transport",
    "dmqtt.tls",
    "dmqtt.confirm",
    "dlink.frame",
    "dlink.control",
    "dlink.link",
    "dlink.transport",
    "realboard",
    "dmqtt.codec_text",
    "sampler",
]
IMPORTS_APP = """import gc
getattr(gc, "bench_first_name", None)
gc.collect()
prev = gc.mem_free()
for name in %r:
    __import__(name)
    gc.collect()
    free = gc.mem_free()
    print("import", name, prev - free)
    prev = free
"""


def import_costs(work: Path) -> dict[str, int]:
    """Heap each module takes when imported on a deployed virtual board, in IMPORT_ORDER (64-bit objects)."""
    app = work / "imports"
    app.mkdir()
    for module in assets.APP.glob("*.py"):
        if module.name != "main.py":
            shutil.copyfile(module, app / module.name)
    (app / "main.py").write_text(IMPORTS_APP % IMPORT_ORDER)
    # Every module at once, which no board loads: more heap than a board has (each import's cost is the same;
    # all of them take about 130 KB). Not 256 KB: the virtual board may find no block of that size in one piece
    # among the emulation's own objects.
    with VirtualBoard(
        flash=work / "imports.flash", app=app, heap="192k", stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    ) as board:
        board.start()
        assert board.process is not None
        out, _ = board.process.communicate(timeout=120)
    costs = {}
    for line in out.decode(errors="replace").splitlines():
        if line.startswith("import "):
            _, name, cost = line.split()
            costs[name] = int(cost)
    if len(costs) != len(IMPORT_ORDER):
        raise SystemExit(f"the import run did not finish:\n{out.decode(errors='replace')[-2000:]}")
    return costs


def code_sizes(work: Path) -> list[dict[str, Any]]:
    budget = json.loads((assets.FIRMWARE / "code_budget.json").read_text())["modules"]
    staged = stage_firmware()
    costs = import_costs(work)
    packages, modules = board_modules()
    rows = []
    for name in IMPORT_ORDER:
        assert name in packages + modules, name
        file = name.replace(".", "/") + ".mpy"
        rows.append(
            {
                "module": name,
                "mpy_bytes": (staged / file).stat().st_size,
                "budget": budget[file],
                "heap_bytes": costs[name],
            }
        )
    return rows


class SerialBridge:
    """`host-bridge run` for one board at a time, as heap_run asks."""

    def __init__(self, broker: str, logs: Path) -> None:
        self.broker, self.logs = broker, logs
        self.process: ManagedProcess | None = None

    def start(self, dut: Dut) -> None:
        assert dut.link_port is not None
        args = bridge_command(self.broker, 115200, {dut.name: dut.link_port}, 5)
        self.process = ManagedProcess(args, self.logs / f"bridge-{dut.name}.log")
        self.process.wait_for("event=start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None


def figure(quick: bool) -> dict[str, Any]:
    runs = []
    port32 = os.environ.get("BENCH_MICROPYTHON_32")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ca = CertificateAuthority(work / "ca")
        with (
            Mosquitto(work / "broker") as broker,
            Mosquitto(work / "tls", tls=ca.issue("broker", "localhost", dns="localhost")) as tls,
        ):
            bridge = SerialBridge(broker.address, work)
            plan = []
            for install in INSTALLS:
                # The other paths on the virtual ESP32 only: it is the one whose image has a ROMFS partition.
                for board in ["sim"] if (quick or install != "deployed") else BOARDS:
                    plan += [(64, install, board, name) for name in CONFIGURATIONS]
            if port32:
                plan += [(32, i, "sim", n) for i in INSTALLS for n in CONFIGURATIONS if "tls" not in n]
            for bits, install, board, name in plan:
                print(f"[bench] heap: {name} on {board}, {install}, {bits}-bit", flush=True)
                if bits == 32:
                    os.environ["VBOARD_MICROPYTHON"] = str(port32)
                try:
                    summary, _accepted = heap_run(
                        work / f"{install}-{bits}", name, board, broker.address, (tls.address, ca.ca),
                        (bridge.start, bridge.stop), install,
                    )  # fmt: skip
                finally:
                    os.environ.pop("VBOARD_MICROPYTHON", None)
                runs.append(
                    {
                        "bits": bits,
                        "configuration": name,
                        "board": board,
                        "install": install,
                        "heap_at_boot": summary["heap_at_boot"],
                        "heap_min": summary["heap_min"],
                        "heap_max_block": summary["heap_max_block"],
                        "heap_tls": summary["heap_tls"],
                    }
                )
        code = code_sizes(work)
    return {"goal": HEAP_GOAL, "runs": runs, "code": code}


# -- the report (tools/bench_heap.md) ---------------------------------------------------------------------------


def _low(run: dict[str, Any]) -> int:
    return int(run["heap_min"])


def report(fig: dict[str, Any], figures: dict[str, Any]) -> Section:
    goal = fig["goal"]
    runs = [r for r in fig["runs"] if r.get("bits", 64) == 64]
    runs32 = [r for r in fig["runs"] if r.get("bits") == 32]

    def cell(run: dict[str, Any] | None) -> str:
        if run is None:
            return ""
        text = f"{_low(run) / 1024:.1f} ({run['heap_max_block'] / 1024:.1f})"
        return text if _low(run) >= goal else f"**{text}**"

    def find(among: list[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
        return next((r for r in among if all(r[k] == v for k, v in match.items())), None)

    configs = list(dict.fromkeys(r["configuration"] for r in runs))
    boards = list(dict.fromkeys(r["board"] for r in runs if r["install"] == "deployed"))
    installs = list(dict.fromkeys(r["install"] for r in runs))
    deployed = [r for r in runs if r["install"] == "deployed"]
    heaps = {b: sorted({r["heap_at_boot"] for r in deployed if r["board"] == b}) for b in boards}
    worst = min(deployed, key=_low)
    every = all(_low(r) >= goal for r in deployed)
    goals = [Goal("10", "lowest free heap on the deployed path, every configuration and board (KB, 64-bit objects)",
                  f">= {goal / 1024:.1f}", f"{_low(worst) / 1024:.1f}", every)]  # fmt: skip
    values = {
        "goal_kb": f"{goal / 1024:.0f}",
        "worst_configuration": worst["configuration"],
        "worst_board": worst["board"],
        "worst_kb": f"{_low(worst) / 1024:.1f}",
        "worst_verdict": "Every configuration meets the goal." if every else "**Not every configuration meets it.**",
        "heaps": "; ".join(f"{b} {'/'.join(f'{h / 1024:.0f}' for h in heaps[b])}" for b in boards),
        "deployed_table": table(["configuration", *boards], [
            [c, *(cell(find(runs, configuration=c, board=b, install="deployed")) for b in boards)] for c in configs
        ]),
        "installs_table": table(["configuration", *installs], [
            [c, *(cell(find(runs, configuration=c, board="sim", install=i)) for i in installs)] for c in configs
        ]),
    }  # fmt: skip
    if runs32:
        configs32 = list(dict.fromkeys(r["configuration"] for r in runs32))
        installs32 = list(dict.fromkeys(r["install"] for r in runs32))
        when = fig.get("measured_32_bit")
        values["measured_32"] = (
            f"Measured {when}, the last run with such a build (not this one's firmware)." if when else ""
        )
        values["table_32"] = table(["configuration", *installs32], [
            [c, *(cell(find(runs32, configuration=c, install=i)) for i in installs32)] for c in configs32
        ])  # fmt: skip
    if fig.get("code"):
        values["code_table"] = table(
            ["module", ".mpy bytes", "budget", "heap bytes when imported"],
            [[m["module"], m["mpy_bytes"], m["budget"], m["heap_bytes"]] for m in fig["code"]],
        )
    return Section(values, goals)


def main() -> None:
    print_figure(__doc__, figure)


if __name__ == "__main__":
    main()
