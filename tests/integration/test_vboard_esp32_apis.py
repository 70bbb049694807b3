"""The ESP32 APIs that sensor firmware uses, on the virtual board, answered as a chip answers them with nothing
wired to the pins: a button on a pull-up reads released (1), an output reads what it drives, an interrupt handler
can be set; time.time() is whole seconds from the ESP32 port's epoch, 2000-01-01; sys.platform and os.uname() say
"esp32" (docs/virtual-board.md, "What firmware of your own finds")."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from host_bridge.boards.definition import BoardDefinition
from host_bridge.boards.firmware_build import mpy_cross_executable
from host_bridge.errors import FirmwareBuildError, VBoardError
from host_bridge.hil.dut import BootEnd, Dut, DutError
from host_bridge.hil.real_dut import SerialDut
from host_bridge.hil.virtual_dut import VirtualDut
from host_bridge.vboard.runner import WDT_EXIT_STATUS, VirtualBoard
from host_bridge.vboard.wifi import AccessPoint
from tests.conftest import APPS


def run_app(tmp_path: Path, app: str) -> str:
    """Run tests/vboard_apps/`app` on a virtual board to its end (exit 0): its console."""
    board = VirtualBoard(tmp_path / "b.flash", app=APPS / app, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        board.start()
        out = board.output(60)
        assert board.wait() == 0, out
    finally:
        board.close()
    return out


def test_pins_read_their_pulls_and_drive_what_they_are_told(tmp_path: Path) -> None:
    board = VirtualBoard(
        tmp_path / "b.flash", app=APPS / "sensor_apis", stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        board.start()
        out = board.output(60)
        assert board.wait() == 0, out
        led, trace, vcd = board.pin(2), board.trace(), board.vcd(tmp_path / "pins.vcd").read_text()
    finally:
        board.close()
    # A pin's state is the pin's: a new Pin object of it reads the pull-up and the level set through another.
    assert "the pin's state, whatever object 1 1 3" in out, out
    # The LED's output, as the host reads it: its level now, every change in order, and the same as a VCD.
    assert led == 1 and [level for _, pin, level in trace if pin == 2] == [0, 1, 0, 1], trace
    assert all(a <= b for (a, _, _), (b, _, _) in zip(trace, trace[1:], strict=False)), trace
    assert "$var wire 1 ! gpio2 $end" in vcd and vcd.rstrip().endswith("1!"), vcd
    # The ESP32 port's epoch, 2000-01-01: the board's clock is the host's, counted from there.
    epoch, seconds, inverse, utc = out.split("epoch ", 1)[1].split()[:4]
    assert epoch == "2000" and inverse == utc == "True", out  # (no time zone: localtime() is gmtime())
    assert abs(int(seconds) - (time.time() - 946684800)) < 60, out
    assert "pull-up input 1 1" in out and "time() is an int True" in out, out
    assert "pull-down input 0" in out and "output 0 1" in out and "irq set 0" in out, out
    assert "platform esp32 esp32 esp32 True" in out, out  # sys.platform and os.uname() as a chip's
    assert "this project's packages []" in out, out  # someone else's app is laid out alone
    # gc.mem_alloc() and mem_free() add up to the board's heap, whatever is allocated (the emulation's share and
    # its ballast are no part of it), as on a chip.
    adds_up, total, small = out.split("heap adds up ", 1)[1].split()[:3]
    assert adds_up == small == "True" and 60_000 < int(total) < 200_000, out


def test_tls_takes_its_buffers_from_a_heap_apart_as_on_a_chip(tmp_path: Path) -> None:
    # mbedTLS's context is about 3 KB on this port: a chip puts it in ESP-IDF's heap, the virtual board in its TLS
    # arena, so the firmware's heap holds only the Python object; dropped, it gives the firmware nothing extra.
    out = run_app(tmp_path, "tls_heap")
    took, gave_back = (int(n) for n in out.split("tls context took ", 1)[1].split()[::4][:2])
    assert 0 < took <= 256, out
    assert gave_back <= 0, out


def test_the_bench_drives_pins_adc_and_temperature_and_a_hungry_watchdog_resets(tmp_path: Path) -> None:
    """A button pressed by the bench runs its irq handler in the board's next wait; the ADC reads the voltage and
    esp32.raw_temperature() the die temperature the bench set; freq() takes 80 MHz; esp tells the flash's size;
    NVS keeps its values across the reset a watchdog nobody fed makes (reset_cause() WDT_RESET)."""
    dut = VirtualDut(
        "hw",
        BoardDefinition.load("sim"),
        flash=tmp_path / "b.flash",
        console_log=tmp_path / "c.log",
        app=APPS / "hardware",
    )
    try:
        dut.start()
        dut.expect(r"ready 1", timeout=60)
        dut.drive(pins={0: 0}, adc={34: 1_225_000}, temperature_c=30)  # (the HIL plugin's hil_drive)
        end = dut.wait_boot(60)
        out = end.console
    finally:
        dut.close()
    assert end.status == 0, out
    assert "freq 240000000" in out and "freq set 80000000" in out, out
    assert "flash 2097152 0 8" in out, out
    assert "nvs empty -4354" in out and "nvs boots 1 b'sensor-7'" in out, out
    assert "before 0 128" in out, out  # nothing driven: 0 V, the die's default 53.3 C
    # 1.225 V of the 11 dB range's 2.45 V: half scale. 30 C is 86 F.
    assert "pressed [0] 1225000 32767 2047 86" in out, out
    assert "never:" not in out and "nvs boots 2 b'sensor-7'" in out and "after the watchdog" in out, out


def test_i2c_spi_pwm_timers_and_deep_sleeps_that_pins_end(tmp_path: Path) -> None:
    """An AHT20 the bench wires at 0x38 answers as its datasheet says (calibrated, busy while it measures, the
    readings the bench set, the CRC right); before that the address is not acknowledged (ENODEV, 19). SPI with
    nothing on it reads 0xFF; a periodic Timer's callback runs in the board's waits. A deep sleep with no timer
    that esp32.wake_on_ext0 set lasts until the bench drives the pin (EXT0_WAKE, 2); one whose timer comes first
    ends by it (TIMER_WAKE, 4)."""
    dut = VirtualDut(
        "bus", BoardDefinition.load("sim"), flash=tmp_path / "b.flash", console_log=tmp_path / "c.log",
        app=APPS / "buses",
    )  # fmt: skip
    try:
        dut.start()
        dut.expect(r"ready 1", timeout=60)
        dut.drive(i2c={0x38: {"model": "aht20", "temperature_c": 21.5, "humidity": 40.0}})
        dut.expect(r"sleeping on pin 4", timeout=60)
        pressed = threading.Timer(1.0, dut.drive, kwargs={"pins": {4: 1}})
        pressed.start()
        try:
            end = dut.wait_boot(60)
        finally:
            pressed.cancel()
        out = end.console
    finally:
        dut.close()
    assert end.status == 0, out
    assert "scan []" in out and "nobody at 0x38 19" in out, out
    assert "scan [56] [56]" in out and "calibrated True" in out and "busy True" in out, out
    assert "busy False crc True reading 21.5 40.0" in out and "bus time emulated True" in out, out
    assert "spi b'\\xff\\xff'" in out and "pwm 1000 767 49152" in out, out
    assert "timer True pulse -2" in out and "running factory" in out, out
    assert "woke 2" in out and "sleeping on pin 5 or 300 ms" in out and "woke 4" in out, out


def test_a_driven_device_must_be_a_modelled_one(tmp_path: Path) -> None:
    board = VirtualBoard(tmp_path / "b.flash", app=APPS / "buses")
    try:
        with pytest.raises(VBoardError, match="no model 'hts221'"):
            board.drive(i2c={0x5F: {"model": "hts221"}})
    finally:
        board.close()


def test_a_real_boards_inputs_are_not_driven_by_the_bench(tmp_path: Path) -> None:
    """Dut.drive (the HIL plugin's hil_drive) on a board the bench cannot drive (a real one: SerialDut keeps the
    base's) says what to do instead of pretending."""

    class Wired(Dut):
        def _install_config(self, config: dict[str, Any]) -> None: ...
        def start(self, cut_at_op: int = 0, cut_in_sleep: int = 0, cut_on: Any = None) -> None: ...
        def power_cut(self) -> None: ...
        def wait_boot(self, timeout: float) -> BootEnd:
            raise NotImplementedError

        def close(self) -> None: ...

    dut = Wired("real0", BoardDefinition.load("esp32-devkitc"), tmp_path / "c.log")
    with pytest.raises(DutError, match="wired, not driven by the bench"):
        dut.drive(pins={0: 0})
    assert SerialDut.drive is Dut.drive


def peer_board(tmp_path: Path, server: socket.socket, app: str, **options: Any) -> VirtualBoard:
    """A board running tests/vboard_apps/`app`, its peer.json naming `server` (a host port that accepts and never
    answers), its console piped."""
    peer = tmp_path / "peer.json"
    peer.write_text(json.dumps({"host": "127.0.0.1", "port": server.getsockname()[1]}))
    return VirtualBoard(tmp_path / "b.flash", app=APPS / app, put=((peer, "peer.json"),), stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, **options)  # fmt: skip


def test_a_watchdog_resets_a_board_blocked_in_recv(tmp_path: Path) -> None:
    """A board blocked in a socket's recv() (a peer that never answers) with a task watchdog armed is reset by it,
    as a chip's task watchdog resets a task blocked in lwIP; without the watchdog it would wait for ever."""
    with socket.create_server(("127.0.0.1", 0)) as server, AccessPoint(tmp_path / "ap", "lab", "") as ap:
        board = peer_board(tmp_path, server, "blocked_recv", ap=ap)
        try:
            board.start()
            first = board.output(60)
            status = board.wait(10)
            assert status == WDT_EXIT_STATUS, first
            board.next_boot(status)
            board.start()
            second = board.output(60)
        finally:
            board.close()
    assert "blocked in recv" in first and "the watchdog was not fed" in first and "recv returned" not in first
    assert "reset by the watchdog" in second, second


def test_a_watchdog_resets_a_board_blocked_anywhere(tmp_path: Path) -> None:
    """The watchdog resets a board wherever it is stuck, as a chip's does: in a busy loop, and in select.poll() with
    no timeout (calls no shim waits in: the host resets it, within WDT_GRACE_S of the deadline)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        board = peer_board(tmp_path, server, "starved")
        try:
            outs, statuses = [], []
            for _ in range(3):
                board.start()
                outs.append(board.output(60))
                statuses.append(board.wait(10))
                board.next_boot(statuses[-1])
        finally:
            board.close()
    assert statuses == [WDT_EXIT_STATUS, WDT_EXIT_STATUS, 0], (statuses, outs)
    assert "spinning" in outs[0] and "polling" in outs[1] and "poll returned" not in outs[1], outs
    assert "boot after 2 watchdog resets" in outs[2], outs


def test_code_of_ones_own_compiles_as_mpy_cross_does_and_foreign_native_code_is_refused(tmp_path: Path) -> None:
    """Someone else's application is compiled as mpy-cross compiles by default, for the board's own architecture:
    its @native and @viper functions run, its asserts are kept, a traceback names its file and line. An .mpy of
    its own with native code for another chip is refused by name, not dropped or crashed on."""
    out = run_app(tmp_path, "own_code")
    assert "native 42 viper 45" in out and "assert kept x must be positive" in out, out
    assert 'File "fast.py", line 18, in checked' in out, out
    app = tmp_path / "app"
    shutil.copytree(APPS / "own_code", app)
    (app / "lib").mkdir()
    compiled = subprocess.run(
        [mpy_cross_executable(), "-march=xtensawin", "-o", str(app / "lib" / "chip.mpy"), str(app / "fast.py")],
        capture_output=True,
        text=True,
    )
    assert compiled.returncode == 0, compiled.stderr
    with pytest.raises(FirmwareBuildError, match="lib/chip.mpy holds native code for xtensawin"):
        VirtualBoard(tmp_path / "c.flash", app=app)


def test_errno_numbers_are_the_esp32_ports_wherever_they_come_from(tmp_path: Path) -> None:
    """The ESP32 port raises newlib's errno numbers (lwIP's: ETIMEDOUT 116, ECONNABORTED 113, EHOSTUNREACH 118,
    EINPROGRESS 119), not the Unix port's Linux ones (110, 103, 113, 115): `errno` names them, in a file compiled on
    the board as in one compiled by mpy-cross; a wired socket, a station's, asyncio's connect and a part raise
    them; a traceback names them as a chip's does."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        board = peer_board(tmp_path, server, "lwip_errno")
        try:
            board.start()
            out = board.output(60)
            assert board.wait() == 1, out
        finally:
            board.close()
    assert "main 116 113 118 119" in out and "module (116, 113, 118, 119)" in out, out
    assert "errorcode ETIMEDOUT" in out and "dht 116 True" in out, out
    assert "wired non-blocking connect 119 True" in out and "wired recv timeout 116 True" in out, out
    assert "asyncio open_connection True" in out and "unjoined connect 118 True" in out, out
    assert out.rstrip().endswith("OSError: [Errno 116] ETIMEDOUT"), out
