"""Figure 14 of BENCHMARKS.md: the charge of a reading on a battery board, and the life of a 2,000 mAh cell at one
reading a minute, for (a) umqtt.simple's round at every reading, (b) this client with one reading a wake, each
acknowledged before the board sleeps, (c) the board application storing and forwarding, a batch every 10 and every
60 readings, (c') examples/battery_sensor doing the same with the library (dmqtt.wake), and (d) the forgetful
batch as a careful developer writes it: umqtt.simple with the readings in RTC memory, the batch in one message
every 10th and 60th wake (and, as a row, one message a reading); with and without TLS, with DHCP and with a static
address and a known access point; and what the same power cuts cost (c), (c') and (d).

    python tools/bench_energy.py [--quick]          (part of make bench; tools/benchmarks.py --only energy)

An estimate to check on a real board, as figure 13 is. What is measured on the virtual board, each phase of a
wake, as the Unix port's time:
- the sending wakes, by tools/bench_apps/energy (umqtt.simple itself, fetched from PyPI at bench time, and this
  client through its library, as the example sends): imports, the journal, the MQTT connection, the publish or
  the batch with every acknowledgement; with the readings of the sampling wakes before it waiting in the journal;
- the sampling wakes, each an AHT20 reading (the virtual board's model, read by examples/battery_sensor/aht20.py,
  the CPU in light sleep while it converts): the board application's (boot.py and sampler.py, the sensor hook
  aht20.temperature), the example's (main.py and battery.py) and the forgetful batch's (tools/bench_apps/forgetful),
  from the boot's start to the deep sleep, with the modules they load, in each install path (.mpy files on the
  filesystem; frozen into the image, each application's own modules with it);
- baseline (d)'s sending wakes' phases, as above;
- that nothing is lost: the broker's count of what each run sent; and what the same power cuts, each inside a deep
  sleep, cost (c), (c') and (d).
The interpreter's time is scaled to an ESP32 at 240 MHz by figure 13's ratio at the three places it gives a current
build's speed (1.04, 1.47 and 2.07 times 1.12's); the light sleeps are charged at a light sleep's current; the
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
import bench_nodes
from bench_clients import fetch_umqtt
from bench_nodes import loaded_bytes, mpy_files, witnessed
from bench_report import Goal, Section, table, verdict
from figure_cli import print_figure
from flash_cost import ERASE_CYCLES

from host_bridge import assets
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
EXAMPLE = assets.FIRMWARE.parent / "examples" / "battery_sensor"
AHT20 = EXAMPLE / "aht20.py"  # the sensor's driver every kind of wake reads it with
SENSOR: dict[int, dict[str, Any] | None] = {0x38: {"model": "aht20", "temperature_c": 21.5, "humidity": 40}}
PERIOD_S = 60  # one reading a minute
AWAKE_S = 10  # the board application's sleep.awake_s in these runs
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
    "light_ma": {"value": 0.8, "what": "light sleep, the CPU paused, RAM and the RTC on (a sensor's conversion)",
                 "source": "ESP32 datasheet: 0.8 mA in light-sleep mode"},
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
    """Boards on one broker: the energy app's wakes (timed phases); the board application's, the example's and the
    forgetful batch's runs, each reading the AHT20 at every wake."""

    def __init__(self, work: Path, broker: Mosquitto) -> None:
        self.work = work
        self.broker = broker
        self.app = work / "app"
        self.forgetful = work / "forgetful"
        for source, app in ((APP, self.app), (FORGETFUL, self.forgetful)):
            shutil.copytree(source, app)
            shutil.copy(APPS / "phase_clock.py", app)
            fetch_umqtt(app)
        shutil.copy(AHT20, self.forgetful)
        # The board application with its sensor hook's module beside it (publish.sensor "aht20.temperature"), as a
        # user deploys it (frozen with the application in the frozen install path).
        self.board_app = work / "board_app"
        shutil.copytree(assets.APP, self.board_app)
        shutil.copy(AHT20, self.board_app)
        self.cuts = random.Random(14)  # where the loss runs cut the power (cut_in_sleeps)
        self.runs = 0
        self.lost = 0
        self.sent = 0

    def dut(self, dev: str, **options: Any) -> VirtualDut:
        """A virtual board of the sim definition, its flash and console log in a folder of its own, recording every
        module a wake imports (VBOARD_IMPORTS: also those it drops once used, as the config's checker), the AHT20
        wired on its I2C bus."""
        dut = VirtualDut(
            dev,
            BoardDefinition.load("sim"),
            flash=self.work / dev / "b.flash",
            console_log=self.work / dev / "console.log",
            extra_env={"VBOARD_IMPORTS": "1"},
            optimise=True,  # every board's code compiled as (c)'s is: the forgetful apps' too
            **options,
        )
        dut.vboard.drive(i2c=SENSOR)
        return dut

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

    def forgetful_run(
        self, per_send: int, wakes: int, cuts: int = 0, install: str = "deployed", one_message: bool = True
    ) -> dict[str, Any]:
        """Baseline (d) (tools/bench_apps/forgetful): umqtt.simple, the readings kept in RTC memory, a batch every
        `per_send` wakes (in one message, or one a reading), deep-sleeping between them; `cuts` power cuts first,
        each inside a deep sleep drawn from the first per_send after a power-on, then `wakes` wakes from the last
        power-on. Returns the sending wakes' phases, the sampling wakes' time (a run without cuts), and the
        readings it took against those the broker has."""
        self.runs += 1
        dev = f"energy-forgetful-{per_send}-{install}-{self.runs}"
        host, port = self.broker.address.rsplit(":", 1)
        topic = f"sensors/{dev}/telemetry"
        app = self.work / dev / "app"
        shutil.copytree(self.forgetful, app)
        settings = {"CLIENT_ID": dev, "HOST": host, "PORT": int(port), "TOPIC": topic.encode(), "SIZE": PAYLOAD,
                    "PER_SEND": per_send, "WAKES": wakes, "PERIOD_MS": PERIOD_S * 1000,
                    "ONE_MESSAGE": one_message}  # fmt: skip
        (app / "settings.py").write_text("".join(f"{k} = {v!r}\n" for k, v in settings.items()))
        dut = self.dut(dev, app=app, install=install)
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
            arrivals(subscriber, 1 if one_message else sent)
            with subscriber.lock:
                payloads = b"".join(bytes(r.payload) for r in subscriber.records)
        finally:
            dut.close()
            subscriber.close()
        staged = stage_firmware(app, optimise=True)  # (staged once per content: the board's own copy)
        taken = re.findall(r"^taken ([0-9a-f]{8}) (sample|send)$", console, re.M)
        last = taken[-wakes:]  # the last power-on's wakes: each but the last ended in a deep sleep
        sampling = [s for s, (_, kind) in zip(sleeps, last, strict=False) if kind == "sample"]
        received = {payloads[at : at + 8].decode() for at in range(0, len(payloads), PAYLOAD)}
        return {
            "per_send": per_send,
            "cuts": cuts,
            "install": install,
            "phases": phases,
            **wake_times(sampling),
            "sampling_modules": sorted(mpy_files(staged, sampling[-1]["loaded"]) if sampling else []),
            "sampling_mpy_bytes": loaded_bytes(staged, sampling[-1]["loaded"]) if sampling else 0,
            "umqtt_mpy_bytes": (staged / "umqtt_simple.mpy").stat().st_size,
            "taken": len(taken),
            "lost": len({reading for reading, _ in taken} - received),
        }

    def board_run(self, per_send: int, count: int, install: str = "deployed", cuts: int = 0) -> dict[str, Any]:
        """The board application deep-sleeping between readings (config.json's sleep), readings_per_send
        `per_send`, its reading the AHT20's (the sensor hook aht20.temperature), through `count` readings (after
        `cuts` power cuts, each inside a deep sleep drawn from the first per_send after a power-on): its sampling
        wakes' time (from boot.py to the deep sleep) and the .mpy bytes they load; the flash it wears per reading;
        the witness (what it said it accepted, against what the broker has)."""
        self.runs += 1
        dev = f"energy-board-{per_send}-{install}-{self.runs}"
        ap = AccessPoint(self.work / f"{dev}.ap", model=JoinModel(scale=0.02))
        dut = self.dut(dev, ap=ap, install=install, app=self.board_app)
        topic = f"sensors/{dev}/telemetry"
        subscriber = Subscriber(self.broker.address, f"{dev}-observer", topic)
        config = {
            "client_id": dev,
            "broker": self.broker.address,
            "mqtt_version": "5",
            "wifi": {"ssid": "bench"},
            "publish": {"topic": topic, "qos": 1, "count": count, "payload_bytes": PAYLOAD,
                        "sensor": "aht20.temperature"},
            "sleep": {"every_s": PERIOD_S, "awake_s": AWAKE_S, "readings_per_send": per_send},
        }  # fmt: skip
        try:
            dut.configure(config)
            self.cut_in_sleeps(dut, per_send, cuts)
            end = boot_once(dut, timeout=120 + count)
            if end.kind != "done":
                raise SystemExit(f"{dev}: the run did not complete:\n{end.console[-2000:]}")
            sleeps = list(dut.vboard.sleeps)
            stats = dut.stats() or {}
            accepted = witnessed(dut)
            subscriber.wait_for(dev, len(accepted), timeout=30)
            received = subscriber.distinct(dev)
        finally:
            dut.close()
            ap.close()
            subscriber.close()
        lost = len(accepted - received)  # the witness: each reading the board said it accepted, at the broker
        self.sent += len(accepted)
        self.lost += lost
        staged = stage_firmware(self.board_app)
        sampling = [s for s in sleeps if s["script"] == "boot.py"]  # (sending wakes sleep from main.py)
        sending = [s for s in sleeps if s["script"] == "main.py"]
        return {
            "install": install,
            "per_send": per_send,
            "readings": count,
            "cuts": cuts,
            "taken": len(accepted),
            "lost": lost,
            "wakes": len(sleeps) + 1,
            "sampling_wakes": len(sampling),
            **wake_times(sampling),
            "sampling_modules": sorted(mpy_files(staged, sampling[-1]["loaded"]) if sampling else []),
            "sampling_mpy_bytes": loaded_bytes(staged, sampling[-1]["loaded"]) if sampling else 0,
            "sending_modules": sorted(mpy_files(staged, sending[-1]["loaded"]) if sending else []),
            "sending_mpy_bytes": loaded_bytes(staged, sending[-1]["loaded"]) if sending else 0,
            "poweron_modules": sorted(mpy_files(staged, sending[0]["loaded"]) if sending else []),  # (the first wake)
            "poweron_mpy_bytes": loaded_bytes(staged, sending[0]["loaded"]) if sending else 0,
            "erased": {part: c.get("blocks_erased", 0) for part, c in stats.items()},
            "programmed": {part: c.get("bytes_programmed", 0) for part, c in stats.items()},
        }

    def example_run(self, per_send: int, count: int, install: str = "deployed", cuts: int = 0) -> dict[str, Any]:
        """(c'): examples/battery_sensor, the library in lib/ as mip installs it (or frozen with the example's own
        modules), readings_per_send `per_send`, through `count` readings (after `cuts` power cuts, each inside a
        deep sleep drawn from the first per_send after a power-on): its sampling wakes' time and the .mpy bytes they
        load, and the witness (its "reading N on flash" lines, against what the broker has)."""
        self.runs += 1
        dev = f"energy-example-{per_send}-{install}-{self.runs}"
        ap = AccessPoint(self.work / f"{dev}.ap", model=JoinModel(scale=0.02))
        settings = self.work / f"{dev}.json"
        settings.write_text(json.dumps({
            "client_id": dev, "broker": self.broker.address, "count": count, "every_s": PERIOD_S,
            "awake_s": AWAKE_S, "readings_per_send": per_send, "wifi": {"ssid": "bench"},
        }))  # fmt: skip
        dut = self.dut(dev, ap=ap, install=install, app=EXAMPLE, library=True, put=((settings, "example.json"),))
        subscriber = Subscriber(self.broker.address, f"{dev}-observer", f"sensors/{dev}/reading")
        try:
            self.cut_in_sleeps(dut, per_send, cuts)
            end = boot_once(dut, timeout=120 + count)
            if f"done {count}" not in end.console:  # (the example's own last line: it prints no summary)
                raise SystemExit(f"{dev}: the run did not complete:\n{end.console[-2000:]}")
            sleeps = list(dut.vboard.sleeps)
            taken = set(re.findall(r"^reading (\d+) on flash$", dut.console.all(), re.M))
            arrivals(subscriber, len(taken))
            with subscriber.lock:
                received = {str(json.loads(r.payload)["seq"]) for r in subscriber.records}
        finally:
            dut.close()
            ap.close()
            subscriber.close()
        lost = len(taken - received)
        self.sent += len(taken)
        self.lost += lost
        staged = stage_firmware(EXAMPLE, library=True)
        sampling = [s for s in sleeps if "dmqtt.client" not in s["imported"]]  # (a sending wake imports the client)
        return {
            "install": install,
            "per_send": per_send,
            "cuts": cuts,
            "taken": len(taken),
            "lost": lost,
            **wake_times(sampling),
            "sampling_modules": sorted(mpy_files(staged, sampling[-1]["loaded"]) if sampling else []),
            "sampling_mpy_bytes": loaded_bytes(staged, sampling[-1]["loaded"]) if sampling else 0,
        }


