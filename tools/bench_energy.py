"""Figure 14 of BENCHMARKS.md: the charge of a reading on a battery board, and the life of a 2,000 mAh cell at one
reading a minute, for (a) umqtt.simple's round at every reading, (b) this client with one reading a wake, each
acknowledged before the board sleeps, (c) this client storing and forwarding, a batch every 10 and every 60
readings, and (d) umqtt.simple with the readings in RTC memory, a batch every 10th and 60th wake (the forgetful
batch); with and without TLS, with DHCP and with a static address and a known access point; and what the same
power cuts cost (c) and (d).

    python tools/bench_energy.py [--quick]          (part of make bench; tools/benchmarks.py --only energy)

An estimate to check on a real board, as figure 13 is. What is measured on the virtual board, each phase of a
wake, as the Unix port's time:
- the sending wakes, by tools/bench_apps/energy (umqtt.simple itself, fetched from PyPI at bench time, and this
  client through its library): imports, the journal, the MQTT connection, the publish or the batch with every
  acknowledgement; with the readings of the sampling wakes before it waiting in the journal;
- the sampling wake, by the board application itself (boot.py and sampler.py: from boot.py's start to the deep
  sleep), with the modules it loads;
- baseline (d), by tools/bench_apps/forgetful: its sampling wakes (from the start to the deep sleep) and its
  sending wakes' phases, as above;
- that nothing is lost: the broker's count of what each run sent; and what the same power cuts, each inside a deep
  sleep, cost (c) and (d).
The interpreter's time is scaled to an ESP32 at 240 MHz by figure 13's ratio (pystone, measured in this run) at
both of its ends, MicroPython 1.12's speed and twice it; the
rest comes from public figures, in INPUTS, chosen before the result: the boot to main.py, the WiFi join (the
virtual board's join model), the TLS handshake, the flash's program and erase times, and the currents of
Espressif's datasheet. No round trip to the broker is added (the measurement's is loopback's): a LAN's would add
most to the round at every reading.

The flash wear of a year at one reading a minute comes from the board application's runs: the emulated flash's
erase counters per reading, spread over an ESP32-DevKitC's partitions, against the flash's rated cycles."""

from __future__ import annotations

import json
import random
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_chip
from bench_clients import fetch_umqtt
from bench_report import Goal, Section, table, verdict
from figure_cli import print_figure
from flash_cost import ERASE_CYCLES

from host_bridge.boards.definition import BoardDefinition
from host_bridge.boards.firmware_build import stage_firmware
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.cycle import boot_once
from host_bridge.hil.subscriber import Subscriber
from host_bridge.hil.virtual_dut import VirtualDut
from host_bridge.vboard.shims import nor_flash
from host_bridge.vboard.wifi import AccessPoint, JoinModel

APPS = Path(__file__).resolve().parent / "bench_apps"
APP = APPS / "energy"
FORGETFUL = APPS / "forgetful"
PERIOD_S = 60  # one reading a minute
CELL_MAH = 2000
PAYLOAD = 100
READINGS_PER_YEAR = 365 * 24 * 60
# The model's inputs: public figures, each with its source, fixed before any result (a goal is never met by
# choosing them). Currents are the ESP32's (ESP32 Series Datasheet v4.x, Espressif: section 5, "RF Power
# Consumption Specifications" and "Power Consumption by Power Modes").
INPUTS: dict[str, dict[str, Any]] = {
    "rx_ma": {"value": 100, "what": "radio on, receiving or listening (802.11b/g/n)",
              "source": "ESP32 datasheet: 95 to 100 mA receiving; the top"},
    "tx_ma": {"value": 240, "what": "radio transmitting (802.11b, 1 Mbps)",
              "source": "ESP32 datasheet; transmit bursts last under a millisecond a message and are left out"},
    "cpu_ma": {"value": 49, "what": "CPU at 240 MHz, radio off (modem sleep)",
               "source": "ESP32 datasheet: 30 to 68 mA dual-core at 240 MHz; the midpoint"},
    "cpu80_ma": {"value": 25.5, "what": "CPU at 80 MHz, radio off (modem sleep)",
                 "source": "ESP32 datasheet: 20 to 31 mA at 80 MHz; the midpoint"},
    "deep_ua": {"value": 10, "what": "deep sleep, RTC timer and RTC memory on",
                "source": "ESP32 datasheet: 10 uA (the module alone; a development board draws more)"},
    "boot_ms": {"value": 635, "what": "reset to main.py and back to deep sleep, a stock image (350 ms of it mounting "
                                   "the filesystem and running main.py)",
                "source": "an ESP32-S3 with MicroPython 1.19.1, unoptimised, measured with a Power Profiler Kit II "
                          "(glenn20/upy-esp32-experiments, OptimisingMicropythonBootTime). No plain ESP32's is "
                          "published; its optimised boot is 21 ms longer than the S3's (70 against 48.8)"},
    "boot_frozen_ms": {"value": 70, "what": "reset to a frozen _boot.py and back to deep sleep, optimised",
                       "source": "an ESP32 with MicroPython 1.19.1, the image's check skipped on a wake from deep "
                                 "sleep, the application frozen: the same source"},
    "join_dhcp_ms": {"value": JoinModel.join_ms, "what": "WiFi join with a scan and DHCP",
                     "source": "the virtual board's join model (docs/virtual-board.md gives its sources)"},
    "join_static_ms": {"value": JoinModel.fast_ms, "what": "WiFi join with a static IP (the scan remains: "
                                                           "MicroPython's connect() cannot be given the channel)",
                       "source": "the virtual board's join model (docs/virtual-board.md gives its sources)"},
    "tls_ms": {"value": 1200, "what": "TLS handshake, MicroPython's ssl on an ESP32 at 240 MHz",
               "source": "1.18 to 1.28 s measured in micropython/micropython-esp32 issue #131; 0.93 to 1.07 s "
                         "(ECDHE-ECDSA) in miguelgrinberg/microdot issue #34"},
    "page_program_ms": {"value": nor_flash.program_us(0, 256) / 1000, "what": "a 256-byte page program",
                        "source": "W25Q32JV datasheet, typical (the virtual board's flash model)"},
    "sector_erase_ms": {"value": nor_flash._T_SECTOR_ERASE_US / 1000, "what": "a 4 KB sector erase",
                        "source": "W25Q32JV datasheet, typical (the virtual board's flash model)"},
}  # fmt: skip
GOALS = {"c10_dhcp": 4.0, "c10_static": 2.0, "c60_dhcp": 6.0, "b": 1.0}


