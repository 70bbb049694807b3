"""The HIL bench's pytest plugin, registered once through the package's `pytest11` entry point: the same
scenario tests run on virtual boards (the default, `--hil-dut sim`) and on real boards (`--hil-dut /dev/ttyUSB0
--hil-board esp32-devkitc`). Every option is also an ini option (`hil_dut = /dev/ttyUSB0` in pytest.ini).
Options are resolved once into a HilConfig; each concern is one fixture, and every fixture, option and marker
of the plugin is named hil_ (--hil- on the command line), so installing the package adds no generic name to
another project's pytest runs:

  hil_broker      Mosquitto on a free loopback port (persistence on; `@pytest.mark.hil_broker(persistence=False)`),
                  restart()/stop()/start(); or the external broker of --hil-broker HOST:PORT (no restarts)
  hil_bridge      the serial bridge (`host-bridge run`) for boards on the link: start(duts), kill(), restart(),
                  stop()
  hil_duts / hil_dut  the boards under test, one per --hil-dut: configure(), start(), expect(), power_cut(),
                  reset(), unplug()/replug() where the board allows, stats() where it has flash counters (not
                  named `dut`, which is pytest-embedded's: both plugins can share one environment)
  hil_ap          the access point the boards on TCP join: down(), up(), outage(s); for virtual boards one shared
                  by the test's boards, for real boards --hil-ap-cmd's command (skips the test without one)
  hil_fleet       fleet(n): n boards for a scenario that runs several at once (virtual boards on the test's access
                  point; on real boards, those given)
  hil_subscriber  a QoS 2 persistent-session observer recording every delivery
  hil_verdict     judge(runs) -> Verdict: sent, received, lost, duplicated, boots, power cuts per board, with the
                  promises the Spark audit uses; printed and saved in the test's log folder

Each test gets a log folder (--hil-log-dir, default build/hil/logs): consoles, bridge, broker, subscriber record,
verdict table. A board process that outlives the test that started it fails that test; any process the bench
started that is still running at the end fails the session. Both are then stopped, by pid.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from host_bridge.boards.definition import BoardDefinition
from host_bridge.bridge.run_command import command as bridge_command
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.broker.pki import CertificateAuthority
from host_bridge.hil.access_point import AccessPointSwitch, CommandAccessPoint
from host_bridge.hil.app_board import AppBoard
from host_bridge.hil.dut import Dut
from host_bridge.hil.power import CommandSwitch, ModemLines, PowerSwitch, RtsEnSwitch
from host_bridge.hil.real_dut import SerialDut
from host_bridge.hil.subscriber import Subscriber
from host_bridge.hil.verdict import BoardRun, Verdict, judge_runs, write_csv
from host_bridge.hil.virtual_dut import VirtualDut
from host_bridge.processes import ManagedProcess, sigterm_as_ctrl_c, still_running
from host_bridge.vboard.events import EventSpec
from host_bridge.vboard.runner import INSTALL_PATHS
from host_bridge.vboard.serial_line import LineFaults
from host_bridge.vboard.wifi import AccessPoint, JoinModel

SIM = "sim"
LINK_BAUD = 115200


@dataclass(frozen=True)
class DutSpec:
    port: str | None  # None: a virtual board
    board: str
    link_port: str | None = None

    @property
    def virtual(self) -> bool:
        return self.port is None


@dataclass
class HilConfig:
    duts: list[DutSpec]
    broker: str | None
    power_cmd: str | None
    log_dir: Path
    cycles: int
    install: str = "deployed"
    notes: list[str] = field(default_factory=list)
    wifi: tuple[str, str] | None = None  # real boards' network (SSID, password)
    ap_cmd: str | None = None
    join_scale: float = 0.1

    @property
    def virtual(self) -> bool:
        return all(d.virtual for d in self.duts)


# Every option of the bench: on the command line as --hil-NAME, in pytest.ini/pyproject.toml as hil_NAME (the
# command line wins). One prefix, so that the bench sits beside other plugins (pytest-embedded has --port,
# --baud, --target...) without a clash.
_OPTIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "dut": (
        "device under test: 'sim' (a virtual board, the default) or a real board's console port; repeatable",
        {"action": "append", "metavar": "sim|PORT"},
    ),
    "board": (
        "board definition (boards/NAME) for each --hil-dut, in order (default: sim for sim)",
        {"action": "append", "metavar": "NAME"},
    ),
    "link-port": (
        "host end of each real board's link UART, in --hil-dut order ('-' for none)",
        {"action": "append", "metavar": "PORT"},
    ),
    "broker": ("an external broker instead of a Mosquitto per test", {"metavar": "HOST:PORT"}),
    "power-cmd": (
        "command that power-cycles a real board, e.g. 'uhubctl -a cycle -p {port}' ({port}, {board})",
        {"metavar": "CMD"},
    ),
    "log-dir": ("one log folder per test under DIR (default build/hil/logs)", {"metavar": "DIR"}),
    "install": (
        "how the firmware's code is installed: deployed (.mpy files on the filesystem, in the heap; the default, "
        "as `host-bridge deploy` leaves a stock image), romfs (a ROMFS image) or frozen (in the image)",
        {"choices": INSTALL_PATHS},
    ),
    "cycles": (
        "repeat the power-cut scenarios N times and write their tables as CSV (default: $HIL_CYCLES or 1)",
        {"type": int, "metavar": "N"},
    ),
    "wifi": (
        "the network real boards on TCP join, as config.json's wifi (virtual boards join the bench's own)",
        {"metavar": "SSID:PASSWORD"},
    ),
    "ap-cmd": (
        "command that takes the access point real boards join down or up, e.g. 'smartplug lab-ap {action}' "
        "({action}: down or up)",
        {"metavar": "CMD"},
    ),
    "join-scale": (
        "host time a virtual board's WiFi join takes, as a share of a chip's (default 0.1: 175 ms for a DHCP join)",
        {"type": float, "metavar": "F"},
    ),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hil", "hardware-in-the-loop bench (host_bridge.hil)")
    for name, (help_text, kwargs) in _OPTIONS.items():
        group.addoption(f"--hil-{name}", default=None, help=help_text, **kwargs)
        if kwargs.get("action") == "append":
            parser.addini(_ini_name(name), f"{help_text} (--hil-{name}; several: spaces)", "args", [])
        else:
            parser.addini(_ini_name(name), f"{help_text} (--hil-{name})", "string", "")


def _ini_name(name: str) -> str:
    """An option's name in pytest.ini: hil_link_port for --hil-link-port."""
    return "hil_" + name.replace("-", "_")


