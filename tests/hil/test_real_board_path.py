"""The real-board path of the bench, as far as a machine without a board goes: the RTS/DTR sequence on a fake
serial port, the power command, a SerialDut driving a pty-backed board through power cycles that make its port
vanish and come back, board definitions for the ESP32 family, image checks and the esptool command lines."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from host_bridge.assets import SHIMS
from host_bridge.boards import partitions
from host_bridge.boards.definition import BOARDS_DIR, CHIPS, BoardDefinition, BoardError, available
from host_bridge.boards.realboard import DeployError, check_image, flash_commands
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.access_point import AccessPointError, CommandAccessPoint
from host_bridge.hil.cycle import CutPlan, run_to_completion
from host_bridge.hil.dut import DutError
from host_bridge.hil.power import CommandSwitch, PowerError, RtsEnSwitch
from host_bridge.hil.real_dut import SerialDut
from host_bridge.hil.scenario import app_config
from host_bridge.hil.subscriber import Subscriber
from host_bridge.hil.verdict import BoardRun, judge_runs
from host_bridge.vboard.runner import VirtualBoard, micropython_executable
from tests.conftest import REPO

FAMILY = ["esp32-devkitc", "esp32-s3-devkitc-1", "esp32-c3-devkitm-1", "esp32-c6-devkitc-1"]


class FakeSerial:
    """Records what is done to the modem lines, with the time of each change."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool, float]] = []

    def setDTR(self, value: bool) -> None:
        self.calls.append(("DTR", value, time.monotonic()))

    def setRTS(self, value: bool) -> None:
        self.calls.append(("RTS", value, time.monotonic()))


def test_rts_on_en_holds_reset_low_without_entering_the_bootloader() -> None:
    port = FakeSerial()
    switch = RtsEnSwitch(port)
    switch.cut()
    switch.restore()
    assert [(line, value) for line, value, _ in port.calls] == [("DTR", False), ("RTS", True), ("RTS", False)]
    held = port.calls[2][2] - port.calls[1][2]
    assert held >= 0.1, f"EN was held low for {held * 1000:.0f} ms, esptool holds it 100 ms"
    # Never DTR asserted with RTS released: that state pulls GPIO0 low, the download mode.
    state = {"DTR": False, "RTS": False}
    for line, value, _ in port.calls:
        state[line] = value
        assert not (state["DTR"] and not state["RTS"])


def test_power_command_fills_in_port_and_board(tmp_path: Path) -> None:
    out = tmp_path / "called"
    switch = CommandSwitch(f"sh -c 'echo $0 $1 > {out}' {{port}} {{board}}", "/dev/ttyUSB3", "esp32-c3-devkitm-1")
    switch.cut()
    assert out.read_text().split() == ["/dev/ttyUSB3", "esp32-c3-devkitm-1"]
    with pytest.raises(PowerError, match="failed"):
        CommandSwitch("false", "/dev/ttyUSB0", "b").cut()
    with pytest.raises(PowerError, match="not found: check --hil-power-cmd"):
        CommandSwitch("no-such-power-tool {port}", "/dev/ttyUSB0", "b").cut()


