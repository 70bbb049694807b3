"""Figures 1 and 5 of BENCHMARKS.md: the board's client against umqtt.simple, the MicroPython client people use
today, on the same Unix port of MicroPython and the same Mosquitto, in one run.

    python tools/bench_clients.py [--quick]          (part of make bench)

umqtt.simple is fetched from PyPI at run time (the sdist, checked against its SHA-256) into a temporary folder,
compiled to .mpy like the firmware, and never kept. Each run is one virtual board publishing for a fixed time:
loopback, and through a proxy that adds a 10 ms or 50 ms round trip (a WiFi link to a distant broker), with
Mosquitto's `set_tcp_nodelay` on and off. A windowed client's ceiling there is window / round trip (QoS 1) or
window / (2 round trips) (QoS 2); the round trip is measured through the proxy in the same run."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_report import Goal, Section, goal_table, table
from delay_proxy import DelayProxy

from dmqtt import codec
from host_bridge.boards.definition import BoardDefinition
from host_bridge.boards.firmware_build import MPY_CROSS_OPTIONS, mpy_cross_executable, stage_firmware
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.cycle import boot_once
from host_bridge.hil.virtual_dut import VirtualDut
from host_bridge.vboard.flash_image import parse_size
from host_bridge.vboard.runner import micropython_command
from host_bridge.vboard.stock import STOCK, fetch_member

UMQTT = {"name": STOCK[0].distribution, "version": STOCK[0].version, "url": STOCK[0].url, "sha256": STOCK[0].sha256}
REPO = Path(__file__).resolve().parents[1]
APP = Path(__file__).resolve().parent / "bench_apps" / "clients"
RAM_PARTITION_HEAP = 72 * 1024  # the dmqtt-ram case's 64 KiB partition stands in for flash: not the board's heap
PATHS = {"loopback": 0.0, "rtt 10 ms": 5.0, "rtt 50 ms": 25.0}  # one-way delay added by the proxy


def fetch_umqtt(into: Path) -> Path:
    """umqtt/simple.py from the PyPI sdist, saved as umqtt_simple.py in `into`."""
    target = into / "umqtt_simple.py"
    target.write_bytes(fetch_member(STOCK[0].url, STOCK[0].sha256, STOCK[0].path))
    return target


def round_trip_ms(address: str, samples: int = 15) -> float:
    """Median PINGREQ -> PINGRESP time of an MQTT connection to `address` (the broker's own time included)."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(codec.encode_connect("bench-rtt", codec.V311, 60, True))
        sock.recv(4)
        times = []
        for _ in range(samples):
            start = time.perf_counter()
            sock.sendall(codec.encode_empty(codec.PINGREQ))
            got = b""
            while len(got) < 2:
                got += sock.recv(2 - len(got))
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


class Runner:
    def __init__(self, work: Path, app: Path, seconds: float) -> None:
        self.work = work
        self.app = app
        self.seconds = seconds
        self.board = BoardDefinition.load("sim")
        self.count = 0

    def run(
        self,
        address: str,
        client: str,
        qos: int,
        size: int,
        window: Any = 8,
        umqtt_nodelay: bool = True,
        flash_timing: bool = False,
    ) -> dict[str, Any]:
        self.count += 1
        host, port = address.rsplit(":", 1)
        config = {
            "client": client, "host": host, "port": int(port), "qos": qos, "size": size, "window": window,
            "seconds": self.seconds, "max": 1_000_000, "nodelay": umqtt_nodelay, "version": codec.V5,
        }  # fmt: skip
        folder = self.work / f"run-{self.count}"
        heap = parse_size(self.board.heap) + (RAM_PARTITION_HEAP if client == "dmqtt-ram" else 0)
        dut = VirtualDut(
            f"bench-{self.count}",
            self.board,
            flash=folder / "b.flash",
            console_log=folder / "console.log",
            app=self.app,
            library=True,  # the client library in lib/, as mip installs it (the asyncio face is not the board's)
            heap=str(heap),
            flash_timing=flash_timing,
        )
        dut.summary_keys = ("total", "ms")  # the benchmark app's own summary line
        try:
            dut.configure(config)
            end = boot_once(dut, timeout=120 + 4 * self.seconds)
        finally:
            dut.close()
        if end.summary is None:
            raise SystemExit(f"{client} qos {qos} size {size} window {window} failed:\n{end.console}")
        shutil.rmtree(folder, ignore_errors=True)
        result = end.summary
        rate = result["total"] * 1000 / max(1, result["ms"])
        return {
            "msgs": result["total"],
            "ms": result["ms"],
            "rate": rate,
            "heap": result["heap"],
            "window_used": result["window"],
            **({"idle_wakes_per_s": result["wakes_per_s"]} if "wakes_per_s" in result else {}),
        }


def figure(quick: bool) -> dict[str, Any]:
    seconds = 0.4 if quick else 1.5
    rows: list[dict[str, Any]] = []
    heap: list[dict[str, Any]] = []
    rtts: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        app = work / "app"
        shutil.copytree(APP, app)
        fetch_umqtt(app)
        runner = Runner(work, app, seconds)
        for nodelay in (True, False):
            options = () if nodelay else ("set_tcp_nodelay false",)
            with Mosquitto(work / f"broker-{nodelay}", options=options) as broker:
                for path, one_way in PATHS.items():
                    if quick and path == "rtt 10 ms":
                        continue
                    with DelayProxy(broker.address, one_way) as proxy:
                        address = proxy.address if one_way else broker.address
                        rtt = round_trip_ms(address)
                        rtts[f"{path}, broker nodelay {'on' if nodelay else 'off'}"] = rtt
                        for case in cases(quick, nodelay, one_way > 0):
                            proxy.lateness()  # from this run on
                            got = runner.run(address, **case)
                            row = {"path": path, "broker_nodelay": nodelay, "rtt_ms": round(rtt, 2), **case, **got}
                            row.update(ceiling(got, case["qos"], rtt if one_way else 0.0, proxy.lateness()[1]))
                            rows.append(row)
                            print(_line(row), flush=True)
        timed: list[dict[str, Any]] = []
        with Mosquitto(work / "broker-timed") as broker:
            # Figure 2: the same durable client with the emulated flash taking a real chip's time.
            for qos in (1, 2):
                for window in (1, 8, "auto"):
                    for flash_timing in (False, True):
                        got = runner.run(broker.address, "dmqtt", qos, 64, window, flash_timing=flash_timing)
                        timed.append({"qos": qos, "window": window, "flash_timing": flash_timing, **got})
                        print(f"  flash timing {'on ' if flash_timing else 'off'} qos {qos} window {window}: "
                              f"{got['rate']:.0f} msg/s", flush=True)  # fmt: skip
        with Mosquitto(work / "broker-heap") as broker:
            for client in ("dmqtt-ram", "umqtt"):
                for window in (1, 8, 32) if client != "umqtt" else (1,):
                    for size in (64, 1024):
                        got = runner.run(broker.address, client, 1, size, window)
                        heap.append({"client": client, "window": window, "size": size, "heap": got["heap"]})
            where = median_profile(broker.address, 500 if quick else 2000, 1 if quick else 3)
            cpu = client_cpu(500 if quick else 2000, 1 if quick else 3)
            native = native_trial(broker.address, 500 if quick else 2000, 1 if quick else 3)
            garbage = allocation()
            emulator = flash_emulator_us()
            paired = interleaved(runner, broker.address, 1 if quick else 3)
            faces = asyncio_face(runner, broker.address, quick)
    return {
        "umqtt": UMQTT, "seconds_per_run": seconds, "rtt_ms": rtts, "rows": rows, "heap": heap, "timed": timed,
        "profile": where, "cpu": cpu, "native": native, "allocation": garbage, "flash_emulator_us": emulator,
        "interleaved": paired, "asyncio": faces,
    }  # fmt: skip


def asyncio_face(runner: Runner, address: str, quick: bool) -> list[dict[str, Any]]:
    """The asyncio face (dmqtt.aio) against the blocking API on the same flash, broker and window, loopback and a
    10 ms round trip, in interleaved pairs: its cost per message (its tasks' rounds and the event loop), its heap
    (the client, its tasks and events), and how often an idle connected asyncio client wakes."""
    out: list[dict[str, Any]] = []
    for path, one_way in PATHS.items():
        if path == "rtt 50 ms" or (quick and one_way):
            continue
        with DelayProxy(address, one_way) as proxy:
            target = proxy.address if one_way else address
            for qos in (1, 2):
                for client in ("dmqtt", "dmqtt-aio"):
                    got = runner.run(target, client, qos, 64, "auto")
                    out.append({"path": path, "client": client, "qos": qos, **got})
                    idle = f", idle {got['idle_wakes_per_s']:.1f} wakes/s" if "idle_wakes_per_s" in got else ""
                    print(
                        f"  {path} {client:<10} qos {qos}: {got['rate']:>7.0f} msg/s, heap {got['heap']} B{idle}",
                        flush=True,
                    )
    return out


def interleaved(runner: Runner, address: str, rounds: int) -> dict[str, Any]:
    """The loopback goals' ratios from interleaved rounds (umqtt.simple with TCP_NODELAY, the durable client, the
    durable client on a RAM partition; QoS 1, 64 bytes, window 8), so that one slow baseline run on a shared machine
    does not make the ratio: umqtt.simple's rate moved by a quarter between single runs."""
    rates: dict[str, list[float]] = {"umqtt": [], "dmqtt": [], "dmqtt-ram": []}
    for _ in range(rounds):
        for client in rates:
            window = 1 if client == "umqtt" else 8  # umqtt.simple waits for each PUBACK
            rates[client].append(runner.run(address, client, 1, 64, window, umqtt_nodelay=True)["rate"])
    ratios = {
        "durable": [d / u for d, u in zip(rates["dmqtt"], rates["umqtt"], strict=True)],
        "ram": [d / u for d, u in zip(rates["dmqtt-ram"], rates["umqtt"], strict=True)],
    }
    print(
        "  interleaved loopback QoS 1 rounds: "
        + ", ".join(f"{k} {statistics.median(v):.2f}x ({min(v):.2f}-{max(v):.2f})" for k, v in ratios.items()),
        flush=True,
    )
    return {"rounds": rounds, "rates": rates, "ratios": ratios}


def micropython_json(args: list[str], micropypath: str, what: str, timeout: float) -> Any:
    """Run a script on the MicroPython Unix port with `micropypath`; its last line of output, read as JSON.
    A script that fails ends the figure, saying `what` failed and with its output."""
    env = dict(os.environ, MICROPYPATH=micropypath)
    done = subprocess.run([*micropython_command(), *args], env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"{what} failed:\n{done.stdout}{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def profile(address: str, messages: int, staged: Path | None = None, quiet: bool = False) -> dict[str, Any]:
    """Where a durable QoS 1 message's time goes on loopback (bench_apps/clients/profile.py: MQTT 5, window 8,
    64-byte payloads, the journal on a RAM partition), on the Unix port with the board's heap and its staged .mpy
    (or those in `staged`)."""
    port = address.rsplit(":", 1)[1]
    heap = parse_size(BoardDefinition.load("sim").heap) + RAM_PARTITION_HEAP  # the dmqtt-ram runs' heap
    args = ["-X", f"heapsize={heap}", str(APP / "profile.py"), port, "5", "8", str(messages)]
    # The firmware as a board gets it (.mpy from mpy-cross): compiling sources would take heap a board keeps.
    tree = staged or stage_firmware(APP, board_packages=True)
    result: dict[str, Any] = micropython_json(args, str(tree), "the client profile", 600)
    if quiet:
        return result
    print(
        f"  profile: {result['us_unwrapped']:.1f} us per message, {result['bytes_per_msg']:.0f} heap bytes allocated "
        f"per message, the collector about {result['gc_us']:.1f} us of it",
        flush=True,
    )
    return result


def median_profile(address: str, messages: int, runs: int) -> dict[str, Any]:
    """The profile run `runs` times, the run of the median cost in reference units kept, with every run's units
    (`units_runs`): one run moves by a few hundredths of a unit on a shared host."""
    got = [profile(address, messages) for _ in range(runs)]
    got.sort(key=lambda run: run["us_unwrapped"] / run["ref_us"])
    middle = got[len(got) // 2]
    middle["units_runs"] = [round(run["us_unwrapped"] / run["ref_us"], 3) for run in got]
    return middle


# The trial of MicroPython's native emitter: modules of the profiled path compiled whole to machine code
# (`mpy-cross -X emit=native`, as @micropython.native on every function), each set against the same .mpy as
# bytecode. dmqtt.client and dmqtt.codec are not in it: a bare `raise` (re-raising in an except clause) is
# NotImplementedError in native code.
NATIVE_SETS = {
    "dmqtt.session": ("dmqtt.session",),
    "dmqtt.session, journal_ring, journal_record": ("dmqtt.session", "dmqtt.journal_ring", "dmqtt.journal_record"),
}
# mpy-cross's architecture for the machine the Unix port runs on (the trial is skipped on others), and the chips'.
HOST_MARCH = {"x86_64": "x64", "i686": "x86"}.get(platform.machine())
CHIP_MARCHES = ("xtensawin", "rv32imc")


# The firmware figure 1's CPU goal is measured against: the commit at which the profile first timed its reference
# loop, when a message cost FIRST_UNITS reference units. The goal is half of that.
CPU_BASELINE = "ccd758e"
FIRST_UNITS = 0.64
FIRST_UNITS_DATE = "2026-11-25"
# The asyncio face's loopback rate against the blocking face's in the same run, and an idle client's wakes: a
# keep-alive of 60 s needs one PINGREQ every 45 s, so anything near 1 per second is polling.
ASYNCIO_GOAL = 0.8
ASYNCIO_IDLE_WAKES = 0.1


def staged_baseline(into: Path) -> Path | None:
    """The baseline's firmware (CPU_BASELINE, from this clone's history) staged as a board gets it, or None when
    the history does not have it (a shallow clone)."""
    archive = subprocess.run(["git", "archive", CPU_BASELINE, "firmware"], cwd=REPO, capture_output=True)
    if archive.returncode != 0:
        return None
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return stage_firmware(APP, firmware=into / "firmware", build_root=into / "build", board_packages=True)


def client_cpu(messages: int, rounds: int) -> dict[str, Any] | None:
    """The client's own CPU per message (bench_apps/clients/cpu.py: flash and network in memory), this firmware
    and the baseline's in interleaved rounds, in reference units timed in the same process; per case the median
    of the rounds and this firmware's over the baseline's."""
    with tempfile.TemporaryDirectory() as tmp:
        baseline = staged_baseline(Path(tmp))
        if baseline is None:
            print(f"  client CPU: skipped (this clone's history has no {CPU_BASELINE})", flush=True)
            return None
        trees = {"this": stage_firmware(APP, board_packages=True), "baseline": baseline}
        units: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
        args = ["-X", "heapsize=4M", str(APP / "cpu.py"), str(messages)]
        for _ in range(rounds):
            for name, tree in trees.items():
                got = micropython_json(args, str(tree), "the client CPU run", 600)
                for case, us in got.items():
                    if case != "ref_us":
                        units[name].setdefault(case, []).append(us / got["ref_us"])
    cases = {
        case: {
            "units": statistics.median(runs),
            "baseline_units": statistics.median(units["baseline"][case]),
            "ratio": statistics.median(runs) / statistics.median(units["baseline"][case]),
        }
        for case, runs in units["this"].items()
    }
    for case, got in cases.items():
        print(f"  client CPU, {case}: {got['units']:.3f} units, {got['ratio']:.2f}x the baseline's", flush=True)
    return {"baseline": CPU_BASELINE, "rounds": rounds, "messages": messages, "cases": cases}


def compile_native(module: str, march: str, into: Path) -> int:
    """module compiled to native code for march into `into`'s package layout; returns the .mpy's size."""
    rel = Path(*module.split("."))
    out = into / rel.with_suffix(".mpy")
    out.parent.mkdir(parents=True, exist_ok=True)
    source = REPO / "firmware" / rel.with_suffix(".py")
    command = [mpy_cross_executable(), *MPY_CROSS_OPTIONS, f"-march={march}", "-X", "emit=native", "-o", str(out)]
    subprocess.run([*command, "-s", str(rel.with_suffix(".py")), str(source)], check=True, capture_output=True)
    return out.stat().st_size


def allocation() -> dict[str, float]:
    """Heap bytes the client allocates per message, its stand-ins for the flash driver and the network left
    out (tests/vectors/client_alloc.py, the counter tests/unit/dmqtt/test_client_alloc.py holds to its ceilings)."""
    vectors = REPO / "tests" / "vectors"
    args = ["-X", "heapsize=4M", str(vectors / "client_alloc.py")]
    result: dict[str, float] = micropython_json(args, f"{REPO / 'firmware'}:{vectors}", "the allocation count", 300)
    print(f"  heap bytes allocated per message: {result}", flush=True)
    return result


def flash_emulator_us() -> float:
    """us per program of a PUB record in the virtual board's flash emulator alone (bench_apps/clients/
    flash_emulator.py): the durable runs' cost that a chip's C flash driver does not have."""
    shims = REPO / "host_bridge" / "vboard" / "shims"
    with tempfile.TemporaryDirectory() as tmp:
        timed = micropython_json([str(APP / "flash_emulator.py"), tmp], str(shims), "the flash emulator's timing", 300)
    program_us = float(timed["program_us"])
    print(f"  flash emulator: {program_us:.1f} us per program", flush=True)
    return program_us


def native_trial(address: str, messages: int, rounds: int) -> dict[str, Any] | None:
    """Each NATIVE_SETS entry compiled native for this machine, profiled (us per message and reference units)
    in rounds interleaved with the bytecode, and its .mpy sizes for this machine and for the chips' two
    architectures (what an ESP32 would load into executable RAM: esp_native_code_commit, MALLOC_CAP_EXEC)."""
    if HOST_MARCH is None:
        print(f"  native trial: skipped (no native emitter for {platform.machine()})", flush=True)
        return None
    bytecode = stage_firmware(APP, board_packages=True)
    sets: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folders = {"bytecode": bytecode}
        for name, modules in NATIVE_SETS.items():
            folder = Path(tmp) / name.replace(", ", "+")
            shutil.copytree(bytecode, folder)
            sizes = {march: 0 for march in (HOST_MARCH, *CHIP_MARCHES)}
            for module in modules:
                for march in sizes:
                    sizes[march] += compile_native(module, march, folder if march == HOST_MARCH else Path(tmp) / march)
            bytecode_bytes = sum((bytecode / Path(*m.split(".")).with_suffix(".mpy")).stat().st_size for m in modules)
            sets[name] = {"modules": list(modules), "bytecode_mpy": bytecode_bytes, "native_mpy": sizes, "units": []}
            folders[name] = folder
        base: list[float] = []
        for _ in range(rounds):
            for name, folder in folders.items():
                got = profile(address, messages, folder, quiet=True)
                (base if name == "bytecode" else sets[name]["units"]).append(got["us_unwrapped"] / got["ref_us"])
    result = {"march": HOST_MARCH, "rounds": rounds, "bytecode_units": base, "sets": sets}
    for name, entry in sets.items():
        ratio = statistics.median(entry["units"]) / statistics.median(base)
        print(f"  native trial: {name}: {ratio:.2f}x the bytecode's time per message", flush=True)
    return result


def ceiling(got: dict[str, Any], qos: int, rtt: float, late_ms: float) -> dict[str, Any]:
    """A windowed run's ceiling, window / round trip (QoS 2: two round trips), and the share of it reached.
    Twice: against the idle round trip, and against the round trip the path really had during the run, the
    idle one plus the proxy's own lateness each way (its event loop shares the two cores with the board and
    the broker), which is what any client on that path could have had."""
    if not rtt or not qos:
        return {"limit": None, "efficiency": None, "proxy_late_ms": None, "loaded_efficiency": None}
    flows = 2 if qos == 2 else 1
    limit = got["window_used"] * 1000 / (flows * rtt)
    loaded_limit = got["window_used"] * 1000 / (flows * (rtt + 2 * late_ms))
    return {
        "limit": limit,
        "efficiency": got["rate"] / limit,
        "proxy_late_ms": late_ms,
        "loaded_efficiency": got["rate"] / loaded_limit,
    }


def cases(quick: bool, nodelay: bool, delayed: bool) -> list[dict[str, Any]]:
    """Which client runs to make on one path. With the broker's nodelay off only the cases it changes."""
    sizes = (64,) if quick or not nodelay else (64, 1024)
    out: list[dict[str, Any]] = []
    for size in sizes:
        for qos in (0, 1, 2):
            if not nodelay and qos == 0:
                continue
            for window in (1, 8, "auto"):
                out.append({"client": "dmqtt", "qos": qos, "size": size, "window": window})
            if not delayed and nodelay:
                out.append({"client": "dmqtt-ram", "qos": qos, "size": size, "window": 8})
            if qos < 2:  # umqtt.simple has no QoS 2
                out.append({"client": "umqtt", "qos": qos, "size": size, "window": 1, "umqtt_nodelay": True})
                if not quick:
                    out.append({"client": "umqtt", "qos": qos, "size": size, "window": 1, "umqtt_nodelay": False})
    return out


def _line(row: dict[str, Any]) -> str:
    eff = f"{row['efficiency']:.2f} of {row['limit']:.0f}/s" if row["efficiency"] is not None else ""
    who = row["client"] + (
        " (TCP_NODELAY forced)" if row.get("umqtt_nodelay") else " (as shipped)" if row["client"] == "umqtt" else ""
    )
    return (
        f"  {row['path']:<10} broker nodelay {'on ' if row['broker_nodelay'] else 'off'} {who:<32} qos {row['qos']} "
        f"{row['size']:>5} B window {row['window']!s:>4} ({row['window_used']}): {row['rate']:>8.0f} msg/s {eff}"
    )


# -- the report (tools/bench_clients.md) ------------------------------------------------------------------------


def _rate(rows: list[dict[str, Any]], **match: Any) -> float | None:
    for row in rows:
        if all(row.get(k) == v for k, v in match.items()):
            return float(row["rate"])
    return None


def _who(r: dict[str, Any]) -> str:
    who = str(r["client"])
    if who != "umqtt":
        return who
    return who + (" (TCP_NODELAY forced)" if r.get("umqtt_nodelay") else " (as shipped)")


def _window(r: dict[str, Any]) -> str:
    return str(r["window"]) if r["window"] == r["window_used"] else f"{r['window']} ({r['window_used']})"


def _optional(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def profile_units(prof: dict[str, Any]) -> float:
    """The profile's cost per message in reference units (its time against the reference loop's, same run)."""
    return float(prof["us_unwrapped"] / prof["ref_us"])


def report(fig: dict[str, Any], figures: dict[str, Any]) -> Section:
    rows = fig["rows"]
    loop = [r for r in rows if r["path"] == "loopback" and r["broker_nodelay"]]
    loop_rows = []
    for size in sorted({r["size"] for r in loop}):
        for qos in (0, 1, 2):
            base = _rate(loop, client="umqtt", qos=qos, size=size, umqtt_nodelay=True)
            for r in [r for r in loop if r["size"] == size and r["qos"] == qos]:
                ratio = f"{r['rate'] / base:.2f}x" if base else "n/a (no QoS 2)"
                loop_rows.append([size, qos, _who(r), _window(r), f"{r['rate']:.0f}", ratio])
    delayed = [
        [r["path"], "on" if r["broker_nodelay"] else "off", r["size"], r["qos"], _who(r), _window(r),
         f"{r['rate']:.0f}", f"{r['limit']:.0f}" if r["limit"] else "-", _optional(r["efficiency"], ".2f"),
         _optional(r.get("proxy_late_ms"), ".2f"), _optional(r.get("loaded_efficiency"), ".2f")]
        for r in rows if r["path"] != "loopback"
    ]  # fmt: skip
    goals = _goals(fig, loop)
    values = {
        "umqtt_version": fig["umqtt"]["version"],
        "umqtt_name": fig["umqtt"]["name"],
        "seconds_per_run": str(fig["seconds_per_run"]),
        "loopback_table": table(
            ["bytes", "QoS", "client", "window", "msg/s", "vs umqtt.simple with TCP_NODELAY"], loop_rows
        ),  # fmt: skip
        "rtt": ", ".join(f"{k}: {v:.1f} ms" for k, v in fig["rtt_ms"].items()),
        "delayed_table": table(
            [
                "path",
                "broker nodelay",
                "bytes",
                "QoS",
                "client",
                "window",
                "msg/s",
                "ceiling msg/s",
                "of ceiling",
                "proxy late ms",
                "of loaded",
            ],
            delayed,
        ),  # fmt: skip
        "goals_table": goal_table([g for g in goals if g.figure == "1"], ("figure", "goal", "measured", "")),
        "heap_table": table(
            ["client", "window", "payload bytes", "heap bytes"],
            [[h["client"], h["window"], h["size"], h["heap"]] for h in fig["heap"]],
        ),  # fmt: skip
    }
    paired = fig.get("interleaved")
    if fig.get("flash_emulator_us") and paired:
        durable_us = 1e6 / statistics.median(paired["rates"]["dmqtt"])
        base_us = 1e6 / statistics.median(paired["rates"]["umqtt"])
        emulator = fig["flash_emulator_us"]
        values |= {"emulator_us": f"{emulator:.1f}", "durable_us": f"{durable_us:.0f}",
                   "chip_like": f"{base_us / (durable_us - 2 * emulator):.2f}"}  # fmt: skip
    umqtt_rate = _rate(loop, client="umqtt", qos=1, size=64, umqtt_nodelay=True)
    if fig.get("profile", {}).get("ref_us") and umqtt_rate:
        values |= _profile(fig["profile"], 1e6 / umqtt_rate)
        if fig.get("cpu"):
            values |= _cpu(fig["cpu"], fig["profile"])
    if fig.get("allocation"):
        garbage = fig["allocation"]
        values["allocation_table"] = table(
            ["QoS", "a sensor's loop: bytes per message", "queued: bytes per message"],
            [[q, f"{garbage[q]:.0f}", f"{garbage[q + ' queued']:.0f}" if q != "0" else "-"] for q in ("0", "1", "2")],
        )
    if fig.get("native"):
        values |= _native(fig["native"])
    if fig.get("asyncio"):
        values |= _asyncio(fig["asyncio"], [g for g in goals if g.figure == "1 asyncio"])
    flash_timing = _flash_timing(fig.get("timed", []))
    if flash_timing:
        values["flash_timing_table"] = flash_timing
    return Section(values, [Goal("1", g.text, g.target, g.measured, g.ok) for g in goals])


def _goals(fig: dict[str, Any], loop: list[dict[str, Any]]) -> list[Goal]:
    rows = fig["rows"]
    goals = []
    paired = fig.get("interleaved")
    base = _rate(loop, client="umqtt", qos=1, size=64, umqtt_nodelay=True)
    for key, client, what, goal in (
        ("durable", "dmqtt", "loopback QoS 1 64 B, durable window 8 vs umqtt.simple (TCP_NODELAY)", 0.8),
        ("ram", "dmqtt-ram", "the same with the journal on a RAM partition", 1.0),
    ):
        if paired:  # the median of interleaved rounds: one slow baseline run cannot make the ratio
            ratios = paired["ratios"][key]
            middle = statistics.median(ratios)
            goals.append(Goal("1", f"{what}, median of {paired['rounds']} interleaved rounds", f">= {goal}x",
                              f"{middle:.2f}x ({min(ratios):.2f}-{max(ratios):.2f})", middle >= goal))  # fmt: skip
        else:
            got = _rate(loop, client=client, qos=1, size=64, window=8)
            if base and got:
                goals.append(Goal("1", what, f">= {goal}x", f"{got / base:.2f}x", got / base >= goal))
    for path in ("rtt 10 ms", "rtt 50 ms"):
        for qos in (1, 2):
            for r in rows:
                if (r["path"], r["qos"], r["client"], r["window"], r["broker_nodelay"], r["size"]) == (
                    path, qos, "dmqtt", "auto", True, 64
                ):  # fmt: skip
                    reached = r.get("loaded_efficiency") or r["efficiency"]
                    goals.append(Goal("1", f"{path}, QoS {qos}, window auto ({r['window_used']}): of the loaded "
                                      "(idle) ceiling", ">= 0.90 of ceiling", f"{reached:.2f} ({r['efficiency']:.2f})",
                                      reached >= 0.9))  # fmt: skip
    prof = fig.get("profile") or {}
    if prof.get("ref_us"):
        units = profile_units(prof)
        goals.append(Goal("1", f"durable QoS 1 CPU per message (the profile below), reference units: half of "
                          f"{FIRST_UNITS} (its first measure, {FIRST_UNITS_DATE})", f"<= {FIRST_UNITS / 2:.2f}",
                          f"{units:.3f}", units <= FIRST_UNITS / 2))  # fmt: skip
    cpu = fig.get("cpu") or {}
    for case in ("qos 1, burst", "qos 1, loop") if cpu.get("cases") else ():
        ratio = cpu["cases"][case]["ratio"]
        goals.append(Goal("1", f"durable QoS 1 client CPU per message, flash and network in memory ({case}): of the "
                          f"same run's baseline firmware ({cpu['baseline']})", "<= 0.50x", f"{ratio:.2f}x",
                          ratio <= 0.5))  # fmt: skip
    garbage = fig.get("allocation")
    if garbage:
        goals.append(Goal("1", "heap bytes allocated per QoS 1 message sent while its publish() runs (64-bit objects)",
                          "<= 128", f"{garbage['1']:.0f}", garbage["1"] <= 128))  # fmt: skip
        goals.append(Goal("1", "heap bytes allocated per QoS 0 message", "0", f"{garbage['0']:.0f}",
                          garbage["0"] == 0))  # fmt: skip
    aio = fig.get("asyncio") or []
    for qos in (1, 2):
        pair = {r["client"]: r for r in aio if (r["path"], r["qos"]) == ("loopback", qos)}
        if len(pair) == 2:
            ratio = pair["dmqtt-aio"]["rate"] / pair["dmqtt"]["rate"]
            goals.append(Goal("1 asyncio", f"loopback QoS {qos}: asyncio / blocking rate", f">= {ASYNCIO_GOAL}x",
                              f"{ratio:.2f}x", ratio >= ASYNCIO_GOAL))  # fmt: skip
    idle = [r["idle_wakes_per_s"] for r in aio if "idle_wakes_per_s" in r]
    if idle:
        goals.append(Goal("1 asyncio", "idle connected asyncio client (keepalive 60 s): wakes per second, most of "
                          "its runs", f"<= {ASYNCIO_IDLE_WAKES}", f"{max(idle):.2f}",
                          max(idle) <= ASYNCIO_IDLE_WAKES))  # fmt: skip
    return goals


def _profile(prof: dict[str, Any], umqtt_us: float) -> dict[str, str]:
    """Where a durable QoS 1 message's time goes (tools/bench_apps/clients/profile.py)."""
    base = prof["us_unwrapped"]
    rows = []
    accounted = 0.0
    for name, (calls, inside, run_us) in prof["phases"].items():
        spent = max(0.0, inside - max(0.0, run_us - base))  # less what its wrapper added to its run
        accounted += spent
        rows.append([name, f"{calls:.2f}", f"{spent:.1f}", f"{spent / base:.0%}"])
    rest = base - accounted
    rows.append(["publish()'s own code (topic check, size, window test, pump loop) and the caller's loop", "",
                 f"{rest:.1f}", f"{rest / base:.0%}"])  # fmt: skip
    runs = prof.get("units_runs", [])
    return {
        "messages": f"{prof['messages']:,}",
        "base_us": f"{base:.1f}",
        "profile_table": table(["phase", "calls per message", "us per message", "share"], rows),
        "units": f"{profile_units(prof):.3f}",
        "ref_us": f"{prof['ref_us']:.0f}",
        "units_runs": f"That is the median of {len(runs)} runs ({', '.join(f'{u:.3f}' for u in runs)})."
        if len(runs) > 1
        else "",
        "umqtt_units": f"{umqtt_us / prof['ref_us']:.2f}",
        "bytes_per_msg": f"{prof['bytes_per_msg']:,.0f}",
        "collect_every": f"{prof['heap_free'] / prof['bytes_per_msg']:.0f}",
        "collect_us": f"{prof['collect_us']:.0f}",
        "gc_us": f"{prof['gc_us']:.1f}",
        "umqtt_us": f"{umqtt_us:.0f}",
    }


def _cpu(cpu: dict[str, Any], prof: dict[str, Any]) -> dict[str, str]:
    """The client's own CPU, its flash and network in memory, against the baseline firmware (client_cpu)."""
    rows = [[case, f"{got['units']:.3f}", f"{got['baseline_units']:.3f}", f"{got['ratio']:.2f}x"]
            for case, got in sorted(cpu["cases"].items())]  # fmt: skip
    whole = profile_units(prof)
    own = cpu["cases"]["qos 1, burst"]["units"]
    return {
        "baseline": cpu["baseline"],
        "first_units": str(FIRST_UNITS),
        "rounds": str(cpu["rounds"]),
        "cpu_messages": str(cpu["messages"]),
        "cpu_table": table(["case", "reference units", "baseline's", "this / baseline"], rows),
        "whole": f"{whole:.2f}",
        "own": f"{own:.2f}",
        "rest": f"{max(0.0, whole - own):.2f}",
    }


def _native(trial: dict[str, Any]) -> dict[str, str]:
    """The native emitter's trial (native_trial)."""
    base = statistics.median(trial["bytecode_units"])
    rows = []
    for name, entry in trial["sets"].items():
        units = statistics.median(entry["units"])
        sizes = entry["native_mpy"]
        rows.append([name, f"{units:.2f} ({units / base:.2f}x)", f"{entry['bytecode_mpy'] / 1024:.1f}",
                     f"{sizes[trial['march']] / 1024:.1f}", f"{sizes['xtensawin'] / 1024:.1f}",
                     f"{sizes['rv32imc'] / 1024:.1f}"])  # fmt: skip
    head = ["compiled native", "units per message", "bytecode KB", f"native {trial['march']} KB",
            "native xtensawin KB", "native rv32imc KB"]  # fmt: skip
    return {"march": trial["march"], "native_rounds": str(trial["rounds"]), "bytecode_units": f"{base:.2f}",
            "native_table": table(head, rows)}  # fmt: skip


def _asyncio(rows: list[dict[str, Any]], goals: list[Goal]) -> dict[str, str]:
    """The asyncio face (dmqtt.aio) against the blocking API: cost per message and heap."""
    body = []
    for path in dict.fromkeys(r["path"] for r in rows):
        for qos in (1, 2):
            blocking = next(r for r in rows if (r["path"], r["qos"], r["client"]) == (path, qos, "dmqtt"))
            aio = next(r for r in rows if (r["path"], r["qos"], r["client"]) == (path, qos, "dmqtt-aio"))
            extra_us = 1e6 / aio["rate"] - 1e6 / blocking["rate"]
            ratio = aio["rate"] / blocking["rate"]
            body.append([path, qos, f"{blocking['rate']:.0f}", f"{aio['rate']:.0f}", f"{ratio:.2f}x",
                         f"{extra_us:+.0f}", blocking["heap"], aio["heap"]])  # fmt: skip
    head = ["path", "QoS", "blocking msg/s", "asyncio msg/s", "ratio", "extra us per message", "blocking heap B",
            "asyncio heap B"]  # fmt: skip
    return {"asyncio_table": table(head, body), "asyncio_goals_table": goal_table(goals)}


def _flash_timing(timed: list[dict[str, Any]]) -> str:
    """Figure 2: the same loopback runs with the W25Q32JV's time, against the emulator's own."""
    rows = []
    for r in timed:
        if not r["flash_timing"]:
            continue
        emulated = next(
            x for x in timed if not x["flash_timing"] and (x["qos"], x["window"]) == (r["qos"], r["window"])
        )
        rows.append([r["qos"], _window(r), f"{emulated['rate']:.0f}", f"{r['rate']:.0f}",
                     f"{r['rate'] / emulated['rate']:.2f}"])  # fmt: skip
    if not rows:
        return ""
    return table(["QoS", "window", "msg/s, emulator's own time", "msg/s, W25Q32JV time", "ratio"], rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a short dose of each case")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--asyncio-only", action="store_true", help="only the asyncio face against the blocking API")
    args = parser.parse_args()
    if args.asyncio_only:
        with tempfile.TemporaryDirectory() as tmp, Mosquitto(Path(tmp) / "broker") as broker:
            shutil.copytree(APP, Path(tmp) / "app")
            runner = Runner(Path(tmp), Path(tmp) / "app", 0.4 if args.quick else 1.5)
            results: dict[str, Any] = {"asyncio": asyncio_face(runner, broker.address, args.quick)}
    else:
        results = figure(args.quick)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