def value(name: str) -> float:
    return float(INPUTS[name]["value"])


def charge_uah(ms: float, ma: float) -> float:
    return ms * ma / 3600  # mA x ms -> uAh


def flash_ms(records: list[int]) -> float:
    """The journal's flash time for these records (bytes each): their page programs, and the share of a sector
    erase their bytes take when the ring comes round."""
    program: float = sum(nor_flash.program_us(0, n) for n in records) / 1000
    return program + value("sector_erase_ms") * sum(records) / 4096


class Bench:
    """Boards on one broker: the energy app's wakes (timed phases), the board application's runs."""

    def __init__(self, work: Path, broker: Mosquitto) -> None:
        self.work = work
        self.broker = broker
        self.app = work / "app"
        self.forgetful = work / "forgetful"
        for source, app in ((APP, self.app), (FORGETFUL, self.forgetful)):
            shutil.copytree(source, app)
            shutil.copy(APPS / "phase_clock.py", app)
            fetch_umqtt(app)
        self.cuts = random.Random(14)  # where the loss runs cut the power (cut_in_sleeps)
        self.runs = 0
        self.lost = 0
        self.sent = 0

    def dut(self, dev: str, **options: Any) -> VirtualDut:
        """A virtual board of the sim definition, its flash and console log in a folder of its own, recording every
        module a wake imports (VBOARD_IMPORTS: also those it drops once used, as the config's checker)."""
        return VirtualDut(
            dev,
            BoardDefinition.load("sim"),
            flash=self.work / dev / "b.flash",
            console_log=self.work / dev / "console.log",
            extra_env={"VBOARD_IMPORTS": "1"},
            **options,
        )

    def cut_in_sleeps(self, dut: VirtualDut, per_send: int, cuts: int) -> None:
        """`cuts` power cuts, each inside a deep sleep drawn from the first per_send after a power-on (the same
        draws at every run of the figure)."""
        for _ in range(cuts):
            end = boot_once(dut, cut_in_sleep=self.cuts.randint(1, per_send), timeout=120)
            if end.kind != "power-cut":
                raise SystemExit(f"{dut.name}: a run to cut ended {end.kind}:\n{end.console[-2000:]}")

    def wakes(self, kind: str, readings: int, count: int) -> list[dict[str, Any]]:
        """`count` sending wakes of `kind`, each with readings - 1 journaled before it (a "prep" boot), the client
        library deployed as .mpy files in lib/ (as mip installs it); the broker's count of what arrived checked
        against what the wakes said they sent."""
        self.runs += 1
        dev = f"energy-{kind}-{readings}-{self.runs}"
        host, port = self.broker.address.rsplit(":", 1)
        topic = f"sensors/{dev}/telemetry"
        dut = self.dut(dev, app=self.app, library=True)
        dut.summary_keys = ("kind",)
        subscriber = Subscriber(self.broker.address, f"{dev}-observer", topic)
        out = []
        try:
            for _ in range(count):
                for step in (["prep"] if readings > 1 and kind == "dmqtt" else []) + [kind]:
                    config = {"kind": step, "client_id": dev, "host": host, "port": int(port), "topic": topic,
                              "size": PAYLOAD, "readings": readings}  # fmt: skip
                    dut.configure(config)
                    end = boot_once(dut, timeout=60)
                    if end.summary is None:
                        raise SystemExit(f"{dev}: the {step} wake failed:\n{end.console[-2000:]}")
                    if step == kind:
                        out.append(end.summary)
            sent = sum(w["sent"] for w in out)
            arrived = arrivals(subscriber, sent)
            self.sent += sent
            self.lost += max(0, sent - arrived)
        finally:
            dut.close()
            subscriber.close()
        return out

    def forgetful_run(self, per_send: int, wakes: int, cuts: int = 0) -> dict[str, Any]:
        """Baseline (d) (tools/bench_apps/forgetful): umqtt.simple, the readings kept in RTC memory, a batch every
        `per_send` wakes, deep-sleeping between them; `cuts` power cuts first, each inside a deep sleep drawn from
        the first per_send after a power-on, then `wakes` wakes from the last power-on. Returns the sending wakes'
        phases, the sampling wakes' interpreter time (a run without cuts), and the readings it took against those
        the broker has."""
        self.runs += 1
        dev = f"energy-forgetful-{per_send}-{self.runs}"
        host, port = self.broker.address.rsplit(":", 1)
        topic = f"sensors/{dev}/telemetry"
        app = self.work / dev / "app"
        shutil.copytree(self.forgetful, app)
        settings = {"CLIENT_ID": dev, "HOST": host, "PORT": int(port), "TOPIC": topic.encode(), "SIZE": PAYLOAD,
                    "PER_SEND": per_send, "WAKES": wakes, "PERIOD_MS": PERIOD_S * 1000}  # fmt: skip
        (app / "settings.py").write_text("".join(f"{k} = {v!r}\n" for k, v in settings.items()))
        dut = self.dut(dev, app=app)
        dut.summary_keys = ("forgetful",)
        subscriber = Subscriber(self.broker.address, f"{dev}-observer", topic)
        try:
            self.cut_in_sleeps(dut, per_send, cuts)
            sleeps_before = len(dut.vboard.sleeps)
            end = boot_once(dut, timeout=120 + wakes)
            if end.kind != "done":
                raise SystemExit(f"{dev}: the run did not complete:\n{end.console[-2000:]}")
            sleeps = list(dut.vboard.sleeps)[sleeps_before:]
            console = dut.console.all()
            phases = [json.loads(line) for line in re.findall(r'^(\{.*"kind": "forgetful".*)$', console, re.M)]
            sent = sum(p["sent"] for p in phases)
            arrivals(subscriber, sent)
            with subscriber.lock:
                received = {bytes(r.payload[:8]).decode() for r in subscriber.records}
        finally:
            dut.close()
            subscriber.close()
        umqtt = stage_firmware(app) / "umqtt_simple.mpy"  # (staged once per content: the board's own copy)
        taken = re.findall(r"^taken ([0-9a-f]{8}) (sample|send)$", console, re.M)
        last = taken[-wakes:]  # the last power-on's wakes: each but the last ended in a deep sleep
        sampling = [
            s["firmware_us"] - s["emulated_us"] for s, (_, kind) in zip(sleeps, last, strict=False) if kind == "sample"
        ]
        return {
            "per_send": per_send,
            "cuts": cuts,
            "phases": phases,
            "sampling_us": statistics.median(sampling) if sampling else None,
            "umqtt_mpy_bytes": umqtt.stat().st_size,
            "taken": len(taken),
            "lost": len({reading for reading, _ in taken} - received),
        }

    def board_run(self, per_send: int, count: int, install: str = "deployed", cuts: int = 0) -> dict[str, Any]:
        """The board application deep-sleeping between readings (config.json's sleep), readings_per_send
        `per_send`, through `count` readings (after `cuts` power cuts, each inside a deep sleep drawn from the
        first per_send after a power-on): its sampling wakes' time (from boot.py to the deep sleep) and the .mpy bytes
        they load; the flash it wears per reading; the witness (what it said it accepted, against what the broker
        has)."""
        self.runs += 1
        dev = f"energy-board-{per_send}-{install}-{self.runs}"
        ap = AccessPoint(self.work / f"{dev}.ap", model=JoinModel(scale=0.02))
        dut = self.dut(dev, ap=ap, install=install)
        topic = f"sensors/{dev}/telemetry"
        subscriber = Subscriber(self.broker.address, f"{dev}-observer", topic)
        config = {
            "client_id": dev,
            "broker": self.broker.address,
            "mqtt_version": "5",
            "wifi": {"ssid": "bench"},
            "publish": {"topic": topic, "qos": 1, "count": count, "payload_bytes": PAYLOAD},
            "sleep": {"every_s": PERIOD_S, "awake_s": 10, "readings_per_send": per_send},
        }
        try:
            dut.configure(config)
            self.cut_in_sleeps(dut, per_send, cuts)
            end = boot_once(dut, timeout=120 + count)
            if end.kind != "done":
                raise SystemExit(f"{dev}: the run did not complete:\n{end.console[-2000:]}")
            sleeps = list(dut.vboard.sleeps)
            stats = dut.stats() or {}
            accepted = set(re.findall(r"^accepted (\d+) (\d+)$", dut.console.all(), re.M))
            subscriber.wait_for(dev, len(accepted), timeout=30)
            received = {(str(boot), str(seq)) for boot, seq in subscriber.distinct(dev)}
        finally:
            dut.close()
            ap.close()
            subscriber.close()
        lost = len(accepted - received)  # the witness: each reading the board said it accepted, at the broker
        self.sent += len(accepted)
        self.lost += lost
        staged = stage_firmware()
        sampling = [s for s in sleeps if s["script"] == "boot.py"]  # (sending wakes sleep from main.py)
        sending = [s for s in sleeps if s["script"] == "main.py"]
        mpy = mpy_files(staged, sampling[-1]["loaded"] if sampling else [])
        sending_mpy = mpy_files(staged, sending[-1]["loaded"] if sending else [])
        poweron_mpy = mpy_files(staged, sending[0]["loaded"] if sending else [])  # (the run's first wake)
        return {
            "install": install,
            "per_send": per_send,
            "readings": count,
            "cuts": cuts,
            "taken": len(accepted),
            "lost": lost,
            "wakes": len(sleeps) + 1,
            "sampling_wakes": len(sampling),
            # From boot.py's start to the deep sleep, the emulated hardware's own time left out.
            "sampling_us": (
                statistics.median(s["firmware_us"] - s["emulated_us"] for s in sampling) if sampling else None
            ),
            "sampling_emulated_us": statistics.median(s["emulated_us"] for s in sampling) if sampling else None,
            "sampling_modules": sorted(mpy),
            "sampling_mpy_bytes": sum(path.stat().st_size for path in mpy.values()),
            "sending_modules": sorted(sending_mpy),
            "sending_mpy_bytes": sum(path.stat().st_size for path in sending_mpy.values()),
            "poweron_modules": sorted(poweron_mpy),
            "poweron_mpy_bytes": sum(path.stat().st_size for path in poweron_mpy.values()),
            "erased": {part: c.get("blocks_erased", 0) for part, c in stats.items()},
            "programmed": {part: c.get("bytes_programmed", 0) for part, c in stats.items()},
        }


