"""examples/thermostat, tested as docs/testing-your-firmware.md tells a developer to test their own firmware: the
HIL plugin's hil_app_board fixture boots the folder with its wiring.json; the test sets the parts (the DHT22's
temperature, the button) and reads the outputs (the relay's pin, the display, the trace of the pins), expecting
the console's lines in order."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from host_bridge.hil.app_board import AppBoard, AppBoardError
from host_bridge.vboard.wiring import WiringError
from tests.conftest import REPO

THERMOSTAT = REPO / "examples" / "thermostat"


def test_the_thermostat_heats_below_its_setpoint_and_the_button_raises_it(
    hil_app_board: Callable[..., AppBoard], tmp_path: Path
) -> None:
    board = hil_app_board(THERMOSTAT)
    board.expect(r"^temperature 21\.0 setpoint 20\.0 heating off$")
    assert board.level("heater") == 0
    board.set("sensor", temperature_c=18.5)
    board.expect(r"^temperature 18\.5 setpoint 20\.0 heating on$", timeout=10)
    assert board.level("heater") == 1
    board.press("button")
    board.expect(r"^setpoint 20\.5$")
    board.release("button")
    board.set("sensor", temperature_c=21.0)
    board.expect(r"^temperature 21\.0 setpoint 20\.5 heating off$", timeout=10)
    assert board.level("heater") == 0
    # The display: the temperature on its first text row, no HEATING bar now.
    rows = board.display("screen")
    assert any(rows[y][x] for y in range(8) for x in range(48)) and not any(rows[40][x] for x in range(128))
    assert board.display_png("screen", tmp_path / "screen.png").read_bytes().startswith(b"\x89PNG")
    board.set("sensor", temperature_c=18.0)
    board.expect(r"^temperature 18\.0 setpoint 20\.5 heating on$", timeout=10)
    assert all(board.display("screen")[40][x] or 36 <= x < 92 for x in range(128))  # the HEATING bar, its text dark
    board.display_png("screen", tmp_path / "heating.png")
    board.set("sensor", temperature_c=21.0)
    board.expect(r"heating off$", timeout=10)
    # The relay's pin over the run, as a logic analyzer records it: off, on, off.
    assert [level for _, level in board.changes("heater")] == [0, 1, 0, 1, 0]
    vcd = board.trace(tmp_path / "pins.vcd").read_text()
    assert "$var wire 1 ! gpio26 $end" in vcd and vcd.rstrip().endswith("0!"), vcd
    # A sensor that stops answering: the heater goes off until it answers again.
    board.set("sensor", temperature_c=17.0)
    board.expect(r"heating on$", timeout=10)
    board.set("sensor", fault="silent")
    board.expect(r"^sensor failed \(.*\): heater off until it answers$", timeout=10)
    board.expect(r"^temperature \? setpoint 20\.5 heating off$")
    assert board.level("heater") == 0


def test_an_expected_line_that_never_comes_says_so_with_the_console(hil_app_board: Callable[..., AppBoard]) -> None:
    board = hil_app_board(THERMOSTAT)
    board.expect(r"heating off")
    with pytest.raises(AppBoardError, match="printed no 'heating on' within 1 s"):
        board.expect(r"heating on", timeout=1)


def test_a_wiring_mistake_is_named_before_the_board_starts(
    hil_app_board: Callable[..., AppBoard], tmp_path: Path
) -> None:
    wiring = tmp_path / "wiring.json"
    wiring.write_text('{"parts": {"heater": {"part": "relay", "pin": 35}}}')
    with pytest.raises(WiringError, match="GPIO 35 is an input only"):
        hil_app_board(THERMOSTAT, wiring)
    wiring.write_text('{"parts": {"sensor": {"part": "dht22", "pin": 4, "temprature_c": 20}}}')
    with pytest.raises(WiringError, match="a dht22 has no value temprature_c"):
        hil_app_board(THERMOSTAT, wiring)