@pytest.fixture
def pty_board(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A board whose console is a pty at a fixed link path, powered by tests/hil/pty_board_power.py. Yields
    (link path, state folder); whatever socat is running at the end is stopped by its pid."""
    state_dir = tmp_path / "power"
    state_dir.mkdir()
    helper = VirtualBoard(flash=tmp_path / "board.flash", config=tmp_path / "config.json")
    env = {k: v for k, v in helper.environment().items() if k.startswith(("VBOARD_", "MICROPYPATH"))}
    heap = helper.micropython_heap()
    helper.close()  # the pty board runs without the flash lock's owner: it is the only board on this file
    link = tmp_path / "ttyACM-pty"
    state = {
        "link": str(link),
        "env": env,
        "command": [micropython_executable(), "-X", f"heapsize={heap}", str(SHIMS / "vboot.py")],
    }
    (state_dir / "state.json").write_text(json.dumps(state))
    try:
        yield link, state_dir
    finally:
        subprocess.run(
            [sys.executable, str(REPO / "tests" / "hil" / "pty_board_power.py"), str(state_dir), "off"], timeout=30
        )


def test_access_point_command_is_told_down_and_up(tmp_path: Path) -> None:
    """--hil-ap-cmd: the command with {action} filled in, down then up for an outage; a failing or missing
    command is an error naming it."""
    out = tmp_path / "actions"
    ap = CommandAccessPoint(f"sh -c 'echo $0 >> {out}' {{action}}")
    ap.outage(0.05)
    assert out.read_text().split() == ["down", "up"]
    with pytest.raises(AccessPointError, match="failed"):
        CommandAccessPoint("false").down()
    with pytest.raises(AccessPointError, match="not found"):
        CommandAccessPoint("no-such-plug {action}").up()


def test_a_serial_dut_runs_a_pty_board_through_power_cycles(tmp_path: Path, pty_board: tuple[Path, Path]) -> None:
    """The SerialDut reads the board's console from its port, cuts its power with the command, survives the
    port vanishing at every cycle (native USB-Serial/JTAG does that), and judges the run with the subscriber."""
    link, state_dir = pty_board
    power_cmd = f"{sys.executable} {REPO / 'tests' / 'hil' / 'pty_board_power.py'} {state_dir}"
    board = BoardDefinition.load("esp32-c3-devkitm-1")
    with Mosquitto(tmp_path / "broker", persistence=True) as hil_broker:
        hil_subscriber = Subscriber(hil_broker.address, "pty-board-observer")
        config_path = tmp_path / "config.json"

        def deploy(_port: str, config: Path) -> None:  # the pty board reads its config at boot
            config_path.write_text(config.read_text())

        # The power command must make the port exist before the DUT opens it.
        subprocess.run(power_cmd.split(), check=True, timeout=30)
        dut = SerialDut(
            "real0",
            board,
            tmp_path / "logs",
            str(link),
            lambda _lines: CommandSwitch(power_cmd, str(link), board.name),
            deploy=deploy,
        )
        try:
            config = app_config(dut, "pty-board-1", hil_broker.address, 2, 300, "5", publish={"interval_ms": 10})
            assert "tx" not in config.get("uart", {})  # TCP here: no link UART in the config
            dut.configure(config)
            # After a few accepted messages of each boot (the bench watching the console): at a moment, a loaded
            # host's late timer could let the run complete before its cuts.
            plan = CutPlan(cuts=2, inside_flash=0.0, accepted=(5, 30))
            result = run_to_completion(dut, plan, random.Random(3), timeout=120)
        finally:
            dut.close()
        assert result.summary is not None and result.cuts == 2 and result.boots == 3
        assert dut.port_losses >= 3, "every power cycle takes the port away"
        run = BoardRun.from_cycle(dut, result, 2)
        hil_verdict = judge_runs("pty-board", hil_subscriber, [run])
        hil_subscriber.close()
    hil_verdict.assert_kept()
    assert hil_verdict.tallies[0].received == 300
    console = (tmp_path / "logs" / "real0.console.log").read_text()
    assert console.count("=== boot ") == 3 and "connected session_present" in console


@pytest.mark.parametrize("name", FAMILY)
def test_esp32_family_boards_load_and_their_partition_tables_check(name: str) -> None:
    board = BoardDefinition.load(name)
    chip = CHIPS[board.chip]
    assert board.mpy_arch == ("xtensawin" if board.chip in ("esp32", "esp32s3") else "rv32imc")
    assert board.port_survives_reset == (board.chip == "esp32")
    table = partitions.build(board)
    assert partitions.parse(table) == list(board.partitions)  # MD5 entry included and checked
    for part in board.partitions:
        assert part.offset >= 0x9000 and part.offset + part.size <= board.flash_size
        assert part.offset % (0x10000 if part.type == "app" else 0x1000) == 0
    assert board.uart is not None and {board.uart.tx, board.uart.rx} <= chip.gpios - chip.reserved
    assert set(FAMILY) | {"sim", "sim-nojournal"} == set(available())


def test_flash_commands_put_the_bootloader_where_the_chip_wants_it(tmp_path: Path) -> None:
    offsets = {}
    for name in FAMILY:
        board = BoardDefinition.load(name)
        commands = flash_commands("/dev/ttyACM0", board, Path("mp.bin"), tmp_path / "t.bin", 460800)
        assert commands[0][3:6] == ["--chip", board.chip, "--port"]
        offsets[board.chip] = next(c for c in commands if "-z" in c)[-2]  # the image, written before the table
    assert offsets == {"esp32": "0x1000", "esp32s3": "0x0", "esp32c3": "0x0", "esp32c6": "0x0"}


def esp_image(chip_id: int) -> bytes:
    """The first bytes of an ESP image: magic, segments, flash mode/size, entry, then the extended header with
    the chip id at byte 12 (esptool's image format)."""
    return (
        bytes([0xE9, 3, 2, 0x20])
        + (0x40080000).to_bytes(4, "little")
        + bytes(4)
        + chip_id.to_bytes(2, "little")
        + bytes(10)
    )


def test_an_image_for_another_chip_is_refused(tmp_path: Path) -> None:
    s3 = BoardDefinition.load("esp32-s3-devkitc-1")
    check_image(s3, esp_image(0x0009), "s3.bin")
    with pytest.raises(DeployError, match="built for esp32c3, but board esp32-s3-devkitc-1 has an esp32s3"):
        check_image(s3, esp_image(0x0005), "c3.bin")
    with pytest.raises(DeployError, match="not an ESP firmware image"):
        check_image(s3, b"PK\x03\x04" + bytes(60), "firmware.zip")
    image = tmp_path / "c3.bin"
    image.write_bytes(esp_image(0x0005) + bytes(1000))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "host_bridge",
            "flash",
            "--port",
            "/dev/ttyACM0",
            "--board",
            "esp32-s3-devkitc-1",
            "--image",
            str(image),
            "--dry-run",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert result.returncode == 2 and "is built for esp32c3" in result.stderr and "$ " not in result.stdout


def broken(**change: object) -> dict[str, object]:
    raw = json.loads((BOARDS_DIR / "esp32-devkitc" / "board.json").read_text())
    raw.update(change)
    return raw


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"chip": "esp8266"}, "chip 'esp8266' is not one of esp32, esp32s3"),
        ({"flash_size": "4MB"}, "flash_size = '4MB': expected `int`, got `str`"),
        ({"console": "jtag"}, "console = 'jtag': expected one of 'usb-serial-jtag', 'usb-uart', 'virtual'"),
        ({"mpy_arch": "armv7m"}, "mpy_arch = 'armv7m': expected one of 'rv32imc', 'xtensawin'"),
        ({"uart": {"id": 1, "tx": 7, "rx": 16, "baud": 115200}}, "uart.tx GPIO7 is taken by the SPI flash"),
        ({"uart": {"id": 1, "tx": 35, "rx": 16, "baud": 115200}}, "uart.tx GPIO35 is input-only"),
        ({"uart": {"id": 1, "tx": 17, "rx": 16}}, "uart: object missing required field `baud`"),
        ({"partitions": []}, "partitions = []: expected `array` of length >= 1"),
        ({"erase_blok": 4096}, "unknown key erase_blok (known: name, chip, flash_size, erase_block,"),
        ({"uart": {"id": 1, "tx": 17, "rx": 16, "baud": 9600, "pins": 1}}, "unknown key uart.pins (known: id, tx,"),
        ({"erase_block": 65536}, "erase_block = 65536: expected one of 4096"),
        ({"console": None}, "console is required for a real chip"),
    ],
)
def test_a_malformed_board_is_refused_naming_the_field(change: dict[str, object], message: str) -> None:
    with pytest.raises(BoardError, match=re.escape(message)):
        BoardDefinition.from_json(broken(**change))