def _option(config: pytest.Config, name: str) -> Any:
    """--hil-NAME from the command line, else hil_NAME from the ini file, else None."""
    value = config.getoption(f"--hil-{name}")
    if value is None:
        value = config.getini(_ini_name(name)) or None
        choices = _OPTIONS[name][1].get("choices")
        if value is not None and choices is not None and value not in choices:
            raise pytest.UsageError(f"{_ini_name(name)} = {value}: expected one of {', '.join(choices)}")
    return value


def resolve(config: pytest.Config) -> HilConfig:
    ports: list[str] = _option(config, "dut") or [SIM]
    boards: list[str] = _option(config, "board") or []
    links: list[str] = _option(config, "link-port") or []
    specs = []
    for i, port in enumerate(ports):
        board = boards[i] if i < len(boards) else (SIM if port == SIM else None)
        if board is None:
            raise pytest.UsageError(f"--hil-dut {port}: give its --hil-board (one of the folders under boards/)")
        link = links[i] if i < len(links) and links[i] != "-" else None
        specs.append(DutSpec(None if port == SIM else port, board, link))
        BoardDefinition.load(board)  # a wrong name fails here, once, with the list of boards
    cycles = int(_option(config, "cycles") or os.environ.get("HIL_CYCLES", "1") or 1)
    log_dir = Path(_option(config, "log-dir") or Path(str(config.rootpath)) / "build" / "hil" / "logs")
    wifi = _option(config, "wifi")
    if wifi is not None and ":" not in wifi:
        raise pytest.UsageError(f"--hil-wifi {wifi}: give SSID:PASSWORD (an open network: SSID:)")
    return HilConfig(
        specs,
        _option(config, "broker"),
        _option(config, "power-cmd"),
        log_dir.resolve(),
        max(1, cycles),
        _option(config, "install") or "deployed",
        wifi=(wifi.split(":", 1)[0], wifi.split(":", 1)[1]) if wifi else None,
        ap_cmd=_option(config, "ap-cmd"),
        join_scale=float(_option(config, "join-scale") or 0.1),
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "hil_real: needs a real board (skipped, with the reason, on --hil-dut sim)")
    config.addinivalue_line(
        "markers", "hil_virtual(why): needs what only a virtual board offers (skipped on real boards)"
    )
    config.addinivalue_line(
        "markers",
        "hil_broker(persistence=True, tls=False): how the hil_broker fixture's Mosquitto is configured (tls: a "
        "second listener, TLS, at hil_broker.tls_address, its CA in the test's log folder, pki/ca/ca.pem)",
    )
    try:
        config.stash[_CONFIG] = resolve(config)
    except Exception as exc:  # noqa: BLE001 (any bad option becomes a usage error naming it)
        raise pytest.UsageError(str(exc)) from None
    if not hasattr(config, "workerinput"):  # the session's controller (pytest-xdist's workers append to it)
        campaign_csv(config.stash[_CONFIG]).unlink(missing_ok=True)


