"""The examples (examples/), each on a virtual board with the client library where mip puts it (lib/), against a
real Mosquitto: the blocking sensor loop installed with `mpremote mip install` over HTTP through the board's REPL
and then cut mid-run; the asyncio sensor app through two power cuts and a broker restart, with commands coming
in at QoS 2 and a 10 ms sensor task that keeps its schedule; the serial-link board through `host-bridge run`.
Judged from what the broker delivered: every reading once (QoS 2) or at least once (QoS 1), nothing missing."""

from __future__ import annotations

import functools
import http.server
import json
import re
import subprocess
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from host_bridge.boards import package_command
from host_bridge.boards.definition import BoardDefinition
from host_bridge.bridge.run_command import command as bridge_command
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.subscriber import Subscriber
from host_bridge.processes import ManagedProcess
from host_bridge.vboard import LineFaults, VirtualBoard
from host_bridge.vboard.wifi import AccessPoint, JoinModel
from tests.conftest import REPO
from tests.integration.boards import read_until
from tests.integration.test_vboard_console import console_board, mpremote

EXAMPLES = REPO / "examples"


def settings(tmp_path: Path, dev: str, broker: str, count: int, interval_ms: int = 20, **extra: object) -> Path:
    path = tmp_path / "example.json"
    path.write_text(
        json.dumps({"client_id": dev, "broker": broker, "count": count, "interval_ms": interval_ms, **extra})
    )
    return path


def readings(subscriber: Subscriber) -> list[int]:
    """The seq of every reading the broker delivered, duplicates included, in arrival order."""
    with subscriber.lock:
        return seqs_under_lock(subscriber)


def seqs_under_lock(subscriber: Subscriber) -> list[int]:
    """readings() for a caller that holds the subscriber's lock already (its `arrived` condition's)."""
    return [json.loads(r.payload)["seq"] for r in subscriber.records]