def parts(*entries: tuple[str, str, str, int, int]) -> list[dict[str, object]]:
    base = [("nvs", "data", "nvs", 0x9000, 0x6000), ("factory", "app", "factory", 0x10000, 0x1F0000)]
    return [dict(zip(("label", "type", "subtype", "offset", "size"), e, strict=False)) for e in base + list(entries)]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            parts(("vfs", "data", "fat", 0x200000, 0x1000), ("app2", "app", "ota_0", 0x208000, 0x10000)),
            "app2 at 0x208000 .* is not aligned",
        ),
        (parts(("vfs", "data", "fat", 0x200800, 0x1000)), "vfs at 0x200800 .* is not aligned"),
        (parts(("vfs", "data", "fat", 0x1F0000, 0x20000)), "partition vfs at 0x1f0000 overlaps partition factory"),
        (parts(("vfs", "data", "fat", 0x200000, 0x300000)), "partitions end at 0x500000, past the 4096 KiB flash"),
        (
            [{"label": "vfs", "type": "data", "subtype": "fat", "offset": 0x8000, "size": 0x1000}],
            "overlaps the partition table",
        ),
        (
            parts(("vfs", "data", "fat", 0x200000, 0x1000), ("vfs", "data", "fat", 0x300000, 0x1000)),
            "label 'vfs' is used twice",
        ),
    ],
)
def test_partition_tables_are_checked(table: list[dict[str, object]], message: str) -> None:
    with pytest.raises(BoardError, match=message):
        BoardDefinition.from_json(broken(partitions=table))