_CONFIG = pytest.StashKey[HilConfig]()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Power-cut scenarios take a `hil_cycle` argument: run once per cycle of the campaign (HIL_CYCLES)."""
    if "hil_cycle" in metafunc.fixturenames:
        cycles = metafunc.config.stash[_CONFIG].cycles
        metafunc.parametrize("hil_cycle", range(cycles), ids=[f"cycle{i}" for i in range(cycles)])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    hil = config.stash[_CONFIG]
    for item in items:
        if item.get_closest_marker("hil_real") and hil.virtual:
            item.add_marker(pytest.mark.skip(reason="needs a real board: run with --hil-dut PORT --hil-board NAME"))
        marker = item.get_closest_marker("hil_virtual")
        if marker and not hil.virtual:
            why = marker.args[0] if marker.args else "needs a virtual board"
            item.add_marker(pytest.mark.skip(reason=f"{why}: virtual boards only"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """After every fixture of the test is torn down: no board process may still run."""
    result = yield
    boards = [s for s in still_running() if s.kind == "board"]
    if boards:
        for s in boards:
            s.process.kill()
            s.process.wait(10)
        names = ", ".join(f"pid {s.pid} ({s.what})" for s in boards)
        pytest.fail(f"board process(es) outlived the test that started them (now killed): {names}", pytrace=False)
    return result


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    left = still_running()
    if not left:
        return
    for s in left:
        s.process.kill()
        s.process.wait(10)
    names = ", ".join(f"pid {s.pid} ({s.what})" for s in left)
    sys.stderr.write(f"\nhil: processes outlived the test session (now killed): {names}\n")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


# -- fixtures --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def hil_config(pytestconfig: pytest.Config) -> HilConfig:
    """The bench's options, resolved once (boards, broker, install path, cycles, log folder). Every bench fixture
    takes it, so a test session that uses the bench, and only such a session, gets a SIGTERM handler that unwinds
    like Ctrl-C (fixtures then stop the boards, brokers and bridges they started)."""
    sigterm_as_ctrl_c()
    return pytestconfig.stash[_CONFIG]


@pytest.fixture
def hil_log(request: pytest.FixtureRequest, hil_config: HilConfig) -> Path:
    """This test's log folder (emptied first)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid).strip("_")[-150:]
    folder = hil_config.log_dir / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


