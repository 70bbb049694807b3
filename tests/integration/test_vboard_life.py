"""A board's life on the virtual board: deep and light sleep (the clock, RTC memory, wakes, power cuts in the
sleep), and WiFi (a station that joins in the modelled time, an access point that goes away and comes back, its
sockets failing as lwIP's do). Each test runs a small application of tests/vboard_apps on a virtual board."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from host_bridge.boards.definition import BoardDefinition
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.virtual_dut import VirtualDut
from host_bridge.vboard.events import EventSpec
from host_bridge.vboard.runner import DEEPSLEEP_RESET, PWRON_RESET, TIMER_WAKE, VirtualBoard
from host_bridge.vboard.runner import _time_namespace as runner_clock_namespace
from host_bridge.vboard.wifi import AccessPoint, JoinModel, Outage
from tests.conftest import REPO

APPS = REPO / "tests" / "vboard_apps"
SIM = BoardDefinition.load("sim")


def sleeper(tmp_path: Path, env: dict[str, str] | None = None, **config: object) -> VirtualDut:
    dut = VirtualDut(
        "sleeper",
        SIM,
        flash=tmp_path / "board.flash",
        console_log=tmp_path / "console.log",
        app=APPS / "sleeper",
        extra_env=env or {},
    )
    dut.configure(config, check=False)
    return dut


def boots(text: str) -> list[dict[str, object]]:
    return [
        {"wakes": int(m[1]), "cause": int(m[2]), "reason": int(m[3]), "clock": int(m[4]), "memory": m[5],
         "ticks": int(m[6])}
        for m in re.finditer(
            r"boot wakes=(\d+) cause=(\d+) reason=(\d+) clock=(\d+) memory=(\S+) ticks=(\d+)", text
        )
    ]  # fmt: skip


def test_deep_sleep_ends_the_boot_and_wakes_the_board_on_its_clock_in_no_host_time(tmp_path: Path) -> None:
    """Each deep sleep ends its boot (nothing after the call runs); the board wakes at once with DEEPSLEEP_RESET
    and TIMER_WAKE, its clock a minute on, RTC memory kept; twenty minutes of board time take seconds of host
    time; the vboard counts the wakes and the time slept."""
    dut = sleeper(tmp_path, wakes=20, sleep_ms=60000)
    began = time.monotonic()
    dut.start()
    end = dut.wait_boot(120)
    host_s = time.monotonic() - began
    try:
        assert end.status == 0, end.console[-2000:]  # (kind "failed": a test app prints no summary line)
        seen = boots(end.console)
        assert [b["wakes"] for b in seen] == list(range(21))
        assert (seen[0]["cause"], seen[0]["reason"]) == (PWRON_RESET, 0)
        assert all((b["cause"], b["reason"]) == (DEEPSLEEP_RESET, TIMER_WAKE) for b in seen[1:])
        steps = [int(b["clock"]) - int(a["clock"]) for a, b in zip(seen, seen[1:], strict=False)]  # type: ignore[call-overload]
        assert all(60 <= step <= 62 for step in steps), steps
        assert "never: deepsleep returned" not in end.console
        assert host_s < 20 * 60 / 10, f"twenty minutes of sleep took {host_s:.0f} s of host time"
        assert dut.vboard.sleep_stats() == {
            "deep_sleeps": 20,
            "wakes": 20,
            "deep_slept_ms": 20 * 60000,
            "light_sleeps": 0,
            "light_slept_ms": 0,
        }
    finally:
        dut.close()


def test_the_ticks_start_again_at_each_boot_and_wake_as_a_chips_do(tmp_path: Path) -> None:
    """A chip's ticks_ms() counts from its boot: main.py reads a second or so, at a power-on and at every wake
    from deep sleep, however long the board has lived. The host's own count is its uptime, which a test suite's
    set-up alone takes past the bound."""
    if not runner_clock_namespace():
        pytest.skip("this host gives no time namespace (unshare --time): the ticks count its uptime")
    bound_ms = 30_000  # a boot's start, however loaded the host
    host_ms = time.clock_gettime(time.CLOCK_MONOTONIC) * 1000
    assert host_ms > bound_ms, "the host has been up too short a time to tell its count from a boot's"
    dut = sleeper(tmp_path, wakes=3, sleep_ms=1000)
    try:
        dut.start()
        end = dut.wait_boot(60)
        assert end.status == 0, end.console[-2000:]
        seen = boots(end.console)
        assert [(b["wakes"], b["cause"]) for b in seen] == [(0, PWRON_RESET)] + [
            (n, DEEPSLEEP_RESET) for n in (1, 2, 3)
        ]
        assert all(int(str(b["ticks"])) < bound_ms for b in seen), (seen, host_ms)
    finally:
        dut.close()


def test_rtc_memory_survives_a_reset_and_deep_sleep_but_not_a_power_cut_in_the_sleep(tmp_path: Path) -> None:
    """machine.reset() keeps RTC memory (HARD_RESET), so does deep sleep; a power cut that lands inside the
    sleep loses it, and the next boot is a power-on: the count starts again."""
    dut = sleeper(tmp_path, wakes=3, sleep_ms=1000, reset_once=True)
    try:
        dut.start(cut_in_sleep=2)  # the second deep sleep of this start
        end = dut.wait_boot(60)
        assert end.kind == "power-cut", end.console[-2000:]
        seen = boots(end.console)
        assert [(b["wakes"], b["memory"]) for b in seen] == [(0, "b''"), (0, "b'0'"), (1, "b'1'")]
        assert [b["cause"] for b in seen] == [PWRON_RESET, 2, DEEPSLEEP_RESET]  # 2: HARD_RESET
        dut.start()
        end = dut.wait_boot(60)
        assert end.status == 0, end.console[-2000:]
        again = boots(end.console)
        assert (again[0]["cause"], again[0]["reason"], again[0]["memory"]) == (PWRON_RESET, 0, "b''")
        assert dut.vboard.sleep_stats()["wakes"] == 1 + 3  # the sleep cut short woke nothing
    finally:
        dut.close()


def test_light_sleep_keeps_ram_and_moves_the_clock_and_the_ticks(tmp_path: Path) -> None:
    dut = sleeper(tmp_path, wakes=0, sleep_ms=1, light=45000)
    began = time.monotonic()
    try:
        dut.start()
        end = dut.wait_boot(60)
        assert end.status == 0, end.console[-2000:]
        found = re.search(r"light kept=\[1, 2, 3\] clock\+(\d+) ticks\+(\d+)", end.console)
        assert found, end.console
        assert 45 <= int(found[1]) <= 46 and 45000 <= int(found[2]) < 46000
        assert time.monotonic() - began < 30
        assert dut.vboard.sleep_stats()["light_slept_ms"] == 45000
    finally:
        dut.close()


@pytest.mark.parametrize("traced", [False, True])
def test_a_deep_sleep_names_the_modules_its_wake_loaded_and_with_a_trace_those_it_dropped(
    tmp_path: Path, traced: bool
) -> None:
    """A deep sleep reports the modules loaded (sys.modules); with VBOARD_IMPORTS (the energy figure's boards) also
    those imported and dropped since boot.py began, whose code the wake loaded all the same."""
    dut = sleeper(tmp_path, {"VBOARD_IMPORTS": "1"} if traced else None, wakes=1, sleep_ms=1000, drop=True)
    try:
        dut.start()
        end = dut.wait_boot(60)
        assert end.status == 0, end.console[-2000:]
        loaded, imported = dut.vboard.sleeps[0]["loaded"], dut.vboard.sleeps[0]["imported"]
        assert "json" in loaded or "machine" in loaded, loaded
        assert ("dropped" in loaded) == traced, loaded
        # What the wake's own code imported: its modules, none of the emulation's (its shims, its hooks).
        assert imported == (["dropped", "json", "machine", "sys", "time"] if traced else []), imported
    finally:
        dut.close()


def test_tracing_imports_takes_none_of_the_firmwares_heap(tmp_path: Path) -> None:
    """VBOARD_IMPORTS (the energy figure's boards) records every import without allocating in the firmware's heap:
    a board that imports and drops a module has the same heap free with the record as without it."""
    free = []
    for traced in (False, True):
        folder = tmp_path / f"traced-{int(traced)}"  # (paths of one length: the emulation's own strings alike)
        folder.mkdir()
        dut = sleeper(folder, {"VBOARD_IMPORTS": "1"} if traced else None, wakes=0, sleep_ms=1, drop=True, heap=True)
        try:
            dut.start()
            end = dut.wait_boot(60)
            assert end.status == 0, end.console[-2000:]
            found = re.search(r"heap free=(\d+)", end.console)
            assert found, end.console
            free.append(int(found[1]))
        finally:
            dut.close()
    # A few GC blocks (32 bytes each here) either way: the emulation's own objects, sized by the test's path and by
    # the shims' code, move the pinned heap's edge by that much with or without the record (measured: 0 to 160
    # bytes as the shims changed). A record made in the firmware's heap takes more: its slots alone are 4 KB, a set
    # of the names and its hook a few hundred.
    assert abs(free[0] - free[1]) <= 512, free


def test_a_cut_at_the_wake_and_in_the_first_program_leaves_a_board_that_boots_again(tmp_path: Path) -> None:
    """Power cuts where a chip's can land besides the sleep: at the wake, before the application runs (the
    board's own wake event, so that a loaded host cannot let the run finish first),
    and in the first flash operation (the filesystem's format or the application's first write, emulated half
    done). Each next boot is a power-on on the same flash; the run still completes."""
    dut = sleeper(tmp_path, wakes=2, sleep_ms=1000)
    try:
        dut.start(cut_at_op=1)
        cut = dut.wait_boot(60)
        assert cut.kind == "power-cut" and "vboard: power cut during" in cut.console, cut.console[-2000:]
        dut.start(cut_on=EventSpec("wake", 1))
        cut = dut.wait_boot(60)
        assert cut.kind == "power-cut" and "vboard: power cut during wake event 1" in cut.console, cut.console[-2000:]
        dut.start()
        end = dut.wait_boot(60)
        assert end.status == 0, end.console[-2000:]
        assert boots(end.console)[0]["cause"] == PWRON_RESET
    finally:
        dut.close()


# -- WiFi ------------------------------------------------------------------------------------------------------


@pytest.fixture
def echo() -> Iterator[str]:
    """A TCP echo server on loopback: HOST:PORT."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=relay, args=(conn,), daemon=True).start()

    def relay(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        server.close()


def station(tmp_path: Path, ap: AccessPoint, **config: object) -> VirtualBoard:
    path = tmp_path / "station.json"
    path.write_text(json.dumps(config))
    board = VirtualBoard(
        tmp_path / "station.flash",
        config=path,
        app=APPS / "station",
        ap=ap,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    board.start()
    return board


def output(board: VirtualBoard, timeout: float = 60) -> str:
    text = board.output(timeout)
    assert board.wait() == 0, text
    return text


def statuses(text: str) -> tuple[list[int], bool, int]:
    found = re.search(r"statuses \[([\d, ]*)\] connected (True|False) after (\d+)", text)
    assert found, text
    return [int(x) for x in found[1].split(",") if x.strip()], found[2] == "True", int(found[3])


def test_a_join_takes_the_modelled_time_with_dhcp_and_a_fraction_of_it_with_a_static_address(
    tmp_path: Path,
) -> None:
    model = JoinModel(scale=0.2)  # a DHCP join: 350 ms of host time, one with a static address 132 ms
    with AccessPoint(tmp_path / "ap", model=model) as ap:
        board = station(tmp_path, ap, ssid="lab", password="pw")
        text = output(board)
        seen, connected, ms = statuses(text)
        assert connected and seen == [1001], text  # STAT_CONNECTING until joined
        assert 350 <= ms < 350 + 300, ms
        assert "idle 1000 False 24d7eb000001" in text  # STAT_IDLE, the MAC from the board's unique id
        board.close()
        board = station(
            tmp_path,
            ap,
            ssid="lab",
            password="pw",
            ip=["192.168.4.50", "255.255.255.0", "192.168.4.1", "192.168.4.1"],
            bssid="02:00:00:00:aa:01",
        )
        _seen, connected, fast = statuses(output(board))
        assert connected and 132 <= fast < 132 + 200 and fast < ms, (fast, ms)
        board.close()


def test_the_newer_network_api_is_there_and_a_static_address_joins_fast(tmp_path: Path) -> None:
    """network.WLAN is a class with IF_STA and the PM_* modes; ipconfig() sets and says the address as ifconfig()
    does (a static address: the fast join); network.ipconfig("dns") is the resolver."""
    model = JoinModel(scale=0.2)
    with AccessPoint(tmp_path / "ap", model=model) as ap:
        board = station(tmp_path, ap, ssid="lab", apis=True)
        text = output(board)
        assert "class True True" in text and "pm 0 1 2 0" in text, text
        assert "ipconfig ('192.168.4.60', '255.255.255.0') 192.168.4.1 False 192.168.4.53" in text, text
        _seen, connected, ms = statuses(text)
        assert connected and 132 <= ms < 332, ms
        board.close()


@pytest.mark.parametrize("reconnects", [0, -1])
def test_reconnects_zero_gives_up_after_one_attempt_and_the_default_never_does(tmp_path: Path, reconnects: int) -> None:
    """config(reconnects=0): one attempt, no more (the ESP32 port's meaning); the default (-1) tries for ever. The
    access point goes down as the station starts its join (the board's event), for a second."""
    model = JoinModel(scale=0.05)  # a scan that finds nothing: 102 ms
    with AccessPoint(tmp_path / "ap", model=model, outages=[Outage.parse("join:1")]) as ap:
        board = station(tmp_path, ap, ssid="lab", reconnects=reconnects, give_up_ms=4000)
        seen, connected, _ms = statuses(output(board))
        assert connected == (reconnects < 0), seen
        if reconnects == 0:
            assert seen[-1] == 201, seen  # STAT_NO_AP_FOUND: the reason it gave up
        board.close()


def test_a_wrong_network_or_password_fails_as_on_a_chip(tmp_path: Path) -> None:
    """--ap SSID:PASSWORD: another name is never found (STAT_NO_AP_FOUND after each scan), a wrong password
    fails its handshake (STAT_WRONG_PASSWORD); the station keeps trying, as the ESP32 port's does."""
    model = JoinModel(scale=0.05)
    with AccessPoint(tmp_path / "ap", ssid="lab", password="secret", model=model) as ap:
        for ssid, password, expected in (("lobby", "secret", 201), ("lab", "guess", 202)):
            board = station(tmp_path, ap, ssid=ssid, password=password, give_up_ms=600)
            seen, connected, _ = statuses(output(board))
            assert not connected and seen[0] == 1001 and expected in seen, (ssid, seen)
            board.close()
        board = station(tmp_path, ap, ssid="lab", password="secret")
        assert statuses(output(board))[1]
        board.close()


def test_an_outage_aborts_the_stations_sockets_and_new_ones_fail_until_it_is_back(tmp_path: Path, echo: str) -> None:
    """The access point goes down: after the beacon timeout the station has lost it (isconnected() False), its
    open socket fails with ECONNABORTED, a new connect with EHOSTUNREACH, a name does not resolve (-202); once
    the access point is back the station rejoins by itself in its join time and talks again."""
    model = JoinModel(scale=0.1, beacon_ms=500)
    with AccessPoint(tmp_path / "ap", model=model) as ap:
        board = station(tmp_path, ap, ssid="lab", echo=echo)
        assert board.process is not None and board.process.stdout is not None
        said = b""
        while b"talking" not in said:
            chunk = board.process.stdout.readline()
            assert chunk, said.decode()
            said += chunk
        ap.down()
        time.sleep(1.5)
        ap.up()
        text = said.decode() + output(board)
        assert "socket failed ECONNABORTED connected False" in text, text
        assert "connect failed EHOSTUNREACH" in text and "resolve failed -202" in text, text
        rejoined = re.search(r"rejoined after (\d+) status 1010", text)
        assert rejoined, text
        assert text.count("echo b'") == 2 and "echo b'again'" in text
        assert (ap.stats.outages, ap.stats.stations_lost) == (1, 1)
        board.close()


def test_a_non_blocking_connect_says_einprogress_and_then_talks_as_lwip_does(tmp_path: Path, echo: str) -> None:
    """A non-blocking connect of a station socket raises EINPROGRESS, and the socket is then writable: the first
    bytes the application writes reach the destination, not the access point's relay as its header. MicroPython's
    asyncio.open_connection (and mqtt_as) connect so."""
    with AccessPoint(tmp_path / "ap", model=JoinModel(scale=0.02)) as ap:
        board = station(tmp_path, ap, ssid="lab", echo=echo, nonblocking=True)
        text = output(board)
        board.close()
    assert "async echo b'async'" in text, text
    assert "nonblocking connect EINPROGRESS" in text and "writable True" in text, text
    assert "echo b'plain'" in text, text


def test_an_outage_shorter_than_the_beacon_timeout_only_stalls_the_link(tmp_path: Path, echo: str) -> None:
    """Frames sent while the access point is away wait, as in the air for a station that has noticed nothing:
    the socket lives on, and what was sent arrives once it is back."""
    with AccessPoint(tmp_path / "ap", model=JoinModel(scale=0.1, beacon_ms=5000)) as ap:
        board = station(tmp_path, ap, ssid="lab", echo=echo)
        assert board.process is not None and board.process.stdout is not None
        said = b""
        while b"talking" not in said:
            said += board.process.stdout.readline()
        ap.down()
        time.sleep(0.8)
        ap.up()
        time.sleep(0.5)
        board.power_cut()  # it would talk for ever: the socket never failed
        rest = board.output(5)
        assert "socket failed" not in rest and (ap.stats.outages, ap.stats.stations_lost) == (1, 0), rest
        board.close()


# -- the board application, from the command line ------------------------------------------------------------


def vboard_cli(tmp_path: Path, config: dict[str, object], *options: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "board.json"
    path.write_text(json.dumps(config))
    return subprocess.run(
        [sys.executable, "-m", "host_bridge", "vboard", "--flash", str(tmp_path / "b.flash"), "--config", str(path)]
        + ["--no-serial", "--stats", *options],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def printed(stdout: str, name: str) -> dict[str, object]:
    line = next(ln for ln in stdout.splitlines() if ln.startswith(f"{name}: "))
    return json.loads(line.split(": ", 1)[1])  # type: ignore[no-any-return]


def test_the_board_application_rides_out_a_scheduled_outage_from_the_command_line(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """`host-bridge vboard --ap lab:pw --ap-outage joined:3`: the board joins, the access point goes away the moment
    it has (an outage scheduled on the board's event, so that a slow host cannot let it pass before the join) for
    three seconds, the board says the outage once and its length, keeps journaling, and completes; the summary
    counts the joins and the time offline, --stats the access point's outage."""
    config = {
        "client_id": "cli-wifi",
        "broker": mosquitto.address,
        "mqtt_version": "5",
        "wifi": {"ssid": "lab", "password": "pw"},
        "publish": {"qos": 1, "count": 120, "interval_ms": 25},
    }
    options = ["--ap", "lab:pw", "--ap-outage", "joined:3", "--beacon-timeout", "0.5", "--join-scale", "0.05"]
    result = vboard_cli(tmp_path, config, *options)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    out = result.stdout
    assert re.search(r"wifi: joined 192\.168\.4\.\d+ in \d+ ms", out), out[-3000:]
    assert out.count("wifi: down (status") == 1 and re.search(r"wifi: up again after (\d+) ms", out), out[-3000:]
    summary = next(json.loads(ln) for ln in out.splitlines() if ln.startswith('{"'))
    assert summary["total"] == 120 and summary["wifi"]["joins"] == 2 and summary["wifi"]["outages"] == 1
    # Offline from when the station noticed the loss (the 0.5 s beacon timeout, later on a busy host) to the rejoin
    # after the 3 s outage: counted, and a good part of the outage. No tighter bound in host time either way: a
    # loaded host both notices and rejoins late (a run measured 2,363 ms).
    assert summary["wifi"]["offline_ms"] >= 1000, summary
    stats = printed(out, "ap-stats")
    assert (stats["stations_lost"], stats["outages"], stats["event_outages"]) == (1, 1, 1), stats


@pytest.mark.parametrize(
    ("event", "sleeps"),
    [("accepted#25", False), ("journal#7", False), ("wake#3", True), ("join#2", True), ("connect#2", True)],
)
def test_the_board_cuts_its_own_power_at_its_event_from_the_command_line(
    tmp_path: Path, mosquitto: Mosquitto, event: str, sleeps: bool
) -> None:
    """`host-bridge vboard --cut-on EVENT#N`: the board cuts its own power at its Nth event, not the host some time
    after it: right after its 25th `accepted` line (none after it), after its 7th journal program (the journal's
    counters say 7), as its 3rd wake begins (3 wakes, 3 readings), inside its 2nd join or its 2nd connect (the 2nd
    wake's reading journaled, not sent: the cut came before the broker)."""
    config: dict[str, object] = {"client_id": f"cli-cut-{event[:4]}", "broker": mosquitto.address, "mqtt_version": "5"}
    if sleeps:
        config |= {"wifi": {"ssid": "lab"}, "publish": {"qos": 1, "count": 30}, "sleep": {"every_s": 60, "awake_s": 10}}
    else:
        config |= {"publish": {"qos": 1, "count": 200, "interval_ms": 0}}
    result = vboard_cli(tmp_path, config, "--cut-on", event, "--join-scale", "0.02")
    name, n = event.split("#")
    assert result.returncode == 137, result.stdout[-3000:] + result.stderr
    assert f"vboard: power cut during {name} event {n} " in result.stdout, result.stdout[-2000:]
    accepted = [ln for ln in result.stdout.splitlines() if ln.startswith("accepted ")]
    wakes = printed(result.stdout, "sleep-stats")["wakes"]
    if name == "accepted":
        out = result.stdout.splitlines()
        after = out[out.index(accepted[-1]) + 1]  # the board said nothing between its 25th line and the cut
        assert len(accepted) == 25 and after.startswith("vboard: power cut during accepted event 25"), after
    elif name == "journal":
        assert printed(result.stdout, "flash-stats")["mqttlog"]["program_ops"] == 7  # type: ignore[index]
    elif name == "wake":
        assert (wakes, len(accepted)) == (3, 3), (wakes, accepted)
    else:  # inside the 2nd wake's join or connect: its reading journaled, nothing of that wake after it
        assert (wakes, len(accepted)) == (1, 2), (wakes, accepted)
        assert result.stdout.count("connected session_present") == 1, result.stdout[-2000:]


NO_BROKER = "127.0.0.1:1"  # (nothing listens on port 1: every connect is refused)


@pytest.mark.parametrize(
    ("wifi", "scale", "broker", "said"),
    [
        ({"ssid": "shed", "password": "pw"}, "0.02", None, "wifi: not joined (status 201): no network of that name"),
        ({"ssid": "lab", "password": "nope"}, "0.02", None, "wifi: not joined (status 202): the password was refused"),
        ({"ssid": "lab", "password": "pw"}, "1", None,
         "wifi: not joined (status 1001): no join within sleep.awake_s (1 s)"),
        ({"ssid": "lab", "password": "pw"}, "0.02", NO_BROKER,
         "settle: 1 unacknowledged when sleep.awake_s (1 s) ran out: sent again at the next sending wake"),
    ],
)  # fmt: skip
def test_a_sending_wake_that_cannot_send_says_why_before_it_sleeps(
    tmp_path: Path, mosquitto: Mosquitto, wifi: dict[str, str], scale: str, broker: str | None, said: str
) -> None:
    """A battery board's sending wake that never joins says why on its console before it sleeps: the network not
    found (a wrong SSID or BSSID), the password refused, or a join (1.75 s at the chip's pace) longer than awake_s.
    One that joins but sleeps with messages unacknowledged (here no broker listens) says they go again at the next
    sending wake. The board is cut as its next wake begins."""
    config = {
        "client_id": "cli-nojoin",
        "broker": broker or mosquitto.address,
        "wifi": wifi,
        "publish": {"qos": 1, "count": 10},
        "sleep": {"every_s": 60, "awake_s": 1},
    }
    result = vboard_cli(tmp_path, config, "--ap", "lab:pw", "--join-scale", scale, "--cut-on", "wake#1")
    assert result.returncode == 137, result.stdout[-3000:] + result.stderr
    out = result.stdout
    assert said in out and out.index(said) < out.index("sleep: "), out[-2000:]


def test_a_board_that_sleeps_between_readings_runs_a_day_of_wakes_from_the_command_line(
    tmp_path: Path, mosquitto: Mosquitto
) -> None:
    """config.json's sleep: one reading a wake, each acknowledged before the board deep-sleeps a minute; the
    command boots it until the wake that completes the run, and counts the wakes."""
    config = {
        "client_id": "cli-sleep",
        "broker": mosquitto.address,
        "mqtt_version": "5",
        "wifi": {"ssid": "lab"},
        "publish": {"qos": 2, "count": 30},
        "sleep": {"every_s": 60, "awake_s": 10},
    }
    result = vboard_cli(tmp_path, config, "--join-scale", "0.02")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert result.stdout.count("sleep: ") == 29 and "accepted 30 0" in result.stdout, result.stdout[-2000:]
    assert "the board woke 29 time(s) from deep sleep" in result.stderr, result.stderr
    stats = printed(result.stdout, "sleep-stats")
    assert stats["wakes"] == 29 and 29 * 59000 <= int(stats["deep_slept_ms"]) <= 29 * 60000  # type: ignore[call-overload]


def test_a_malformed_access_point_option_is_refused(tmp_path: Path, mosquitto: Mosquitto) -> None:
    config = {"client_id": "cli-bad", "broker": mosquitto.address}
    for options in (["--ap", "lab"], ["--ap-outage", "soon"], ["--join-scale", "0"]):
        result = vboard_cli(tmp_path, config, *options)
        assert result.returncode == 2 and result.stdout == "", (options, result.stdout, result.stderr)
        assert "--ap" in result.stderr or "scale" in result.stderr, result.stderr