def wait_readings(subscriber: Subscriber, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    with subscriber.arrived:
        while len(set(seqs_under_lock(subscriber))) < count:
            left = deadline - time.monotonic()
            assert left > 0, f"{count} readings never arrived: {seqs_under_lock(subscriber)[-10:]}"
            subscriber.arrived.wait(left)


def example_board(tmp_path: Path, name: str, config: Path, i2c: float | None = None, **kwargs: object) -> VirtualBoard:
    """The example `name` on a virtual board, started; `i2c`: an AHT20 wired at 0x38, measuring this temperature."""
    board = VirtualBoard(
        flash=tmp_path / f"{name}.flash",
        app=EXAMPLES / name,
        library=True,  # the library in lib/, as `mpremote mip install` leaves it
        put=((config, "example.json"),),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        **kwargs,  # type: ignore[arg-type]
    )
    if i2c is not None:
        board.drive(i2c={0x38: {"model": "aht20", "temperature_c": i2c, "humidity": 40}})
    board.start()
    return board


def finish(board: VirtualBoard, timeout: float = 90) -> str:
    assert board.process is not None
    out, _ = board.process.communicate(timeout=timeout)
    assert board.wait() == 0, out.decode(errors="replace")
    return out.decode(errors="replace")


def test_mip_installs_the_library_over_http_and_the_blocking_example_survives_a_power_cut(
    tmp_path: Path, broker: Mosquitto
) -> None:
    packages = tmp_path / "mip"
    package_command.build(packages)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(packages))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/dmqtt/package.json"
    dev, count = "mip-1", 60
    config = settings(tmp_path, dev, broker.address, count)
    flash = tmp_path / "b.flash"
    try:
        with console_board(tmp_path) as (_board, link):  # a stock image: nothing deployed, the REPL waits
            installed = mpremote(link, "mip", "install", url)
            assert installed.returncode == 0, installed.stdout + installed.stderr
            assert "Installing: /flash/lib/dmqtt/aio.mpy" in installed.stdout  # the board's lib/ folder
            for source, target in ((EXAMPLES / "blocking_sensor" / "main.py", "main.py"), (config, "example.json")):
                copied = mpremote(link, "resume", "fs", "cp", str(source), f":{target}")
                assert copied.returncode == 0, copied.stderr
            listing = mpremote(link, "resume", "fs", "ls", ":lib/dmqtt")
            assert "client.mpy" in listing.stdout and "codec_host" not in listing.stdout, listing.stdout
    finally:
        server.shutdown()
        server.server_close()
    subscriber = Subscriber(broker.address, "mip-observer", f"sensors/{dev}/#")
    try:
        # The board boots from what mip and mpremote left on its filesystem (nothing staged by the runner).
        board = VirtualBoard(flash=flash, deploy=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            board.start()
            wait_readings(subscriber, count // 3)
            board.power_cut()
            board.start()  # the same flash: the journal and the mark carry the run on
            out = finish(board)
        finally:
            board.close()
        wait_readings(subscriber, count)
        assert f"done {count}" in out, out
        seqs = readings(subscriber)
        assert sorted(seqs) == list(range(count)), f"lost or duplicated across the cut: {sorted(seqs)}"
    finally:
        subscriber.close()


def command_sender(address: str) -> mqtt.Client:
    host, port = address.rsplit(":", 1)
    sender = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="commander", clean_session=False)
    sender.connect(host, int(port))
    sender.loop_start()
    return sender


def test_the_asyncio_example_keeps_its_schedule_through_power_cuts_and_a_broker_restart(
    tmp_path: Path, broker: Mosquitto
) -> None:
    dev, count = "aio-1", 150
    config = settings(tmp_path, dev, broker.address, count, interval_ms=30)
    subscriber = Subscriber(broker.address, "aio-observer", f"sensors/{dev}/#")
    sender = command_sender(broker.address)
    console = ""
    board = example_board(tmp_path, "asyncio_sensor", config, flash_timing=True)
    try:
        for cut in range(2):
            # Each boot: a command once the board listens, then a cut with readings still to come.
            console += read_until(board, lambda out: "listening on" in out)
            sender.publish(f"cmd/{dev}", f"valve-{cut}", qos=2)
            console += read_until(board, lambda out, n=cut: re.search(rf"command valve-{n} \w+\n", out) is not None)
            wait_readings(subscriber, (cut + 1) * count // 4)
            if cut == 0:
                broker.restart()  # persistence on: the sessions, the subscriptions and the flows survive it
                wait_readings(subscriber, count // 3)
            board.power_cut()
            console += "\n"  # what the cut boot printed last may be a line cut short
            board.start()
        console += read_until(board, lambda out: "listening on" in out)
        sender.publish(f"cmd/{dev}", "valve-2", qos=2)
        console += finish(board)
    except AssertionError as exc:
        console += board.output(0)  # the rest of what it printed, its power cut at once
        raise AssertionError(f"{exc}\nthe board's console, last lines:\n{console[-3000:]}") from exc
    finally:
        board.close()
        sender.loop_stop()
        sender.disconnect()
    try:
        wait_readings(subscriber, count)
        seqs = readings(subscriber)
        assert sorted(seqs) == list(range(count)), f"QoS 2 lost or duplicated: {sorted(seqs)}"
    finally:
        subscriber.close()
    assert f"done {count}" in console, console[-2000:]
    # Every command reached the application; one comes again only after a cut (dup), never as new twice.
    commands = [line.split()[1:] for line in console.splitlines() if line.startswith("command ")]
    assert {name for name, _ in commands} == {"valve-0", "valve-1", "valve-2"}, commands
    assert all([name, "new"] in commands or [name, "dup"] in commands for name in ("valve-0", "valve-1", "valve-2"))
    assert sum(1 for c in commands if c[1] == "new") == 3, commands
    late = max(int(line.split()[1]) for line in console.splitlines() if line.startswith("late "))
    # The sensor task's worst lateness over every boot, reported; BENCHMARKS.md holds it against its goal (20 ms
    # beyond the longest flash operation). Here only what no blocking client could keep: a broker restart and
    # reconnects with backoff of 500 ms and more never held the loop.
    print(f"\nasyncio example: worst sensor lateness {late} ms over {count} QoS 2 messages, 2 cuts, 1 broker restart")
    assert late < 400, console[-2000:]


def test_the_asyncio_example_keeps_its_wifi_through_an_outage_and_says_it(tmp_path: Path, broker: Mosquitto) -> None:
    """With "wifi" in its settings the asyncio client supervises the link (dmqtt.wifi): the access point goes
    away mid-run, the connection's `down` event says so once the station notices, `up` once it has rejoined and
    reconnected, and every reading arrives once."""
    dev, count = "aio-wifi-1", 80
    config = settings(tmp_path, dev, broker.address, count, interval_ms=30, wifi={"ssid": "lab", "password": "pw"})
    subscriber = Subscriber(broker.address, "aio-wifi-observer", f"sensors/{dev}/#")
    with AccessPoint(tmp_path / "ap", model=JoinModel(scale=0.05, beacon_ms=500)) as ap:
        board = example_board(tmp_path, "asyncio_sensor", config, ap=ap)
        try:
            wait_readings(subscriber, 20)
            ap.down()
            console = read_until(board, lambda out: "down:" in out)
            ap.up()
            console += finish(board)
        finally:
            board.close()
    try:
        wait_readings(subscriber, count)
        assert sorted(readings(subscriber)) == list(range(count))
    finally:
        subscriber.close()
    # ECONNABORTED, as lwIP aborts a lost station's connections: newlib's 113 (which the Unix port's own table
    # prints as EHOSTUNREACH, its name for Linux's 113: docs/virtual-board.md's errno row).
    assert "down: connection lost" in console and "[Errno 113]" in console, console[-2000:]
    assert console.index("down:") < console.rindex("\nup\n") and f"done {count}" in console, console[-2000:]
    assert ap.stats.stations_lost == 1


def test_the_serial_example_publishes_through_the_host_bridge(tmp_path: Path, broker: Mosquitto) -> None:
    dev, count = "serial-ex-1", 40
    config = settings(tmp_path, dev, broker.address, count, uart=1, baud=115200)
    subscriber = Subscriber(broker.address, "serial-observer", f"sensors/{dev}/#")
    # The heap of a board without WiFi started (its heap grows into what WiFi would take).
    heap = BoardDefinition.load("sim").heap_without_wifi
    board = example_board(tmp_path, "serial_board", config, faults=LineFaults(115200), heap=heap)
    bridge = None
    try:
        assert board.serial_port is not None
        bridge = ManagedProcess(
            bridge_command(broker.address, 115200, {dev: board.serial_port}, 1), tmp_path / "bridge.log", cwd=REPO
        )
        bridge.wait_for("event=start")
        out = finish(board)
        wait_readings(subscriber, count)
        assert f"done {count}" in out, out
        assert set(readings(subscriber)) == set(range(count))  # QoS 1: at least once, nothing missing
    finally:
        if bridge is not None:
            bridge.stop()
        board.close()
        subscriber.close()


def test_the_battery_example_sends_a_batch_every_tenth_wake_through_an_outage_and_a_power_cut(
    tmp_path: Path, broker: Mosquitto
) -> None:
    """The battery sensor reads the AHT20 wired on its I2C bus at every wake, deep-sleeps between readings and
    sends every 10th wake: the access point is away at the third sending wake, which the network's refusal ends at
    once (not at its awake time), keeping its readings, and the sending wake after it comes 20 wakes later; a power
    cut lands in a sleep (RTC memory lost: the power-on sends at once). Every reading reaches the broker once, with
    the temperature the sensor measured: nothing acknowledged is sent again."""
    dev, count = "battery-1", 35
    config = settings(
        tmp_path, dev, broker.address, count, every_s=60, readings_per_send=10, awake_s=30, wifi={"ssid": "lab"}
    )
    subscriber = Subscriber(broker.address, "battery-observer", f"sensors/{dev}/#")
    wakes: list[str] = []
    awake_ms: list[int] = []
    with AccessPoint(tmp_path / "ap", model=JoinModel(scale=0.05)) as ap:
        board = example_board(tmp_path, "battery_sensor", config, ap=ap, i2c=21.5)
        try:
            while True:
                assert board.process is not None
                out = board.process.communicate(timeout=60)[0].decode(errors="replace")
                wakes.append(out)
                status = board.wait()
                awake_ms.append(int(board.last_wake().get("awake_ms", 0)) if status != 0 else 0)
                if len(wakes) == 20:
                    ap.down()  # for the third sending wake, the 21st
                elif len(wakes) == 21:
                    ap.up()
                    board.drive(i2c={0x38: {"model": "aht20", "temperature_c": 24.0, "humidity": 40}})
                if not board.next_boot(status):
                    assert status == 0, out
                    break
                if len(wakes) == 25:
                    board.power_cut()  # in the sleep after the 25th wake: the next boot is a power-on
                assert len(wakes) < 60, "the run never completed"
                board.start()
        finally:
            board.close()
    try:
        wait_readings(subscriber, count)
        assert sorted(readings(subscriber)) == list(range(count))  # once each: nothing acknowledged went again
        with subscriber.lock:
            measured = {json.loads(r.payload)["seq"]: json.loads(r.payload)["reading"] for r in subscriber.records}
    finally:
        subscriber.close()
    assert abs(measured[0] - 21.5) < 0.01 and abs(measured[count - 1] - 24.0) < 0.01, measured  # the AHT20's
    sends = {i + 1: out for i, out in enumerate(wakes) if "sent:" in out}
    assert len(wakes) == count and "done 35" in wakes[-1], wakes[-3:]
    # The power-on, wakes 11 and 21 (no access point: all 10 left, and the next sending wake 20 wakes on), 26
    # (the power-on after the cut: RTC memory lost), 35 (the run's last reading).
    assert sorted(sends) == [1, 11, 21, 26, 35], "\n".join(f"{n}: {out}" for n, out in enumerate(wakes, 1))
    assert "wifi: not joined (status 201)" in sends[21] and "sent: 10 readings left" in sends[21], sends[21]
    assert awake_ms[20] < 15_000, awake_ms[20]  # the refusal ended the join, not the 30 s awake time
    assert all("sent: 0 readings left" in sends[n] for n in (26, 35)), sends


def arrivals(subscriber: Subscriber) -> dict[int, float]:
    """When the broker first delivered each reading (time.time())."""
    with subscriber.lock:
        first: dict[int, float] = {}
        for r in subscriber.records:
            first.setdefault(json.loads(r.payload)["seq"], r.arrived)
    return first


def test_the_blocking_example_keeps_its_pace_through_a_broker_outage(tmp_path: Path, broker: Mosquitto) -> None:
    """examples/blocking_sensor promises a reading every interval_ms: the supervisor (dmqtt.robust) serves the
    connection until each reading's time, whatever arrives meanwhile, and reconnects when the broker is back."""
    dev, count, interval = "pace-1", 12, 250
    config = settings(tmp_path, dev, broker.address, count, interval_ms=interval)
    subscriber = Subscriber(broker.address, "pace-observer", f"sensors/{dev}/#")
    board = example_board(tmp_path, "blocking_sensor", config)
    try:
        wait_readings(subscriber, 3)
        broker.stop()  # persistence on: the session and the flows survive it
        out = read_until(board, lambda text: "broker unreachable" in text)
        broker.start()
        out += finish(board)
        wait_readings(subscriber, count)
        seqs = readings(subscriber)
        assert sorted(seqs) == list(range(count)), f"QoS 2 lost or duplicated: {sorted(seqs)}"
        first = arrivals(subscriber)
    finally:
        board.close()
        subscriber.close()
    took = int(re.search(rf"done {count} in (\d+) ms; 0 unacknowledged", out).group(1))  # type: ignore[union-attr]
    # The schedule is the lower bound: the old loop returned from each wait at the first acknowledgement and ran
    # 10 readings of 1,000 ms in 216 ms. The upper bound only catches a loop stuck on the outage.
    assert (count - 1) * interval <= took < (count - 1) * interval + 20_000, out
    # Readings 0 to 2 came before the outage: two intervals apart at the broker (half of that allows for a late
    # delivery on a loaded machine; the old loop put them 20 ms apart).
    assert first[2] - first[0] >= interval / 1000, [first[n] - first[0] for n in range(3)]


def test_each_example_is_a_short_program() -> None:
    """The shortest program that does its job: a page of code a file (the battery sensor's main.py one line, its
    program and its sensor's driver a file each), importing only the library, MicroPython and its own files."""
    for example in sorted(p for p in EXAMPLES.iterdir() if p.is_dir()):
        own = {path.stem for path in example.glob("*.py")}
        for source in sorted(example.glob("*.py")):
            code = [ln for ln in source.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
            assert len(code) <= 90, f"{source} has {len(code)} lines of code"
            imports = {ln.split()[1].split(".")[0] for ln in code if ln.startswith(("import ", "from "))}
            micropython = {"asyncio", "esp", "framebuf", "gc", "json", "machine", "time"}
            assert imports <= micropython | {"dmqtt", "dlink"} | own, (source, imports)


def test_the_examples_readme_names_each_example() -> None:
    readme = (EXAMPLES / "README.md").read_text()
    for main in EXAMPLES.glob("*/main.py"):
        assert f"examples/{main.parent.name}" in readme


def test_an_app_folder_brings_its_data_files_and_a_missing_one_is_named(tmp_path: Path, broker: Mosquitto) -> None:
    """`--app` lays the folder out as `mpremote fs cp -r` would: the example's example.json beside its modules comes
    with them, and the board runs on it; without it, the board stops at an error that names the file."""
    folder = tmp_path / "battery"
    folder.mkdir()
    for name in ("main.py", "battery.py", "aht20.py"):
        (folder / name).write_bytes((EXAMPLES / "battery_sensor" / name).read_bytes())
    board = VirtualBoard(flash=tmp_path / "no-settings.flash", app=folder, library=True, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)  # fmt: skip
    board.start()
    assert board.process is not None
    out = board.process.communicate(timeout=60)[0].decode(errors="replace")
    assert board.wait() == 1 and "OSError: example.json: [Errno 2] ENOENT" in out and "examples/README.md" in out, out
    settings(folder, "battery-data", broker.address, 1)  # (written into the app folder itself)
    board = VirtualBoard(flash=tmp_path / "data.flash", app=folder, library=True, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)  # fmt: skip
    board.drive(i2c={0x38: {"model": "aht20", "temperature_c": 19.0, "humidity": 40}})
    subscriber = Subscriber(broker.address, "battery-data-observer", "sensors/battery-data/#")
    try:
        board.start()
        out = finish(board, 60)
        assert "done 1" in out, out
        wait_readings(subscriber, 1)
    finally:
        subscriber.close()