class ExternalBroker:
    """A broker the bench does not run (--hil-broker): it cannot be restarted from here."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.log_path: Path | None = None

    def _refuse(self) -> None:
        pytest.skip("this scenario restarts the broker: not possible with --hil-broker (an external broker)")

    def restart(self) -> None:
        self._refuse()

    def stop(self) -> None:
        self._refuse()

    def start(self) -> None:
        self._refuse()


@pytest.fixture
def hil_broker(
    request: pytest.FixtureRequest, hil_config: HilConfig, hil_log: Path
) -> Iterator[Mosquitto | ExternalBroker]:
    """The broker of the test: --hil-broker's, or a Mosquitto on loopback of the test's own (persistence on, unless
    the test is marked broker(persistence=False)), stopped after it."""
    if hil_config.broker:
        yield ExternalBroker(hil_config.broker)
        return
    marker = request.node.get_closest_marker("hil_broker")
    persistence = bool(marker.kwargs.get("persistence", True)) if marker else True
    tls = None
    if marker and marker.kwargs.get("tls"):
        # A second listener, TLS, with a certificate of a CA of the test's own (hil_log/pki/ca/ca.pem).
        tls = CertificateAuthority(hil_log / "pki" / "ca").issue("broker", "localhost", dns="localhost")
    with Mosquitto(hil_log / "broker", persistence=persistence, tls_listener=tls) as b:
        yield b


class Bridge:
    """`host-bridge run` for the boards on the serial link, started by the scenario that needs it."""

    def __init__(self, broker: Mosquitto | ExternalBroker, log_dir: Path) -> None:
        self.broker = broker
        self.log_dir = log_dir
        self.ports: dict[str, str] = {}
        self.process: ManagedProcess | None = None
        self.starts = 0

    def start(self, duts: list[Dut] | None = None) -> None:
        for d in duts or []:
            if d.link_port is None:
                pytest.skip(f"{d.name} has no link port: give --hil-link-port for a real board on the serial link")
            self.ports[d.name] = d.link_port
        args = bridge_command(self.broker.address, LINK_BAUD, self.ports, 5)
        self.starts += 1
        self.process = ManagedProcess(args, self.log_dir / f"bridge-{self.starts}.log")
        self.process.wait_for("event=start")

    def kill(self) -> None:
        """SIGKILL: no goodbye to the boards or the broker."""
        if self.process is not None:
            self.process.kill()
            self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None

    def text(self) -> str:
        return "".join(p.read_text(errors="replace") for p in sorted(self.log_dir.glob("bridge-*.log")))


@pytest.fixture
def hil_bridge(hil_broker: Mosquitto | ExternalBroker, hil_log: Path) -> Iterator[Bridge]:
    """`host-bridge run` for the boards on a serial link, started by the scenario (bridge.start(duts)), stopped
    after it."""
    b = Bridge(hil_broker, hil_log)
    try:
        yield b
    finally:
        b.stop()


def make_switch(spec: DutSpec, power_cmd: str | None) -> Callable[[ModemLines], PowerSwitch]:
    assert spec.port is not None
    if power_cmd:
        port, board = spec.port, spec.board
        return lambda _lines: CommandSwitch(power_cmd, port, board)
    return RtsEnSwitch


class NoAccessPoint:
    """Real boards without --hil-ap-cmd: the bench cannot take their access point away."""

    def _refuse(self) -> None:
        pytest.skip("this scenario takes the access point down: give --hil-ap-cmd for real boards")

    def down(self) -> None:
        self._refuse()

    def up(self) -> None:
        self._refuse()

    def outage(self, seconds: float) -> None:
        self._refuse()

    def outage_at(self, on: EventSpec, seconds: float) -> None:
        self._refuse()


@pytest.fixture
def hil_ap(hil_config: HilConfig, hil_log: Path) -> Iterator[AccessPointSwitch]:
    """The access point of the test's boards on TCP: one virtual access point that every virtual board of the
    test joins (its joins scaled by --hil-join-scale, its beacon timeout ESP-IDF's 6 s), or --hil-ap-cmd's for
    real boards."""
    if not hil_config.virtual:
        yield CommandAccessPoint(hil_config.ap_cmd) if hil_config.ap_cmd else NoAccessPoint()
        return
    with AccessPoint(hil_log / "access-point", model=JoinModel(scale=hil_config.join_scale)) as ap:
        yield ap


def virtual_dut(hil_config: HilConfig, hil_log: Path, name: str, spec: DutSpec, seed: int, ap: Any) -> VirtualDut:
    """A virtual board of the bench: its flash, console log and link UART in the test's folder."""
    return VirtualDut(
        name,
        BoardDefinition.load(spec.board),
        flash=hil_log / name / "board.flash",
        console_log=hil_log / f"{name}.console.log",
        faults=LineFaults(baud=LINK_BAUD),
        serial_link=hil_log / name / "ttyLINK",
        seed=seed,
        install=hil_config.install,
        ap=ap if isinstance(ap, AccessPoint) else None,
    )


@pytest.fixture
def hil_duts(
    request: pytest.FixtureRequest, hil_config: HilConfig, hil_log: Path, hil_ap: AccessPointSwitch
) -> Iterator[list[Dut]]:
    """The boards under test, one per --hil-dut (a virtual board by default), each with its power switch and
    console log; every one closed (and a virtual one's process ended) after the test."""
    made: list[Dut] = []
    try:
        for i, spec in enumerate(hil_config.duts):
            board = BoardDefinition.load(spec.board)
            name = f"dut{i}"
            if spec.virtual:
                made.append(virtual_dut(hil_config, hil_log, name, spec, i, hil_ap))
            else:
                assert spec.port is not None
                made.append(
                    SerialDut(
                        name,
                        board,
                        hil_log,
                        spec.port,
                        make_switch(spec, hil_config.power_cmd),
                        spec.link_port,
                        install=hil_config.install,
                        wifi={"ssid": hil_config.wifi[0], "password": hil_config.wifi[1]} if hil_config.wifi else None,
                    )
                )
        yield made
    finally:
        for d in made:
            d.close()


@pytest.fixture
def hil_dut(hil_duts: list[Dut]) -> Dut:
    """The first board under test."""
    return hil_duts[0]


@pytest.fixture
def hil_drive(hil_dut: Dut) -> Callable[..., None]:
    """Drive the test's board's inputs: hil_drive(pins={0: 0}, adc={34: 1_200_000}, temperature_c=30,
    i2c={0x38: {"model": "aht20", ...}}) (Dut.drive; a real board's test gets a DutError saying to wire a driver
    of its own)."""
    return hil_dut.drive


@pytest.fixture
def hil_app_board(tmp_path: Path) -> Iterator[Callable[..., AppBoard]]:
    """hil_app_board(folder, wiring=None, **options): your application (the folder you copy to a board: main.py, lib/,
    its files) booted on a virtual board with its wiring file (the folder's wiring.json by default), started;
    stopped after the test (docs/testing-your-firmware.md). Options are VirtualBoard's (ap=, put=, heap=...)."""
    made: list[AppBoard] = []
    tried = [0]

    def make(folder: Path | str, wiring: Path | str | None = None, **options: Any) -> AppBoard:
        tried[0] += 1
        work = tmp_path / f"app-board-{tried[0]}"
        work.mkdir()
        board = AppBoard(Path(folder), work, Path(wiring) if wiring is not None else None, **options)
        made.append(board)
        return board

    try:
        yield make
    finally:
        for board in made:
            board.close()


@pytest.fixture
def hil_fleet(
    hil_config: HilConfig, hil_log: Path, hil_duts: list[Dut], hil_ap: AccessPointSwitch
) -> Iterator[Callable[[int], list[Dut]]]:
    """fleet(n): n boards for a scenario that runs several at once. On virtual benches, the boards of --hil-dut
    and as many more as n asks, on the test's access point; on real benches, the boards given (at least one,
    the scenario spreads its configurations over them)."""
    extra: list[Dut] = []

    def fleet(n: int) -> list[Dut]:
        if not hil_config.virtual:
            return hil_duts
        spec = hil_config.duts[0]
        while len(hil_duts) + len(extra) < n:
            i = len(hil_duts) + len(extra)
            extra.append(virtual_dut(hil_config, hil_log, f"dut{i}", spec, i, hil_ap))
        return (hil_duts + extra)[:n]

    try:
        yield fleet
    finally:
        for d in extra:
            d.close()


@pytest.fixture
def hil_subscriber(
    request: pytest.FixtureRequest, hil_broker: Mosquitto | ExternalBroker, hil_log: Path
) -> Iterator[Subscriber]:
    """The observer: a paho subscriber at QoS 2 on sensors/# with a persistent session, recording every
    delivery; its deliveries are saved in the test's log folder."""
    client_id = (
        "hil-"
        + re.sub(r"[^A-Za-z0-9]+", "-", request.node.name)[-40:]
        + f"-{os.getpid()}-{time.monotonic_ns() % 10**6}"
    )
    s = Subscriber(hil_broker.address, client_id)
    try:
        yield s
    finally:
        s.save(hil_log / "subscriber.jsonl")
        s.close()


@pytest.fixture
def hil_verdict(
    request: pytest.FixtureRequest, hil_subscriber: Subscriber, hil_config: HilConfig, hil_log: Path
) -> Callable[[list[BoardRun]], Verdict]:
    """judge(runs): the table per board, printed, saved in the test's folder and appended to the campaign CSV
    (build/hil/results.csv, or under --hil-log-dir's parent), judged by the shared promises."""

    def judge(runs: list[BoardRun], settle: float = 15) -> Verdict:
        result = judge_runs(request.node.nodeid, hil_subscriber, runs, settle)
        result.save(hil_log)
        print("\n" + result.table())
        write_csv(campaign_csv(hil_config), result.tallies, append=True)  # emptied at the session's start
        return result

    return judge


def campaign_csv(hil: HilConfig) -> Path:
    """Every verdict table of the session, one row per board per scenario (build/hil/results.csv, or beside
    --hil-log-dir), for a campaign's statistics."""
    return hil.log_dir.parent / "results.csv"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    hil = config.stash.get(_CONFIG, None)
    if hil is None or not campaign_csv(hil).exists():
        return
    with open(campaign_csv(hil)) as f:
        rows = sum(1 for _ in f) - 1
    terminalreporter.write_line(f"hil: {rows} board results in {campaign_csv(hil)}; logs in {hil.log_dir}")