def wake_times(wakes: list[dict[str, Any]]) -> dict[str, Any]:
    """The median sampling wake of these deep-sleep records: its interpreter's time (from its first script's start to
    the deep sleep, the emulated hardware's own and its light sleeps left out) and its light sleeps', in
    microseconds; None without one."""
    if not wakes:
        return {"sampling_us": None, "sampling_slept_us": None}
    return {
        "sampling_us": statistics.median(w["firmware_us"] - w["emulated_us"] - w["slept_us"] for w in wakes),
        "sampling_slept_us": statistics.median(w["slept_us"] for w in wakes),
    }


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
    sampling: dict[str, float],
    tls: bool,
    join_ms: float,
    ratio: float,
    boot_ms: float,
) -> dict[str, Any]:
    """The charge of one reading: the sending wake's phases (host time times `ratio` where the interpreter works,
    the public figures elsewhere), the sampling wakes' (readings - 1 of them: their interpreter's time times
    `ratio`, their light sleeps at a light sleep's current) shared among the readings, and the deep sleep of the
    rest of each minute. (b), (c) and (c') journal each reading (a PUB record's flash time, then a DONE record's at
    its acknowledgement); (a) and (d) write no flash."""
    pub = 7 + 13 + len("sensors/energy-dmqtt-10-1/telemetry") + PAYLOAD  # a PUB record, as the journal writes it
    cpu, rx = value("cpu_ma"), value("rx_ma")
    durable = name in DURABLE
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
    working_ms = boot_ms + sampling["interpreter_ms"] * ratio + (flash_ms([pub]) if durable else 0.0)
    sample_ms = working_ms + sampling["slept_ms"]
    sample_uah = charge_uah(working_ms, cpu) + charge_uah(sampling["slept_ms"], value("light_ma"))
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
# Each case, and its readings a sending wake: (c') is the example ("e"), (d) one message a reading is "p".
CASES = (("a", 1), ("b", 1), ("c10", 10), ("c60", 60), ("e10", 10), ("e60", 60), ("d10", 10), ("d60", 60),
         ("p10", 10), ("p60", 60))  # fmt: skip