def mpy_files(staged: Path, loaded: list[str]) -> dict[str, Path]:
    """The .mpy file of each loaded module that a deployed board loads from its filesystem (the staged root)."""
    files = {name: staged / (name.replace(".", "/") + ".mpy") for name in loaded}
    return {name: path for name, path in files.items() if path.exists()}


def arrivals(subscriber: Subscriber, want: int, timeout: float = 30) -> int:
    """How many messages the subscriber has once `want` have arrived, or at `timeout`."""
    deadline = time.monotonic() + timeout
    with subscriber.arrived:
        while len(subscriber.records) < want and time.monotonic() < deadline:
            subscriber.arrived.wait(max(0.01, deadline - time.monotonic()))
        return len(subscriber.records)


def median_phases(wakes: list[dict[str, Any]]) -> dict[str, float]:
    keys = [k for k in wakes[0] if k.endswith("_us")]
    return {k[:-3] + "_ms": statistics.median(w[k] for w in wakes) / 1000 for k in keys}


def scenario(
    name: str,
    sending: dict[str, float],
    readings: int,
    sampling_ms: float,
    tls: bool,
    join_ms: float,
    ratio: float,
    boot_ms: float,
) -> dict[str, Any]:
    """The charge of one reading: the sending wake's phases (host time times `ratio` where the interpreter works,
    the public figures elsewhere), the sampling wakes' (readings - 1 of them) shared among the readings, and the
    deep sleep of the rest of each minute. (b) and (c) journal each reading (a PUB record's flash time, then a
    DONE record's at its acknowledgement); (a) and (d) write no flash."""
    pub = 7 + 13 + len("sensors/energy-dmqtt-10-1/telemetry") + PAYLOAD  # a PUB record, as the journal writes it
    cpu, rx = value("cpu_ma"), value("rx_ma")
    durable = name in ("b", "c")
    phases = [
        ("boot", boot_ms, cpu),
        ("imports", sending["import_ms"] * ratio, cpu),
        ("journal", sending["journal_ms"] * ratio + flash_ms([pub]) if durable else 0.0, cpu),
        ("WiFi join", join_ms, rx),
        ("TLS handshake", value("tls_ms") if tls else 0.0, rx),
        ("MQTT connect", sending["connect_ms"] * ratio, rx),
        ("publish and acknowledgements", (sending["publish_ms"] + sending.get("disconnect_ms", 0.0)) * ratio
         + (flash_ms([9] * readings) if durable else 0.0), rx),
    ]  # fmt: skip
    awake_send = sum(ms for _, ms, _ in phases)
    send_uah = sum(charge_uah(ms, ma) for _, ms, ma in phases)
    sample_ms = boot_ms + sampling_ms * ratio + (flash_ms([pub]) if durable else 0.0)
    sample_uah = charge_uah(sample_ms, cpu)
    awake_total = awake_send + (readings - 1) * sample_ms
    sleep_uah = charge_uah(readings * PERIOD_S * 1000 - awake_total, value("deep_ua") / 1000)
    per_reading = (send_uah + (readings - 1) * sample_uah + sleep_uah) / readings
    days = CELL_MAH * 1000 / per_reading / (24 * 3600 / PERIOD_S)
    return {
        "scenario": name,
        "tls": tls,
        "readings_per_send": readings,
        "uah_per_reading": per_reading,
        "life_days": days,
        "sending_wake_ms": awake_send,
        "sending_wake_uah": send_uah,
        "sampling_wake_ms": sample_ms if readings > 1 else None,
        "sampling_wake_uah": sample_uah if readings > 1 else None,
        "sleep_uah_per_reading": sleep_uah / readings,
        "phases": [{"phase": p, "ms": ms, "ma": ma, "uah": charge_uah(ms, ma)} for p, ms, ma in phases],
    }