@pytest.mark.hil_real
def test_a_real_board_boots_and_reports_its_reset_cause(hil_dut: SerialDut) -> None:
    """On hardware: a reset through the power switch brings the board back with MicroPython's banner."""
    hil_dut.start()
    hil_dut.expect(r"MicroPython v\d", timeout=20)


class DeadSwitch:
    """A power switch that switches nothing (a relay on the wrong port, a hub without per-port power)."""

    kind = "dead"

    def cut(self) -> None:
        pass

    def restore(self) -> None:
        pass


def test_a_power_switch_that_does_nothing_fails_loudly(tmp_path: Path, pty_board: tuple[Path, Path]) -> None:
    """The bench asks for power cuts that never happen: the board runs on through them. Its own boot counter
    says so (no `boot` line after the bench's boots, its summary of the first boot), and the run fails naming
    the switch, instead of passing for a run through power cuts. The cuts come after a few accepted messages of
    each boot (the bench watching the console, as on a real board), not at a moment, which a loaded host's late
    timer could let the run outrun."""
    link, state_dir = pty_board
    power_cmd = f"{sys.executable} {REPO / 'tests' / 'hil' / 'pty_board_power.py'} {state_dir}"
    board = BoardDefinition.load("esp32-c3-devkitm-1")
    with Mosquitto(tmp_path / "broker", persistence=True) as hil_broker:
        config = {
            "client_id": "dead-switch-1",
            "broker": hil_broker.address,
            "mqtt_version": "5",
            "publish": {"qos": 1, "count": 600, "interval_ms": 10},
        }
        config_path = tmp_path / "config.json"
        config_path.write_text(json.dumps(config))  # the pty board reads it at boot
        subprocess.run(power_cmd.split(), check=True, timeout=30)  # powered once, for good: it boots now
        dut = SerialDut(
            "dead0",
            board,
            tmp_path / "logs",
            str(link),
            lambda _lines: DeadSwitch(),
            deploy=lambda _port, path: config_path.write_text(path.read_text()),
        )
        try:
            dut.configure(config)
            with pytest.raises(DutError, match="did the power switch cut the power"):
                plan = CutPlan(cuts=2, inside_flash=0.0, accepted=(3, 6))
                run_to_completion(dut, plan, random.Random(1), 120)
        finally:
            dut.close()