DURABLE = ("b", "c", "e")
# The interpreter ratio at the three places figure 13 gives a current build's speed. Every row is computed at each;
# the tables show the slow end; the goals are judged at the slow end and the middle, and shown at the fast end.
ENDS = ("slow", "middle", "fast")
JUDGED = ("slow", "middle")
# The goals, each a comparison of two rows at each image, end and join, or of the sampling wake against the boot.
PER_READING_MAX = {"stock": 1.15, "frozen": 1.05}  # (c) and (c'): their charge a reading, at most this times (d)'s
EXAMPLE_MAX = 1.05  # (c'): its charge a reading at most this times (c)'s
JOINS = {"dhcp": "join_dhcp_ms", "static": "join_static_ms"}
PER_READING = {
    f"{ours}{n}_{theirs}{n}_{join}": (f"{ours}{n}", f"{theirs}{n}", join)
    for ours, theirs in (("c", "d"), ("e", "d"), ("e", "c"))
    for n in (10, 60)
    for join in JOINS
}
LIFE = {"c10_dhcp": ("c10", "dhcp", 4.0), "c10_static": ("c10", "static", 2.0), "c60_dhcp": ("c60", "dhcp", 6.0)}
B_MIN = 0.95  # (b) lasts at least this times as long as (a)
SAMPLING_MPY_MAX = 4096  # bytes of .mpy a sampling wake loads, stock image
SAMPLING_BOOT_SHARE = 5  # a sampling wake's interpreter work, at most the boot's time over this
BACKOFF_MAX = 6  # the board application's doublings of the sending wakes' distance after refused joins (wake_plan.py)