# The two images the figure compares each scenario on: a stock image with the code deployed as .mpy files (loaded
# into the heap at each import) and its boot to main.py; and an image with the code frozen and the boot optimised.
IMAGES = {"stock": ("deployed", "boot_ms"), "frozen": ("frozen", "boot_frozen_ms")}
CASES = (("a", 1), ("b", 1), ("c10", 10), ("c60", 60), ("d10", 10), ("d60", 60))
# The interpreter ratio's two ends (figure 13): MicroPython 1.12's pystone on the chip, and twice it for the builds
# since 1.18. Every row is computed at both; the tables show the slow end, the goals are judged at both.
ENDS = ("slow", "fast")
# The goals (issue 49), each a comparison of two rows or of the sampling wake against the boot.
PER_READING = {"c10_d10_dhcp": ("c10", "d10", "dhcp"), "c10_d10_static": ("c10", "d10", "static"),
               "c60_d60_dhcp": ("c60", "d60", "dhcp"), "c60_d60_static": ("c60", "d60", "static")}  # fmt: skip
LIFE = {"c10_dhcp": ("c10", "dhcp", 4.0), "c10_static": ("c10", "static", 2.0), "c60_dhcp": ("c60", "dhcp", 6.0)}
PER_READING_MAX = 1.2  # store-and-forward's charge a reading, at most this times (d)'s
B_MIN = 0.95  # (b) lasts at least this times as long as (a)
SAMPLING_MPY_MAX = 4096  # bytes of .mpy a sampling wake loads, stock image
SAMPLING_BOOT_SHARE = 5  # a sampling wake's interpreter work, at most the boot's time over this


