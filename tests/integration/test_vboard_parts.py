"""Parts on the virtual board's pins behind the ESP32 port's primitives (host_bridge/vboard/shims/vparts.py): DHT11
and DHT22 sensors read by esp.dht_readinto, DS18B20 thermometers on a 1-Wire bus (_onewire), a WS2812 strip fed by
machine.bitstream, read from the host. The app (tests/vboard_apps/parts) uses the primitives as the port documents
them; micropython-lib's dht, onewire, ds18x20 and neopixel drivers stand on the same calls."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from host_bridge.errors import VBoardError
from host_bridge.vboard.runner import DEEPSLEEP_EXIT_STATUS, DEEPSLEEP_RESET, TIMER_WAKE, VirtualBoard
from tests.conftest import APPS

ROM_A = "2800000000000a3c"  # (family 28, a serial, its CRC below)
ROM_B = "28ff4c5a0b000000"


def with_crc(rom: str) -> str:
    data = bytes.fromhex(rom)[:7]
    crc = 0
    for byte in data:
        for _ in range(8):
            mix = (crc ^ byte) & 1
            crc >>= 1
            if mix:
                crc ^= 0x8C
            byte >>= 1
    return (data + bytes((crc,))).hex()


def test_dht_ds18b20_and_a_strip_answer_as_their_datasheets_say(tmp_path: Path) -> None:
    roms = sorted(with_crc(r) for r in (ROM_A, ROM_B))
    board = VirtualBoard(tmp_path / "b.flash", app=APPS / "parts", stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    board.drive(
        dht={
            4: {"model": "dht22", "temperature_c": -3.4, "humidity": 61.2},
            5: {"model": "dht11", "temperature_c": 23, "humidity": 40},
            7: {"model": "dht22", "fault": "checksum"},
        },
        onewire={
            13: [
                {"model": "ds18b20", "rom": roms[1], "temperature_c": 21.5},
                {"model": "ds18b20", "rom": roms[0], "temperature_c": -10.125},
            ]
        },  # fmt: skip
    )
    try:
        board.start()
        out = board.output(60)
        assert board.wait(10) == 0, out
        strip = board.strip(2)
    finally:
        board.close()
    # DHT22: humidity 612 (0x0264), temperature 34 with the sign bit (0x8022); DHT11: whole numbers.
    assert "dht 4 0264802208 checksum True" in out, out
    assert "dht 5 280017003f checksum True" in out, out
    assert "dht 6 OSError 116" in out, out  # nothing on the pin: ETIMEDOUT (newlib's), as the port raises
    assert "dht 7" in out and "checksum False" in out.split("dht 7")[1].splitlines()[0], out
    assert "presence True False" in out, out
    assert f"roms {roms[0]} {roms[1]} crc True" in out, out
    assert "converting 0" in out and "converted 1" in out, out
    assert f"temperature {roms[1]} 21.5 crc True" in out, out
    assert f"temperature {roms[0]} -10.125 crc True" in out, out
    assert strip == [(255, 0, 0), (0, 128, 0), (0, 0, 64)], strip


def test_a_part_the_virtual_board_has_no_model_of_is_refused(tmp_path: Path) -> None:
    board = VirtualBoard(tmp_path / "b.flash", app=APPS / "parts")
    try:
        with pytest.raises(VBoardError, match="no model 'dht21'"):
            board.drive(dht={4: {"model": "dht21"}})
        with pytest.raises(VBoardError, match="ROM is 16 hex digits"):
            board.drive(onewire={13: [{"model": "ds18b20", "rom": "10aa"}]})
    finally:
        board.close()


def test_parts_fail_as_scheduled_on_their_own_transactions_and_the_boards_wakes(tmp_path: Path) -> None:
    """Each fault from its fault_at on: a DHT's checksum from its third read, a DHT holding its line low from the
    board's first wake; a DS18B20's CRC from its second transaction, one holding the bus low (every slot reads 0)
    from its third, a silent one never present; an AHT20 silent (no acknowledgement: ENODEV) from its third
    transfer, and a BMP280 holding the I2C bus low from the bus's seventh transfer (ETIMEDOUT; a scan finds
    nothing)."""
    board = VirtualBoard(tmp_path / "b.flash", app=APPS / "part_faults", stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)  # fmt: skip
    roms = [with_crc(f"28{i:02x}00000000000000") for i in (1, 2, 3)]
    board.drive(
        dht={4: {"model": "dht22", "fault": "checksum", "fault_at": "read#3"},
             5: {"model": "dht22", "fault": "held_low", "fault_at": "wake#1"}},
        onewire={13: [{"model": "ds18b20", "rom": roms[0], "fault": "crc", "fault_at": "read#2"}],
                 14: [{"model": "ds18b20", "rom": roms[1], "fault": "held_low", "fault_at": "read#3"}],
                 15: [{"model": "ds18b20", "rom": roms[2], "fault": "silent"}]},
        i2c={0x38: {"model": "aht20", "fault": "silent", "fault_at": "read#3"},
             0x76: {"model": "bmp280", "fault": "held_low", "fault_at": "read#7"}},
    )  # fmt: skip
    try:
        board.start()
        first = board.output(60)
        assert board.wait(10) == DEEPSLEEP_EXIT_STATUS, first
        board.reset_cause, board.wake_reason = DEEPSLEEP_RESET, TIMER_WAKE
        board.start()
        woken = board.output(60)
        assert board.wait(10) == 0, woken
    finally:
        board.close()
    assert "round 1 dht ok ok 1-wire ok ok absent i2c ok" in first, first
    assert "round 2 dht ok ok 1-wire crc ok absent i2c OSError 19" in first, first
    assert "round 3 dht checksum ok 1-wire crc zeros absent i2c OSError 19" in first, first
    assert "round 4 dht checksum ok 1-wire crc zeros absent i2c OSError 19" in first, first
    assert "scan []" in first, first
    assert "wake dht checksum OSError 116" in woken, woken


def test_a_fault_the_part_cannot_have_is_refused(tmp_path: Path) -> None:
    board = VirtualBoard(tmp_path / "b.flash", app=APPS / "parts")
    try:
        with pytest.raises(VBoardError, match="no fault 'crc'"):
            board.drive(dht={4: {"model": "dht22", "fault": "crc"}})
        with pytest.raises(VBoardError, match="read#N or wake#N"):
            board.drive(i2c={0x38: {"model": "aht20", "fault": "silent", "fault_at": "boot#2"}})
        with pytest.raises(VBoardError, match='needs the "fault" it schedules'):
            board.drive(onewire={13: [{"model": "ds18b20", "fault_at": "read#2"}]})
    finally:
        board.close()


def test_an_rmt_channel_drives_a_strip_as_bitstream_does(tmp_path: Path) -> None:
    """esp32.RMT's write_pulses(): a WS2812 strip on the pin reads each high and the low after it as a bit."""
    board = VirtualBoard(tmp_path / "b.flash", app=APPS / "rmt", stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        board.start()
        out = board.output(60)
        assert board.wait(10) == 0, out
        strip, other = board.strip(18), board.strip(19)
    finally:
        board.close()
    assert other == [(0, 255, 0)], other  # (one duration a level: a level held for two is one pulse)
    assert "rmt 80000000 8 True" in out and "channel 8: channel out of range" in out, out
    assert strip == [(255, 0, 0), (0, 0, 16)], strip