def figure(quick: bool) -> dict[str, Any]:
    chip = bench_chip.figure(quick)
    ratios = chip["ratios"]
    count = 3 if quick else 7
    cuts = 2 if quick else 5
    measured: dict[str, dict[str, dict[str, float]]] = {}
    boards: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, Mosquitto(Path(tmp) / "broker") as broker:
        bench = Bench(Path(tmp), broker)
        wakes = 2 if quick else 3
        forgetful = {
            (install, n): bench.forgetful_run(n, n * wakes, install=install)
            for install, _boot in IMAGES.values()
            for n in (10, 60)
        }
        one_each = {n: bench.forgetful_run(n, n * wakes, one_message=False) for n in (10, 60)}
        measured["stock"] = {
            "a": median_phases(bench.wakes("umqtt", 1, count)),
            "b": median_phases(bench.wakes("dmqtt", 1, count)),
            "c10": median_phases(bench.wakes("dmqtt", 10, count)),
            "c60": median_phases(bench.wakes("dmqtt", 60, max(2, count // 2))),
            **{f"d{n}": median_phases(forgetful["deployed", n]["phases"]) for n in (10, 60)},
            **{f"p{n}": median_phases(one_each[n]["phases"]) for n in (10, 60)},
        }
        # (c') sends as (c): the same library calls (tools/bench_apps/energy does what the example does).
        measured["stock"] |= {"e10": measured["stock"]["c10"], "e60": measured["stock"]["c60"]}
        # Frozen, an import loads nothing: the virtual board runs frozen modules' bodies before the board starts
        # (on a chip an import then only runs the body, making its functions), so the sending wakes' imports are
        # taken as none, umqtt.simple's as this client's; their other phases are the deployed ones.
        measured["frozen"] = {case: {**phases, "import_ms": 0.0} for case, phases in measured["stock"].items()}
        examples = {}
        for install, _boot in IMAGES.values():
            boards.append(bench.board_run(10, 20 if quick else 40, install))
            examples[install] = bench.example_run(10, 20 if quick else 40, install)
        # Flash wear per reading: the difference between a run and a shorter one (the deploy of the firmware and
        # the first boot's own writes cancel out), with a batch every 10 readings and with one reading a wake.
        shorter = {10: bench.board_run(10, 10 if quick else 20), 1: bench.board_run(1, 3 if quick else 6)}
        longer = {10: boards[0], 1: bench.board_run(1, 6 if quick else 12)}
        # What a power cut costs each: the same number of cuts, each inside a deep sleep, through (c), (c') and (d).
        losses = [
            {"case": f"{case}{n}", "cuts": run["cuts"], "taken": run["taken"], "lost": run["lost"]}
            for n in (10, 60)
            for case, run in (
                ("c", bench.board_run(n, n * (cuts + 1), cuts=cuts)),  # (readings enough for every cut)
                ("e", bench.example_run(n, n * (cuts + 1), cuts=cuts)),
                ("d", bench.forgetful_run(n, n + 1, cuts=cuts)),  # (a wake past every cut)
            )
        ]
        # (e) and (f): nodes over ESP-NOW through a gateway, each reading sent at its wake (tools/bench_nodes.py).
        node_bench = bench_nodes.NodeBench(Path(tmp) / "nodes", broker.address, bench.board_app, AHT20, SENSOR)
        node_runs = {
            "e": {install: node_bench.durable(10 if quick else 20, install) for install, _ in IMAGES.values()},
            "f": {install: node_bench.forgetful(10 if quick else 20, install) for install, _ in IMAGES.values()},
        }
        away = 3 if quick else 5
        node_losses = [
            {"case": "e", "cuts": cuts, "away": 0, **_taken(node_bench.durable(10, cuts=cuts))},
            {"case": "f", "cuts": cuts, "away": 0, **_taken(node_bench.forgetful(10 + 10 * cuts, cuts=cuts))},
            {"case": "e", "cuts": 0, "away": away, **_taken(node_bench.durable(away + 5, away=away))},
            {"case": "f", "cuts": 0, "away": away, **_taken(node_bench.forgetful(away + 5, away=away))},
        ]
        lost, sent = bench.lost, bench.sent
    runs = {
        "c": {b["install"]: b for b in boards},
        "e": examples,
        "d": {install: forgetful[install, 10] for install, _ in IMAGES.values()},
    }
    sampling = {
        kind: {
            install: {"interpreter_ms": run["sampling_us"] / 1000, "slept_ms": run["sampling_slept_us"] / 1000}
            for install, run in by_install.items()
        }
        for kind, by_install in runs.items()
    }
    sampling["p"] = sampling["d"]  # (one message a reading: the same sampling wake)
    rows = []
    for end, ratio in ratios.items():
        for image, (install, boot) in IMAGES.items():
            for join_name, join_input in JOINS.items():
                for tls in (False, True):
                    for case, readings in CASES:
                        sample = sampling.get(case[0], {}).get(install, {"interpreter_ms": 0.0, "slept_ms": 0.0})
                        result = scenario(
                            case[0], measured[image][case], readings, sample, tls, value(join_input), ratio,
                            value(boot),
                        )  # fmt: skip
                        rows.append({"end": end, "image": image, "case": case, "join": join_name, **result})

    def row(end: str, image: str, case: str, join: str) -> dict[str, Any]:
        return next(
            r for r in rows if (r["end"], r["image"], r["case"], r["join"], r["tls"]) == (end, image, case, join, False)
        )

    goals: dict[str, dict[str, dict[str, Any]]] = {}
    for end, ratio in ratios.items():
        for image, (install, boot) in IMAGES.items():
            judged: dict[str, dict[str, Any]] = {}
            for key, (ours, theirs, join) in PER_READING.items():
                share = (
                    row(end, image, ours, join)["uah_per_reading"] / row(end, image, theirs, join)["uah_per_reading"]
                )
                most = EXAMPLE_MAX if theirs[0] == "c" else PER_READING_MAX[image]
                judged[key] = {"goal": most, "value": share, "met": share <= most}
            for key, (case, join, least) in LIFE.items():
                times = row(end, image, case, join)["life_days"] / row(end, image, "a", join)["life_days"]
                judged[key] = {"goal": least, "value": times, "met": times >= least}
            b = min(
                row(end, image, "b", j)["life_days"] / row(end, image, "a", j)["life_days"] for j in ("dhcp", "static")
            )
            judged["b"] = {"goal": B_MIN, "value": b, "met": b >= B_MIN}
            work = sampling["c"][install]["interpreter_ms"] * ratio
            judged["sampling_work"] = {"goal": value(boot) / SAMPLING_BOOT_SHARE, "value": work,
                                       "met": work <= value(boot) / SAMPLING_BOOT_SHARE}  # fmt: skip
            goals[f"{image}_{end}"] = judged
    lost_ours = sum(loss["lost"] for loss in losses if loss["case"][0] in DURABLE)
    board = runs["c"]["deployed"]
    example = runs["e"]["deployed"]
    # The sampling wake's charge, and what would lower it: the boot (an optimised one), the install path (frozen
    # code: nothing to load at an import), the CPU at 80 MHz (a third of the speed at about half the current).
    pub = [7 + 13 + len("sensors/energy-board-10-deployed-1/telemetry") + PAYLOAD]
    cpu = value("cpu_ma")
    ratio = ratios["slow"]

    def wake_uah(kind: str, install: str, boot: str, mhz80: bool = False) -> float:
        work = sampling[kind][install]
        ms = value(boot) + work["interpreter_ms"] * ratio
        slept = charge_uah(work["slept_ms"], value("light_ma"))
        flash = flash_ms(pub) if kind in DURABLE else 0.0
        if mhz80:
            return charge_uah(ms * 3 + flash, value("cpu80_ma")) + slept
        return charge_uah(ms + flash, cpu) + slept

    sample = {
        "stock": wake_uah("c", "deployed", "boot_ms"),
        "optimised_boot": wake_uah("c", "deployed", "boot_frozen_ms"),
        "frozen": wake_uah("c", "frozen", "boot_frozen_ms"),
        "frozen_80_mhz": wake_uah("c", "frozen", "boot_frozen_ms", mhz80=True),
        "example": wake_uah("e", "deployed", "boot_ms"),
        "example_frozen": wake_uah("e", "frozen", "boot_frozen_ms"),
        "forgetful": wake_uah("d", "deployed", "boot_ms"),
        "forgetful_frozen": wake_uah("d", "frozen", "boot_frozen_ms"),
        "interpreter_ms": {
            end: {
                f"{kind}_{install}": work["interpreter_ms"] * r
                for kind in ("c", "e", "d")
                for install, work in sampling[kind].items()
            }
            for end, r in ratios.items()
        },  # fmt: skip
        "slept_ms": sampling["c"]["deployed"]["slept_ms"],
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
    nodes = node_rows(node_runs, node_losses, rows, ratios)
    return {
        "inputs": INPUTS,
        "nodes": nodes,
        "ratios": ratios,
        "speeds": chip["speeds"],
        "pystones_here": chip["pystones_here"],
        "period_s": PERIOD_S,
        "cell_mah": CELL_MAH,
        "payload": PAYLOAD,
        "measured": measured,
        "boards": boards,
        "examples": list(examples.values()),
        "forgetful": [run for run in forgetful.values()],
        "rows": rows,
        "goals": goals,
        "sampling_goal": {
            "goal": SAMPLING_MPY_MAX,
            "value": board["sampling_mpy_bytes"],
            "met": board["sampling_mpy_bytes"] <= SAMPLING_MPY_MAX,
        },
        "example_loads_goal": {
            "goal": board["sampling_mpy_bytes"],
            "value": example["sampling_mpy_bytes"],
            "met": example["sampling_mpy_bytes"] <= board["sampling_mpy_bytes"],
        },
        "losses": losses,
        "loss_goal": {"lost": lost_ours, "met": lost_ours == 0},
        "sampling": sample,
        "refused": refused_wakes(measured, ratio),
        "wear": wear,
        "witness": {"sent": sent, "lost": lost},
    }


def _taken(run: dict[str, Any]) -> dict[str, int]:
    return {"taken": run["taken"], "lost": run["lost"]}


# (e) against (d) every 10 (the forgetful WiFi batch as a careful developer writes it), and against (f).
NODE_MAX = {"stock": 1.0, "frozen": 0.5}  # (e)'s charge a reading, at most this times (d) every 10's
NODE_FORGETFUL_MAX = 1.2  # (e)'s charge a reading, at most this times (f)'s: the journal costs at most a fifth
NODE_PERIODS_S = (60, 600)  # a 2,000 mAh cell's life at one reading a minute and one every 10 minutes


def node_rows(
    runs: dict[str, dict[str, dict[str, Any]]],
    losses: list[dict[str, Any]],
    rows: list[dict[str, Any]],
    ratios: dict[str, float],
) -> dict[str, Any]:
    """(e) and (f): a reading's charge (one a wake, each sent at its wake), and the cell's life at one a minute
    and one every 10 minutes, on each image at each end of the ratio; their goals against (d) every 10 (the same
    image, end and join, no TLS) and against each other; the readings the cuts and the gateway's absence cost."""
    pub = 7 + 13 + len("sensors/node-e-deployed-1/telemetry") + PAYLOAD
    out_rows: list[dict[str, Any]] = []
    for end, ratio in ratios.items():
        for image, (install, boot) in IMAGES.items():
            for case in ("e", "f"):
                run = runs[case][install]
                flash = flash_ms([pub, 9]) if case == "e" else 0.0  # (e): its PUB record, then its DONE
                phases = bench_nodes.charge(
                    run, value(boot), ratio, value("cpu_ma"), value("rx_ma"), value("light_ma"), flash,
                    gateway_flash=flash_ms([pub]),  # the gateway journals the message before it answers
                )  # fmt: skip
                awake_ms = phases.pop("ms")
                wake_uah = sum(phases.values())
                life = {}
                for period in NODE_PERIODS_S:
                    asleep = charge_uah(period * 1000 - awake_ms, value("deep_ua") / 1000)
                    life[str(period)] = CELL_MAH * 1000 / (wake_uah + asleep) / (24 * 3600 / period)
                asleep = charge_uah(PERIOD_S * 1000 - awake_ms, value("deep_ua") / 1000)
                out_rows.append({"end": end, "image": image, "case": case, "uah_per_reading": wake_uah + asleep,
                                 "wake_ms": awake_ms, "wake_uah": wake_uah, "life_days": life,
                                 "phases": phases})  # fmt: skip

    def node(end: str, image: str, case: str) -> float:
        return float(
            next(r for r in out_rows if (r["end"], r["image"], r["case"]) == (end, image, case))["uah_per_reading"]
        )

    def batch(end: str, image: str, join: str) -> float:
        return float(
            next(
                r
                for r in rows
                if (r["end"], r["image"], r["case"], r["join"], r["tls"]) == (end, image, "d10", join, False)
            )["uah_per_reading"]
        )

    goals: dict[str, dict[str, dict[str, Any]]] = {}
    for end in ratios:
        for image in IMAGES:
            judged = {}
            for join in JOINS:
                share = node(end, image, "e") / batch(end, image, join)
                judged[f"e_d10_{join}"] = {"goal": NODE_MAX[image], "value": share, "met": share <= NODE_MAX[image]}
            share = node(end, image, "e") / node(end, image, "f")
            judged["e_f"] = {"goal": NODE_FORGETFUL_MAX, "value": share, "met": share <= NODE_FORGETFUL_MAX}
            goals[f"{image}_{end}"] = judged
    lost = sum(loss["lost"] for loss in losses if loss["case"] == "e")
    return {
        "inputs": bench_nodes.INPUTS,
        "runs": runs,
        "rows": out_rows,
        "goals": goals,
        "losses": losses,
        "loss_goal": {"lost": lost, "met": lost == 0},
    }


def refused_wakes(measured: dict[str, dict[str, dict[str, float]]], ratio: float) -> dict[str, Any]:
    """What a wrong password costs the board application, on each image at the slow end: one refused sending wake
    before (the radio on for all of sleep.awake_s, as it was) and after (until the network says no: the join's
    time in the virtual board's model), and a day of refusals at readings_per_send 10 and a wake a minute (before:
    every 10th wake a refused sending wake; after: each one puts the next twice as far, up to 64 times)."""
    out: dict[str, Any] = {}
    wakes_a_day = 24 * 3600 // PERIOD_S
    after_wakes, at, step = 0, 0, 10
    while at < wakes_a_day:
        after_wakes += 1
        at += step
        step = min(step * 2, 10 << BACKOFF_MAX)
    for image, (_install, boot) in IMAGES.items():
        sending = measured[image]["c10"]
        cpu_ms = value(boot) + (sending["import_ms"] + sending["journal_ms"]) * ratio
        before = charge_uah(cpu_ms, value("cpu_ma")) + charge_uah(AWAKE_S * 1000, value("rx_ma"))
        after = charge_uah(cpu_ms, value("cpu_ma")) + charge_uah(value("join_dhcp_ms"), value("rx_ma"))
        out[image] = {
            "before_uah": before,
            "after_uah": after,
            "before_day_mah": before * (wakes_a_day // 10) / 1000,
            "after_day_mah": after * after_wakes / 1000,
            "before_day_wakes": wakes_a_day // 10,
            "after_day_wakes": after_wakes,
        }
    return out


# -- the report (tools/bench_energy.md) -------------------------------------------------------------------------

CASE_NAMES = {
    "a": "(a) umqtt.simple, a full round per reading",
    "b": "(b) this client, one reading a wake, acknowledged",
    "c10": "(c) store-and-forward, the board application, a batch every 10",
    "c60": "(c) store-and-forward, the board application, a batch every 60",
    "e10": "(c') store-and-forward, an application of its own (the example), a batch every 10",
    "e60": "(c') store-and-forward, an application of its own (the example), a batch every 60",
    "d10": "(d) the forgetful batch: umqtt.simple, readings in RTC memory, one message every 10",
    "d60": "(d) the forgetful batch: umqtt.simple, readings in RTC memory, one message every 60",
    "p10": "(d) the same, one message a reading, every 10",
    "p60": "(d) the same, one message a reading, every 60",
}
JOIN_NAMES = {"dhcp": "DHCP", "static": "static IP"}


def _goal_names() -> dict[str, tuple[str, str]]:
    names: dict[str, tuple[str, str]] = {}
    label = {"c": "(c)", "e": "(c')", "d": "(d)"}
    for key, (ours, theirs, join) in PER_READING.items():
        n = ours[1:]
        bound = f"<= {EXAMPLE_MAX:g}x" if theirs[0] == "c" else "<= 1.15x stock, 1.05x frozen"
        names[key] = (f"{label[ours[0]]} every {n}: charge a reading against {label[theirs[0]]}'s, {JOIN_NAMES[join]}",
                      bound)  # fmt: skip
    names |= {
        "c10_dhcp": ("(c) every 10 lasts, against (a), DHCP", ">= 4x"),
        "c10_static": ("(c) every 10 lasts, against (a), static IP", ">= 2x"),
        "c60_dhcp": ("(c) every 60 lasts, against (a), DHCP", ">= 6x"),
        "b": ("(b) lasts, against (a)", f">= {B_MIN:g}x"),
        "sampling_work": ("(c)'s sampling wake's interpreter work, ms", f"<= the boot / {SAMPLING_BOOT_SHARE}"),
    }
    return names


GOAL_NAMES = _goal_names()
IMAGE_NAMES = {"stock": "stock image", "frozen": "frozen code"}
END_NAMES = {"slow": "slow end", "middle": "middle", "fast": "fast end (shown)"}


def _shown(entry: dict[str, Any], key: str) -> str:
    return f"{entry['value']:.0f} (of {entry['goal']:.0f})" if key == "sampling_work" else f"{entry['value']:.2f}"


def _judged(entry: dict[str, Any], key: str, end: str) -> str:
    if end not in JUDGED:
        return _shown(entry, key)
    return f"{_shown(entry, key)}: {verdict(entry['met'])}"


def report(energy: dict[str, Any], figures: dict[str, Any]) -> Section:
    values = {
        "cell_mah": f"{energy['cell_mah']:,}",
        "payload": str(energy["payload"]),
        **bench_chip.speed_values(energy),
        "inputs_table": table(["input", "value", "source"],
                              [[v["what"], f"{v['value']:g}", v["source"]]
                               for v in [*energy["inputs"].values(), *energy["nodes"]["inputs"].values()]]),
        "sent": str(energy["witness"]["sent"]),
        "lost": str(energy["witness"]["lost"]),
    }  # fmt: skip
    columns = [(image, end) for image in IMAGES for end in ENDS]
    goals = [
        Goal("14", f"{GOAL_NAMES[k][0]}, {IMAGE_NAMES[image]}, {END_NAMES[end]}", _bound(k, image),
             _shown(energy["goals"][f"{image}_{end}"][k], k), energy["goals"][f"{image}_{end}"][k]["met"])
        for k in GOAL_NAMES
        for image in IMAGES
        for end in JUDGED
    ]  # fmt: skip
    sampling_goal, loads_goal, loss_goal = energy["sampling_goal"], energy["example_loads_goal"], energy["loss_goal"]
    goals.append(Goal("14", "(c)'s sampling wake's .mpy loaded, stock image", f"<= {SAMPLING_MPY_MAX:,} bytes",
                      f"{sampling_goal['value']:,}", sampling_goal["met"]))  # fmt: skip
    goals.append(Goal("14", "(c')'s sampling wake's .mpy loaded, stock image, against (c)'s",
                      f"<= {loads_goal['goal']:,} bytes", f"{loads_goal['value']:,}", loads_goal["met"]))  # fmt: skip
    goals.append(Goal("14", "(c)'s and (c')'s readings lost through power cuts", "0", str(loss_goal["lost"]),
                      loss_goal["met"]))  # fmt: skip
    values["goals_table"] = table(
        ["goal", "", *(f"{IMAGE_NAMES[i]}, {END_NAMES[e]}" for i, e in columns)],
        [[GOAL_NAMES[k][0], _bound(k, None), *(_judged(energy["goals"][f"{i}_{e}"][k], k, e) for i, e in columns)]
         for k in GOAL_NAMES],
    )  # fmt: skip
    judged = [g for g in goals if g.ok is not None]
    missed = [k for k in GOAL_NAMES if any(not energy["goals"][f"{i}_{e}"][k]["met"] for i in IMAGES for e in JUDGED)]
    values["goals_summary"] = f"{sum(1 for g in judged if g.ok)} of {len(judged)} judged goals are met" + (
        ": every one"
        if all(g.ok for g in judged)
        else "; missed at one place or more (the table says where): "
        + "; ".join(GOAL_NAMES[k][0] for k in missed)
        + "".join(f"; {g.text}" for g in goals[-3:] if g.ok is False)
    )
    values["loss_table"] = table(
        ["", "power cuts", "readings taken", "lost"],
        [[CASE_NAMES[loss["case"]], str(loss["cuts"]), str(loss["taken"]), str(loss["lost"])]
         for loss in energy["losses"]],
    )  # fmt: skip
    for image in IMAGES:
        values[f"{image}_table"] = _life_table(energy, image)
        values[f"{image}_phases_table"] = _phases_table(energy, image)
    values |= _sampling(energy)
    values["refused_table"] = _refused_table(energy)
    values["wear_table"] = _wear_table(energy)
    node_values, node_goals = _nodes(energy["nodes"])
    values |= node_values
    goals += node_goals
    return Section(values, goals)


NODE_NAMES = {
    "e": "(e) a durable node over ESP-NOW, each reading sent at its wake",
    "f": "(f) a forgetful ESP-NOW node, one frame a wake, no journal",
}
NODE_GOALS = {
    "e_d10_dhcp": ("(e): charge a reading against (d) every 10's, DHCP", "<= 1.0x stock, 0.5x frozen"),
    "e_d10_static": ("(e): charge a reading against (d) every 10's, static IP", "<= 1.0x stock, 0.5x frozen"),
    "e_f": ("(e): charge a reading against (f)'s", f"<= {NODE_FORGETFUL_MAX:g}x"),
}


def _nodes(nodes: dict[str, Any]) -> tuple[dict[str, str], list[Goal]]:
    """The nodes' part of figure 14: their rows, goals, losses and what a node's wake loads."""
    columns = [(image, end) for image in IMAGES for end in ENDS]

    def bound(key: str, image: str | None) -> str:
        if key == "e_f":
            return NODE_GOALS[key][1]
        return NODE_GOALS[key][1] if image is None else f"<= {NODE_MAX[image]:g}x"

    def shown(key: str, image: str, end: str) -> str:
        entry = nodes["goals"][f"{image}_{end}"][key]
        text = f"{entry['value']:.2f}"
        return f"{text}: {verdict(entry['met'])}" if end in JUDGED else text

    goals = [
        Goal("14", f"{NODE_GOALS[k][0]}, {IMAGE_NAMES[image]}, {END_NAMES[end]}", bound(k, image),
             f"{nodes['goals'][f'{image}_{end}'][k]['value']:.2f}", nodes["goals"][f"{image}_{end}"][k]["met"])
        for k in NODE_GOALS
        for image in IMAGES
        for end in JUDGED
    ]  # fmt: skip
    loss = nodes["loss_goal"]
    goals.append(Goal("14", "(e)'s readings lost through power cuts and its gateway's absence", "0", str(loss["lost"]),
                      loss["met"]))  # fmt: skip
    rows = [
        [NODE_NAMES[r["case"]], IMAGE_NAMES[r["image"]], f"{r['uah_per_reading']:.1f}", f"{r['wake_ms']:.0f}",
         f"{r['life_days']['60']:.0f} days ({r['life_days']['60'] / 365:.2f} years)",
         f"{r['life_days']['600']:.0f} days ({r['life_days']['600'] / 365:.1f} years)"]
        for r in nodes["rows"]
        if r["end"] == "slow"
    ]  # fmt: skip
    phases = [
        [name, *(f"{r['phases'][name]:.2f}" for r in nodes["rows"] if r["end"] == "slow")]
        for name in nodes["rows"][0]["phases"]
    ]
    head = [f"{r['case']}, {IMAGE_NAMES[r['image']]}" for r in nodes["rows"] if r["end"] == "slow"]
    judged = [g for g in goals if g.ok is not None]
    e_deployed = nodes["runs"]["e"]["deployed"]
    f_deployed = nodes["runs"]["f"]["deployed"]
    return {
        "nodes_table": table(
            [
                "",
                "image",
                "uAh per reading",
                "wake, ms",
                "2,000 mAh lasts, a reading a minute",
                "a reading every 10 minutes",
            ],
            rows,
        ),  # fmt: skip
        "nodes_phases_table": table(["phase, uAh", *head], phases),
        "nodes_goals_table": table(
            ["goal", "", *(f"{IMAGE_NAMES[i]}, {END_NAMES[e]}" for i, e in columns)],
            [[NODE_GOALS[k][0], bound(k, None), *(shown(k, i, e) for i, e in columns)] for k in NODE_GOALS],
        ),
        "nodes_goals_summary": f"{sum(1 for g in judged if g.ok)} of {len(judged)} judged goals of the nodes are met",
        "nodes_loss_table": table(
            ["", "power cuts", "gateway away, wakes", "readings taken", "lost"],
            [
                [NODE_NAMES[x["case"]], str(x["cuts"]), str(x["away"]), str(x["taken"]), str(x["lost"])]
                for x in nodes["losses"]
            ],
        ),  # fmt: skip
        "node_mpy_bytes": f"{e_deployed['mpy_bytes']:,}",
        "node_modules": ", ".join(e_deployed["modules"]),
        "node_forgetful_mpy_bytes": f"{f_deployed['mpy_bytes']:,}",
        "node_wake_here": f"{e_deployed['wake_us'] / 1000:.2f}",
        "node_forgetful_here": f"{f_deployed['wake_us'] / 1000:.2f}",
        "node_turnaround_here": f"{e_deployed['turnaround_us'] / 1000:.3f}",
    }, goals


def _bound(key: str, image: str | None) -> str:
    if key in PER_READING and PER_READING[key][1][0] != "c":
        return "<= 1.15x stock, 1.05x frozen" if image is None else f"<= {PER_READING_MAX[image]:g}x"
    return GOAL_NAMES[key][1]


def _life_table(energy: dict[str, Any], image: str) -> str:
    rows = [
        [CASE_NAMES[r["case"]], JOIN_NAMES[r["join"]], "yes" if r["tls"] else "no",
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
    example = next(e for e in energy["examples"] if e["install"] == "deployed")
    forgetful = next(f for f in energy["forgetful"] if f["install"] == "deployed")
    work = sample["interpreter_ms"]
    rows = [
        ["(c) stock image: a 635 ms boot, .mpy files loaded at each import", f"{sample['stock']:.1f}"],
        ["(c) the same with an optimised 70 ms boot", f"{sample['optimised_boot']:.1f}"],
        ["(c) frozen code and the optimised boot", f"{sample['frozen']:.1f}"],
        ["(c) frozen, the CPU at 80 MHz for the wake (a third of the speed, about half the current)",
         f"{sample['frozen_80_mhz']:.1f}"],
        ["(c') the example, stock image", f"{sample['example']:.1f}"],
        ["(c') the example, frozen code and the optimised boot", f"{sample['example_frozen']:.1f}"],
        ["(d) the reading written to RTC memory, stock image", f"{sample['forgetful']:.1f}"],
        ["(d) the same, frozen code and the optimised boot", f"{sample['forgetful_frozen']:.1f}"],
    ]  # fmt: skip

    def span(key: str) -> str:
        return " / ".join(f"{work[end][key]:.0f}" for end in ENDS)

    return {
        "sampling_mpy_bytes": f"{board['sampling_mpy_bytes']:,}",
        "sampling_modules": ", ".join(board["sampling_modules"]),
        "example_mpy_bytes": f"{example['sampling_mpy_bytes']:,}",
        "example_modules": ", ".join(example["sampling_modules"]),
        "sampling_deployed_ms": span("c_deployed"),
        "sampling_frozen_ms": span("c_frozen"),
        "example_deployed_ms": span("e_deployed"),
        "example_frozen_ms": span("e_frozen"),
        "sampling_forgetful_ms": span("d_deployed"),
        "forgetful_frozen_ms": span("d_frozen"),
        "sampling_deployed_here": f"{board['sampling_us'] / 1000:.2f}",
        "sampling_frozen_here": f"{frozen['sampling_us'] / 1000:.2f}",
        "slept_ms": f"{sample['slept_ms']:.0f}",
        "sampling_table": table(["sampling wake", "uAh"], rows),
        "loads_table": _loads_table(board, example, forgetful),
        "sending_module_names": ", ".join(board["sending_modules"]),
    }


def _loads_table(board: dict[str, Any], example: dict[str, Any], forgetful: dict[str, Any]) -> str:
    """The .mpy bytes each kind of wake loads from the filesystem of a stock image (docs/low-power.md), this
    client's and umqtt.simple's; a module dropped once used counts (VBOARD_IMPORTS)."""
    rows = [
        ["(c) the board application", "sampling wake", str(len(board["sampling_modules"])),
         f"{board['sampling_mpy_bytes']:,}"],
        ["(c) the board application", "sending wake (config.json's check kept)", str(len(board["sending_modules"])),
         f"{board['sending_mpy_bytes']:,}"],
        ["(c) the board application", "power-on (config.json checked, the check kept)",
         str(len(board["poweron_modules"])), f"{board['poweron_mpy_bytes']:,}"],
        ["(c') the example", "sampling wake", str(len(example["sampling_modules"])),
         f"{example['sampling_mpy_bytes']:,}"],
        ["(d) umqtt.simple's forgetful batch", "sampling wake", str(len(forgetful["sampling_modules"])),
         f"{forgetful['sampling_mpy_bytes']:,}"],
        ["umqtt.simple", "(a)'s round, (d)'s sending wake", "1", f"{forgetful['umqtt_mpy_bytes']:,}"],
    ]  # fmt: skip
    return table(["client", "wake", "modules", ".mpy bytes"], rows)


def _refused_table(energy: dict[str, Any]) -> str:
    rows = [
        [IMAGE_NAMES[image], f"{r['before_uah']:.0f}", f"{r['after_uah']:.0f}",
         f"{r['before_day_wakes']} wakes, {r['before_day_mah']:.1f} mAh",
         f"{r['after_day_wakes']} wakes, {r['after_day_mah']:.2f} mAh"]
        for image, r in energy["refused"].items()
    ]  # fmt: skip
    head = ["", "a refused sending wake before, uAh", "after, uAh", "a day of refusals before", "after"]
    return table(head, rows)


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