def figure(quick: bool) -> dict[str, Any]:
    chip = bench_chip.figure(quick)
    ratios = {"slow": chip["ratio_slow"], "fast": chip["ratio_fast"]}
    count = 3 if quick else 7
    cuts = 2 if quick else 5
    measured: dict[str, dict[str, dict[str, float]]] = {}
    boards: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, Mosquitto(Path(tmp) / "broker") as broker:
        bench = Bench(Path(tmp), broker)
        forgetful = {n: bench.forgetful_run(n, n * (2 if quick else 3)) for n in (10, 60)}
        measured["stock"] = {
            "a": median_phases(bench.wakes("umqtt", 1, count)),
            "b": median_phases(bench.wakes("dmqtt", 1, count)),
            "c10": median_phases(bench.wakes("dmqtt", 10, count)),
            "c60": median_phases(bench.wakes("dmqtt", 60, max(2, count // 2))),
            "d10": median_phases(forgetful[10]["phases"]),
            "d60": median_phases(forgetful[60]["phases"]),
        }
        # Frozen, an import loads nothing: the virtual board runs frozen modules' bodies before the board starts
        # (on a chip an import then only runs the body, making its functions), so the sending wakes' imports are
        # taken as none, umqtt.simple's as this client's; their other phases are the deployed ones.
        measured["frozen"] = {case: {**phases, "import_ms": 0.0} for case, phases in measured["stock"].items()}
        for install, _boot in IMAGES.values():
            boards.append(bench.board_run(10, 20 if quick else 40, install))
        # Flash wear per reading: the difference between a run and a shorter one (the deploy of the firmware and
        # the first boot's own writes cancel out), with a batch every 10 readings and with one reading a wake.
        shorter = {10: bench.board_run(10, 10 if quick else 20), 1: bench.board_run(1, 3 if quick else 6)}
        longer = {10: boards[0], 1: bench.board_run(1, 6 if quick else 12)}
        # What a power cut costs each: the same number of cuts, each inside a deep sleep, through (c) and (d).
        losses = [
            {"case": f"{case}{n}", "cuts": run["cuts"], "taken": run["taken"], "lost": run["lost"]}
            for n in (10, 60)
            for case, run in (
                ("c", bench.board_run(n, n * (cuts + 1), cuts=cuts)),  # (readings enough for every cut)
                ("d", bench.forgetful_run(n, n + 1, cuts=cuts)),  # (a wake past every cut)
            )
        ]
        lost, sent = bench.lost, bench.sent
    sampling = {board["install"]: board["sampling_us"] / 1000 for board in boards if board["per_send"] > 1}
    sampling_d = {n: run["sampling_us"] / 1000 for n, run in forgetful.items()}
    rows = []
    for end, ratio in ratios.items():
        for image, (install, boot) in IMAGES.items():
            for join_name, join_ms in (("dhcp", value("join_dhcp_ms")), ("static", value("join_static_ms"))):
                for tls in (False, True):
                    for case, readings in CASES:
                        sample = sampling_d[readings] if case[0] == "d" else sampling[install]
                        result = scenario(
                            case[0], measured[image][case], readings, sample, tls, join_ms, ratio, value(boot)
                        )
                        rows.append({"end": end, "image": image, "case": case, "join": join_name, **result})

    def row(end: str, image: str, case: str, join: str) -> dict[str, Any]:
        return next(
            r for r in rows if (r["end"], r["image"], r["case"], r["join"], r["tls"]) == (end, image, case, join, False)
        )

    board = next(b for b in boards if b["install"] == "deployed")
    goals: dict[str, dict[str, dict[str, Any]]] = {}
    for end, ratio in ratios.items():
        for image, (install, boot) in IMAGES.items():
            judged: dict[str, dict[str, Any]] = {}
            for key, (ours, theirs, join) in PER_READING.items():
                share = (
                    row(end, image, ours, join)["uah_per_reading"] / row(end, image, theirs, join)["uah_per_reading"]
                )
                judged[key] = {"goal": PER_READING_MAX, "value": share, "met": share <= PER_READING_MAX}
            for key, (case, join, least) in LIFE.items():
                times = row(end, image, case, join)["life_days"] / row(end, image, "a", join)["life_days"]
                judged[key] = {"goal": least, "value": times, "met": times >= least}
            b = min(
                row(end, image, "b", j)["life_days"] / row(end, image, "a", j)["life_days"] for j in ("dhcp", "static")
            )
            judged["b"] = {"goal": B_MIN, "value": b, "met": b >= B_MIN}
            work = sampling[install] * ratio
            judged["sampling_work"] = {"goal": value(boot) / SAMPLING_BOOT_SHARE, "value": work,
                                       "met": work <= value(boot) / SAMPLING_BOOT_SHARE}  # fmt: skip
            goals[f"{image}_{end}"] = judged
    lost_c = sum(loss["lost"] for loss in losses if loss["case"][0] == "c")
    # The sampling wake's charge, and what would lower it: the boot (an optimised one), the install path (frozen
    # code: nothing to load at an import), the CPU at 80 MHz (a third of the speed at about half the current).
    pub = [7 + 13 + len("sensors/energy-board-10-deployed-1/telemetry") + PAYLOAD]
    cpu = value("cpu_ma")
    ratio = ratios["slow"]
    sample = {
        "stock": charge_uah(value("boot_ms") + sampling["deployed"] * ratio + flash_ms(pub), cpu),
        "optimised_boot": charge_uah(value("boot_frozen_ms") + sampling["deployed"] * ratio + flash_ms(pub), cpu),
        "frozen": charge_uah(value("boot_frozen_ms") + sampling["frozen"] * ratio + flash_ms(pub), cpu),
        "frozen_80_mhz": charge_uah(
            (value("boot_frozen_ms") + sampling["frozen"] * ratio) * 3 + flash_ms(pub), value("cpu80_ma")
        ),
        "forgetful": charge_uah(value("boot_ms") + sampling_d[10] * ratio, cpu),
        "interpreter_ms": {
            end: {**{install: ms * r for install, ms in sampling.items()}, "forgetful": sampling_d[10] * r}
            for end, r in ratios.items()
        },
    }
    wear = {}
    partitions = {p.label: p.size for p in BoardDefinition.load("esp32-devkitc").partitions}
    for per_send in (10, 1):
        long, short = longer[per_send], shorter[per_send]
        readings = long["readings"] - short["readings"]
        per_year = {
            part: (long["erased"][part] - short["erased"].get(part, 0)) / readings * READINGS_PER_YEAR
            / (partitions[part] // 4096)
            for part in long["erased"]
            if part in partitions and long["erased"][part] > short["erased"].get(part, 0)
        }  # fmt: skip
        wear[str(per_send)] = {
            "erases_per_sector_per_year": per_year,
            "years_to_rated": {p: ERASE_CYCLES / n for p, n in per_year.items()},
            "bytes_programmed_per_reading": {
                part: (long["programmed"][part] - short["programmed"].get(part, 0)) / readings
                for part in long["programmed"]
            },
        }
    return {
        "inputs": INPUTS,
        "ratio": ratios["slow"],
        "ratio_fast": ratios["fast"],
        "pystones_here": chip["pystones_here"],
        "period_s": PERIOD_S,
        "cell_mah": CELL_MAH,
        "payload": PAYLOAD,
        "measured": measured,
        "boards": boards,
        "forgetful": forgetful,
        "rows": rows,
        "goals": goals,
        "sampling_goal": {
            "goal": SAMPLING_MPY_MAX,
            "value": board["sampling_mpy_bytes"],
            "met": board["sampling_mpy_bytes"] <= SAMPLING_MPY_MAX,
        },  # fmt: skip
        "losses": losses,
        "loss_goal": {"lost": lost_c, "met": lost_c == 0},
        "sampling": sample,
        "wear": wear,
        "witness": {"sent": sent, "lost": lost},
    }


# -- the report (tools/bench_energy.md) -------------------------------------------------------------------------

CASE_NAMES = {
    "a": "(a) umqtt.simple, a full round per reading",
    "b": "(b) this client, one reading a wake, acknowledged",
    "c10": "(c) store-and-forward, a batch every 10",
    "c60": "(c) store-and-forward, a batch every 60",
    "d10": "(d) umqtt.simple, readings in RTC memory, a batch every 10",
    "d60": "(d) umqtt.simple, readings in RTC memory, a batch every 60",
}
GOAL_NAMES = {
    "c10_d10_dhcp": ("(c) every 10: charge a reading against (d) every 10's, DHCP", f"<= {PER_READING_MAX:g}x"),
    "c10_d10_static": ("(c) every 10: charge a reading against (d) every 10's, static IP", f"<= {PER_READING_MAX:g}x"),
    "c60_d60_dhcp": ("(c) every 60: charge a reading against (d) every 60's, DHCP", f"<= {PER_READING_MAX:g}x"),
    "c60_d60_static": ("(c) every 60: charge a reading against (d) every 60's, static IP", f"<= {PER_READING_MAX:g}x"),
    "c10_dhcp": ("(c) every 10 lasts, against (a), DHCP", ">= 4x"),
    "c10_static": ("(c) every 10 lasts, against (a), static IP", ">= 2x"),
    "c60_dhcp": ("(c) every 60 lasts, against (a), DHCP", ">= 6x"),
    "b": ("(b) lasts, against (a)", f">= {B_MIN:g}x"),
    "sampling_work": ("a sampling wake's interpreter work, ms", f"<= the boot / {SAMPLING_BOOT_SHARE}"),
}
IMAGE_NAMES = {"stock": "stock image", "frozen": "frozen code"}
END_NAMES = {"slow": "1.12's speed", "fast": "twice it (1.18 on)"}


def _shown(entry: dict[str, Any], key: str) -> str:
    return f"{entry['value']:.0f} (of {entry['goal']:.0f})" if key == "sampling_work" else f"{entry['value']:.2f}"


def _judged(entry: dict[str, Any], key: str) -> str:
    return f"{_shown(entry, key)}: {verdict(entry['met'])}"


def report(energy: dict[str, Any], figures: dict[str, Any]) -> Section:
    values = {
        "cell_mah": f"{energy['cell_mah']:,}",
        "payload": str(energy["payload"]),
        "ratio": f"{energy['ratio']:.0f}",
        "ratio_fast": f"{energy['ratio_fast']:.0f}",
        "inputs_table": table(["input", "value", "source"],
                              [[v["what"], f"{v['value']:g}", v["source"]] for v in energy["inputs"].values()]),
        "sent": str(energy["witness"]["sent"]),
        "lost": str(energy["witness"]["lost"]),
    }  # fmt: skip
    columns = [(image, end) for image in IMAGES for end in ENDS]
    goals = [
        Goal("14", f"{GOAL_NAMES[k][0]}, {IMAGE_NAMES[image]}, {END_NAMES[end]}", GOAL_NAMES[k][1],
             _shown(energy["goals"][f"{image}_{end}"][k], k), energy["goals"][f"{image}_{end}"][k]["met"])
        for k in GOAL_NAMES
        for image, end in columns
    ]  # fmt: skip
    sampling_goal, loss_goal = energy["sampling_goal"], energy["loss_goal"]
    goals.append(Goal("14", "a sampling wake's .mpy loaded, stock image", f"<= {SAMPLING_MPY_MAX:,} bytes",
                      f"{sampling_goal['value']:,}", sampling_goal["met"]))  # fmt: skip
    goals.append(Goal("14", "store-and-forward's readings lost through power cuts", "0", str(loss_goal["lost"]),
                      loss_goal["met"]))  # fmt: skip
    values["goals_table"] = table(
        ["goal", "", *(f"{IMAGE_NAMES[i]}, {END_NAMES[e]}" for i, e in columns)],
        [[GOAL_NAMES[k][0], GOAL_NAMES[k][1], *(_judged(energy["goals"][f"{i}_{e}"][k], k) for i, e in columns)]
         for k in GOAL_NAMES],
    )  # fmt: skip
    values["loss_table"] = table(
        ["", "power cuts", "readings taken", "lost"],
        [[CASE_NAMES[loss["case"]], str(loss["cuts"]), str(loss["taken"]), str(loss["lost"])]
         for loss in energy["losses"]],
    )  # fmt: skip
    for image in IMAGES:
        values[f"{image}_table"] = _life_table(energy, image)
        values[f"{image}_phases_table"] = _phases_table(energy, image)
    values |= _sampling(energy)
    values["wear_table"] = _wear_table(energy)
    return Section(values, goals)


def _life_table(energy: dict[str, Any], image: str) -> str:
    rows = [
        [CASE_NAMES[r["case"]], "DHCP" if r["join"] == "dhcp" else "static IP", "yes" if r["tls"] else "no",
         f"{r['uah_per_reading']:.1f}", f"{r['life_days']:.0f} days ({r['life_days'] / 365:.2f} years)",
         f"{r['sending_wake_ms']:.0f}", f"{r['sampling_wake_ms']:.0f}" if r["sampling_wake_ms"] else "-"]
        for r in energy["rows"]
        if (r["end"], r["image"]) == ("slow", image)
    ]  # fmt: skip
    head = ["", "WiFi join", "TLS", "uAh per reading", "2,000 mAh lasts", "sending wake, ms", "sampling wake, ms"]
    return table(head, rows)


def _phases_table(energy: dict[str, Any], image: str) -> str:
    """(a) against (c) every 10, DHCP and TLS, phase by phase."""

    def row(case: str) -> dict[str, Any]:
        return next(
            r
            for r in energy["rows"]
            if (r["end"], r["image"], r["case"], r["join"], r["tls"]) == ("slow", image, case, "dhcp", True)
        )

    rows = [
        [p["phase"], f"{q['ms']:.0f}", f"{q['uah']:.1f}", f"{p['ms']:.0f}", f"{p['uah']:.1f}", f"{p['ma']:g}"]
        for q, p in zip(row("a")["phases"], row("c10")["phases"], strict=True)
    ]
    return table(["phase", "(a) ms", "(a) uAh", "(c) 10, ms", "(c) 10, uAh", "mA"], rows)


def _sampling(energy: dict[str, Any]) -> dict[str, str]:
    sample = energy["sampling"]
    board = next(b for b in energy["boards"] if b["install"] == "deployed" and b["per_send"] > 1)
    frozen = next(b for b in energy["boards"] if b["install"] == "frozen")
    work = sample["interpreter_ms"]
    rows = [
        ["stock image: a 635 ms boot, .mpy files loaded at each import", f"{sample['stock']:.1f}"],
        ["the same with an optimised 70 ms boot", f"{sample['optimised_boot']:.1f}"],
        ["frozen code and the optimised boot", f"{sample['frozen']:.1f}"],
        ["frozen, the CPU at 80 MHz for the wake (a third of the speed, about half the current)",
         f"{sample['frozen_80_mhz']:.1f}"],
        ["(d)'s: the reading written to RTC memory, a 635 ms boot", f"{sample['forgetful']:.1f}"],
    ]  # fmt: skip
    return {
        "sampling_mpy_bytes": f"{board['sampling_mpy_bytes']:,}",
        "sampling_modules": ", ".join(board["sampling_modules"]),
        "sampling_deployed_ms": f"{work['slow']['deployed']:.0f} to {work['fast']['deployed']:.0f}",
        "sampling_frozen_ms": f"{work['slow']['frozen']:.0f} to {work['fast']['frozen']:.0f}",
        "sampling_forgetful_ms": f"{work['slow']['forgetful']:.0f} to {work['fast']['forgetful']:.0f}",
        "sampling_deployed_here": f"{board['sampling_us'] / 1000:.2f}",
        "sampling_frozen_here": f"{frozen['sampling_us'] / 1000:.2f}",
        "sampling_table": table(["sampling wake", "uAh"], rows),
        "loads_table": _loads_table(board, next(iter(energy["forgetful"].values()))["umqtt_mpy_bytes"]),
        "sending_module_names": ", ".join(board["sending_modules"]),
    }


def _loads_table(board: dict[str, Any], umqtt_bytes: int) -> str:
    """The .mpy bytes each kind of wake loads from the filesystem of a stock image (docs/low-power.md), this
    client's and umqtt.simple's; a module dropped once used counts (VBOARD_IMPORTS)."""
    rows = [
        ["this client", "sampling wake", str(len(board["sampling_modules"])), f"{board['sampling_mpy_bytes']:,}"],
        ["this client", "sending wake (config.json's check kept)", str(len(board["sending_modules"])),
         f"{board['sending_mpy_bytes']:,}"],
        ["this client", "power-on (config.json checked, the check kept)", str(len(board["poweron_modules"])),
         f"{board['poweron_mpy_bytes']:,}"],
        ["umqtt.simple", "(a)'s round, (d)'s sending wake", "1", f"{umqtt_bytes:,}"],
        ["umqtt.simple", "(d)'s sampling wake (its main.py only)", "0", "0"],
    ]  # fmt: skip
    return table(["client", "wake", "modules", ".mpy bytes"], rows)


def _wear_table(energy: dict[str, Any]) -> str:
    rows = []
    for per_send, w in sorted(energy["wear"].items(), key=lambda kv: -int(kv[0])):
        for part, written in sorted(w["bytes_programmed_per_reading"].items()):
            if not written:
                continue
            per_year = w["erases_per_sector_per_year"].get(part)
            rows.append([
                f"readings_per_send {per_send}", part, f"{written:.1f}",
                f"{per_year:,.0f}" if per_year else "none measured",
                f"{100 * per_year / ERASE_CYCLES:.1f}%" if per_year else "-",
                f"{w['years_to_rated'][part]:.0f}" if per_year else "-",
            ])  # fmt: skip
    head = ["board", "partition", "bytes programmed a reading", "erases per sector in a year", "of the rated cycles",
            "years to rated"]  # fmt: skip
    return table(head, rows)


def main() -> None:
    print_figure(__doc__, figure)


if __name__ == "__main__":
    main()
