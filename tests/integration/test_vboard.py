"""The virtual ESP32 board: emulated NOR flash semantics, power cuts, LittleFS durability, the paced and noisy
serial line, and the `host-bridge vboard` command line."""

from __future__ import annotations

import json
import os
import random
import select
import shutil
import signal
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
import serial

from host_bridge.assets import SHIMS
from host_bridge.errors import VBoardError
from host_bridge.vboard import POWER_CUT_EXIT_STATUS, BoardDefinition, LineFaults, VirtualBoard
from host_bridge.vboard.flash_image import create_flash
from tests.conftest import APPS, REPO
from tests.integration.boards import read_until

SIM = BoardDefinition.load("sim")
MQTTLOG = next(p for p in SIM.partitions if p.label == "mqttlog")


def run_app(
    tmp_path: Path, app: str, config: dict[str, object], timeout: float = 60, **kwargs: object
) -> tuple[int, str, VirtualBoard]:
    conf = tmp_path / "config.json"
    conf.write_text(json.dumps(config))
    board = VirtualBoard(
        flash=kwargs.pop("flash", tmp_path / "board.flash"),  # type: ignore[arg-type]
        config=conf,
        app=APPS / app,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        **kwargs,  # type: ignore[arg-type]
    )
    board.start()
    assert board.process is not None
    out, _ = board.process.communicate(timeout=timeout)
    code = board.wait()
    board.close()
    return code, out.decode(), board


def ops_env(ops: list[list[object]]) -> dict[str, str]:
    return {"FLASH_OPS": json.dumps(ops)}


def flash_bytes(tmp_path: Path, offset: int, length: int) -> bytes:
    with open(tmp_path / "board.flash", "rb") as f:
        f.seek(offset)
        return f.read(length)


# --- emulated NOR flash -------------------------------------------------------------------------------------


def test_new_flash_is_erased_and_vfs_is_formatted_as_littlefs(tmp_path: Path) -> None:
    code, out, board = run_app(tmp_path, "console", {"client_id": "b1"})
    assert code == 0, out
    assert "formatting /flash (LittleFS v2)" in out
    # The data partitions, then NVS (its own partition's place in the file, after them).
    assert (tmp_path / "board.flash").stat().st_size == SIM.flash_size + SIM.nvs().size
    assert flash_bytes(tmp_path, MQTTLOG.offset, MQTTLOG.size) == b"\xff" * MQTTLOG.size
    stats = board.stats()
    assert stats["vfs"]["blocks_erased"] >= 2 and stats["vfs"]["bytes_programmed"] > 0
    assert stats["mqttlog"] == dict.fromkeys(stats["mqttlog"], 0)
    # The second boot mounts what the first formatted.
    code, out, _ = run_app(tmp_path, "console", {"client_id": "b1"})
    assert code == 0 and "formatting" not in out and "boot 2" in out


def test_programming_clears_bits_only_and_reports_programming_without_erase(tmp_path: Path) -> None:
    ops = [["program", 0, 10, "0f"], ["program", 0, 10, "0f"], ["program", 0, 10, "f0"], ["read", 0, 10, 1]]
    code, out, board = run_app(tmp_path, "flash_ops", {"client_id": "b"}, extra_env=ops_env(ops))
    assert code == 0, out
    lines = [line for line in out.splitlines() if not line.startswith(("flash:", "model_us"))]
    # Same value again is fine (no bit goes 0 -> 1); 0xF0 over 0x0F needs an erase: reported as EIO.
    assert lines[-5:] == ["ok program", "ok program", "error program 5", "read 00", "ok read"]
    assert "flash: program over non-erased byte at 0x%x" % (MQTTLOG.offset + 10) in out
    # As on real NOR flash the cell ends as old AND new.
    assert flash_bytes(tmp_path, MQTTLOG.offset + 10, 1) == b"\x00"
    stats = board.stats()["mqttlog"]
    assert stats["program_violations"] == 1 and stats["program_ops"] == 3 and stats["bytes_programmed"] == 3


def test_erase_restores_ff_and_counts_per_partition(tmp_path: Path) -> None:
    ops = [["program", 1, 0, "00" * 64], ["erase", 1], ["program", 1, 0, "a5"]]
    code, out, board = run_app(tmp_path, "flash_ops", {"client_id": "b"}, extra_env=ops_env(ops))
    assert code == 0 and "error" not in out, out
    assert flash_bytes(tmp_path, MQTTLOG.offset + 4096, 4096) == b"\xa5" + b"\xff" * 4095
    stats = board.stats()["mqttlog"]
    assert (stats["blocks_erased"], stats["bytes_programmed"], stats["program_violations"]) == (1, 65, 0)


def test_power_cut_inside_a_program_leaves_it_half_done(tmp_path: Path) -> None:
    # Boot once so the vfs format is not the operation that gets cut.
    run_app(tmp_path, "flash_ops", {"client_id": "b"}, extra_env=ops_env([]))
    ops = [["program", 2, 0, "00" * 256]]
    code, out, board = run_app(tmp_path, "flash_ops", {"client_id": "b"}, extra_env=ops_env(ops), cut_at_op=1, seed=3)
    assert code == POWER_CUT_EXIT_STATUS, out
    assert "power cut during program of 256 bytes" in out and "ok program" not in out
    # Torn: each of the bits the program was clearing cleared or not, at random (a page's cells are programmed
    # in parallel): neither the old bytes nor the new ones, and no clean prefix either.
    data = flash_bytes(tmp_path, MQTTLOG.offset + 2 * 4096, 256)
    cleared = sum(8 - bin(b).count("1") for b in data)
    assert 0 < cleared < 256 * 8 and data not in (b"\x00" * 256, b"\xff" * 256), data.hex()
    assert any(b not in (0x00, 0xFF) for b in data), "whole bytes only: a prefix, not a torn page"
    assert board.stats()["mqttlog"]["bytes_programmed"] == 256


def test_power_cut_inside_an_erase_leaves_the_sector_partly_erased(tmp_path: Path) -> None:
    ops = [["program", 3, 0, "00" * 4096], ["erase", 3]]
    run_app(tmp_path, "flash_ops", {"client_id": "b"}, extra_env=ops_env([]))
    code, out, _ = run_app(tmp_path, "flash_ops", {"client_id": "b"}, extra_env=ops_env(ops), cut_at_op=2, seed=5)
    assert code == POWER_CUT_EXIT_STATUS and "power cut during erase of sector" in out, out
    data = flash_bytes(tmp_path, MQTTLOG.offset + 3 * 4096, 4096)
    erased = len(data) - len(data.lstrip(b"\xff"))
    assert 0 <= erased < 4096 and data[erased:] == b"\x00" * (4096 - erased)


# `make test` runs 200 power cuts; `make soak` runs POWER_CUTS=5000.
POWER_CUTS = int(os.environ.get("POWER_CUTS", "200"))


def test_littlefs_keeps_every_flushed_record_through_power_cuts(tmp_path: Path) -> None:
    """Power cut at random program/erase operations, inside LittleFS's own writes; after each, the next boot
    finds every record whose flush had returned, and nothing corrupt."""
    rng = random.Random(2026)
    flushed = 0
    cuts = 0
    for run in range(POWER_CUTS):
        cut = rng.randrange(1, 60)
        code, out, _ = run_app(tmp_path, "lfs_log", {"client_id": "b"}, cut_at_op=cut, seed=run)
        lines = out.splitlines()
        intact = [int(line.split()[1]) for line in lines if line.startswith("intact")]
        assert intact, f"run {run}: the board did not get to verify the log:\n{out}"
        assert intact[0] >= flushed, f"run {run}: {flushed} records were flushed, {intact[0]} survived"
        assert "corrupt" not in out, out
        done = [int(line.split()[1]) for line in lines if line.startswith("flushed")]
        flushed = max([flushed, *done])
        if code == POWER_CUT_EXIT_STATUS:
            cuts += 1
        else:
            assert code == 0, out
    assert cuts >= POWER_CUTS * 3 // 4, f"only {cuts} of {POWER_CUTS} runs were cut: the cut points miss the writes"
    code, out, _ = run_app(tmp_path, "lfs_log", {"client_id": "b"})
    assert code == 0 and int(out.split("intact ")[1].split()[0]) >= flushed


def test_power_cut_at_a_random_moment_from_the_host(tmp_path: Path) -> None:
    conf = tmp_path / "config.json"
    conf.write_text(json.dumps({"client_id": "b", "mode": "recv", "bytes": 10, "timeout_ms": 60000}))
    with VirtualBoard(
        flash=tmp_path / "board.flash", config=conf, app=APPS / "uart_rate", faults=LineFaults(), stdout=subprocess.PIPE
    ) as board:
        board.start()
        time.sleep(0.5)
        board.power_cut()
        assert board.wait() == POWER_CUT_EXIT_STATUS


# --- serial line --------------------------------------------------------------------------------------------


def open_host_end(path: str) -> serial.Serial:
    """Open the host end of the board's UART as a user would, with pyserial (non-blocking reads)."""
    return serial.Serial(path, 115200, timeout=0)


def read_for(port: serial.Serial, total: int, timeout: float) -> tuple[bytes, list[tuple[float, int]]]:
    """Read until `total` bytes or the timeout; returns the bytes and (arrival time, count) per read."""
    data = bytearray()
    arrivals: list[tuple[float, int]] = []
    deadline = time.monotonic() + timeout
    while len(data) < total and time.monotonic() < deadline:
        ready, _, _ = select.select([port.fileno()], [], [], 0.1)
        if ready:
            chunk = port.read(4096)
            arrivals.append((time.monotonic(), len(chunk)))
            data += chunk
    return bytes(data), arrivals


def start_uart_board(tmp_path: Path, config: dict[str, object], faults: LineFaults) -> VirtualBoard:
    conf = tmp_path / "config.json"
    conf.write_text(json.dumps({"client_id": "b", **config}))
    board = VirtualBoard(
        flash=tmp_path / "board.flash",
        config=conf,
        app=APPS / "uart_rate",
        faults=faults,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    board.start()
    return board


@pytest.mark.parametrize("baud", [9600, 19200])
def test_baud_pacing_board_to_host(tmp_path: Path, baud: int) -> None:
    total = baud // 5  # two seconds of line time
    board = start_uart_board(tmp_path, {"mode": "send", "bytes": total, "linger_ms": 3000}, LineFaults(baud=baud))
    try:
        assert board.serial_port is not None
        with open_host_end(board.serial_port) as port:
            data, arrivals = read_for(port, total, 30)
    finally:
        board.close()
    assert data == b"\x55" * total
    # Rate from the first arrival to the last, not counting the bytes of the first arrival.
    elapsed = arrivals[-1][0] - arrivals[0][0]
    rate = (total - arrivals[0][1]) / elapsed
    assert_paced(rate, baud)


def test_baud_pacing_host_to_board(tmp_path: Path) -> None:
    baud, total = 9600, 1920
    board = start_uart_board(tmp_path, {"mode": "recv", "bytes": total}, LineFaults(baud=baud))
    try:
        assert board.serial_port is not None
        with open_host_end(board.serial_port) as port:
            before = read_until(board, lambda out: "listening" in out)
            port.write(b"\xaa" * total)
            assert board.process is not None
            out = before.encode() + board.process.communicate(timeout=30)[0]
    finally:
        board.close()
    words = out.decode().split()
    received, ms = int(words[words.index("received") + 1]), int(words[words.index("ms") + 1])
    assert received == total
    rate = (total - baud / 10 / 200) / (ms / 1000)  # the first 5 ms slice arrives at once
    assert_paced(rate, baud)


def assert_paced(rate: float, baud: int) -> None:
    """Pacing is a ceiling: the line never carries more than baud/10 bytes a second (10% for where the first and
    last slices fall). Below it, a loaded machine makes the reader late (measured once: 844 bytes/s at 9600 baud
    in a full suite on 2 cores), which is the host's speed, not the line's; half the rate still catches a line
    paced wrongly."""
    assert 0.5 * baud / 10 <= rate <= 1.10 * baud / 10, f"{rate:.0f} bytes/s at {baud} baud"


def test_bit_errors_drops_and_garbage_at_the_configured_rates(tmp_path: Path) -> None:
    total = 20000
    results = {}
    for name, faults in {
        "noise": LineFaults(bit_error_rate=1e-3, seed=1),
        "drop": LineFaults(drop_rate=0.01, seed=2),
        "garbage": LineFaults(garbage_rate=0.01, seed=3),
    }.items():
        sub = tmp_path / name
        sub.mkdir()
        board = start_uart_board(sub, {"mode": "send", "bytes": total, "fill": 0, "linger_ms": 2000}, faults)
        try:
            assert board.serial_port is not None
            want = total + 1000 if name == "garbage" else total
            with open_host_end(board.serial_port) as port:
                data, _ = read_for(port, want, 5)
        finally:
            board.close()
        results[name] = data
    flipped = sum(bin(b).count("1") for b in results["noise"])
    assert len(results["noise"]) == total
    assert 100 <= flipped <= 230, f"{flipped} bit errors in {total * 8} bits at BER 1e-3 (expected ~160)"
    assert 140 <= total - len(results["drop"]) <= 260, "1% of 20000 bytes should be dropped"
    assert results["drop"].count(0) == len(results["drop"])
    assert 140 <= len(results["garbage"]) - total <= 260, "1% of 20000 bytes should be inserted"


# --- command line -------------------------------------------------------------------------------------------


def test_cli_prints_its_stats_when_stopped_with_sigterm(tmp_path: Path) -> None:
    """`--stats` at every end: a board that runs until it is stopped, stopped as a harness or systemd stops it."""
    process = subprocess.Popen(
        [sys.executable, "-m", "host_bridge", "vboard", "--flash", str(tmp_path / "f.flash"), "--no-serial"]
        + ["--app", str(APPS / "forever"), "--stats"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.strip() == "running":
                break
        process.send_signal(signal.SIGTERM)
        rest = process.communicate(timeout=30)[0]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 128 + signal.SIGTERM, rest
    printed = {line.split(": ", 1)[0] for line in rest.splitlines() if "-stats: " in line}
    assert printed == {"flash-stats", "sleep-stats", "ap-stats"}, rest


def test_cli_wires_the_apps_parts_and_names_a_wiring_mistake(tmp_path: Path) -> None:
    """`--app` with a wiring.json boots with its parts (the thermostat's DHT22 reads 21.0 C); `--wiring` names another
    file, and a mistake in it stops the command before anything boots, saying what it is."""
    command = [sys.executable, "-m", "host_bridge", "vboard", "--flash", str(tmp_path / "f.flash"), "--no-serial"]
    command += ["--app", str(REPO / "examples" / "thermostat")]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    try:
        assert process.stdout is not None
        said = ""
        for line in process.stdout:
            said += line
            if line.startswith("temperature "):
                break
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "temperature 21.0 setpoint 20.0 heating off" in said, said
    wrong = tmp_path / "wiring.json"
    wrong.write_text(json.dumps({"parts": {"sensor": {"part": "dht22", "pin": 7}}}))
    result = subprocess.run([*command, "--wiring", str(wrong)], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert result.returncode != 0 and "GPIO 7 carries the ESP32's SPI flash" in result.stderr, result
    assert "temperature" not in result.stdout, result.stdout  # (nothing booted)


def test_cli_prints_serial_port_console_and_exit_status_and_resets(tmp_path: Path) -> None:
    conf = tmp_path / "config.json"
    conf.write_text(json.dumps({"client_id": "cli-board", "exit": 7, "reset_once": True}))
    result = subprocess.run(
        [sys.executable, "-m", "host_bridge", "vboard", "--flash", str(tmp_path / "f.flash"), "--config", str(conf)]
        + ["--app", str(APPS / "console"), "--stats"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    lines = result.stdout.splitlines()
    assert result.returncode == 7, result.stdout + result.stderr
    assert lines[0].startswith("serial-port: /dev/pts/")
    assert "boot 1 reset_cause 1 uid 24d7eb000001" in lines
    assert "boot 2 reset_cause 2 uid 24d7eb000001" in lines  # machine.reset() booted it again, HARD_RESET
    assert "config cli-board" in lines
    printed = {line.split(": ", 1)[0]: json.loads(line.split(": ", 1)[1]) for line in lines if "-stats: " in line}
    stats = printed["flash-stats"]
    assert stats["vfs"]["bytes_programmed"] > 0 and set(stats) == {"vfs", "romfs", "mqttlog", "nvs"}
    assert printed["sleep-stats"]["wakes"] == 0 and printed["ap-stats"]["outages"] == 0
    # The config went onto the board's flash: a third boot without --config still finds it there.
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "host_bridge",
            "vboard",
            "--flash",
            str(tmp_path / "f.flash"),
            "--app",
            str(APPS / "console"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert again.returncode == 7 and "config cli-board" in again.stdout.splitlines(), again.stdout + again.stderr


def test_cli_reports_a_missing_config_plainly(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "host_bridge", "vboard", "--flash", str(tmp_path / "f"), "--config", "/nonexistent"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "host-bridge vboard: /nonexistent does not exist" in result.stderr


def test_flash_timing_makes_programs_and_erases_take_a_real_chips_time(tmp_path: Path) -> None:
    """The opt-in W25Q32JV model: a page program by its bytes, a sector erase 45 ms. Eight erases cannot take
    less than 360 ms with it (a lower bound only: the machine may be slower, never faster)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("nor_flash", SHIMS / "nor_flash.py")
    assert spec is not None and spec.loader is not None
    nor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nor)
    assert nor.program_us(0, 1) == 30  # tBP1
    assert nor.program_us(0, 256) == 400  # a whole page: tPP
    assert nor.program_us(0, 101) == 280  # 30 + 100 x 2.5
    assert nor.program_us(250, 12) == 2 * (30 + 5 * 2.5)  # two pages, six bytes each (the int of 85.0)
    ops: list[list[object]] = [["erase", block] for block in range(8)]
    ops += [["program", 0, 250, "00" * 12], ["program", 1, 0, "00" * 101]]
    start = time.monotonic()
    code, out, _ = run_app(tmp_path, "flash_ops", {"client_id": "b"}, extra_env=ops_env(ops), flash_timing=True)
    assert code == 0 and out.count("ok erase") == 8 and out.count("ok program") == 2, out
    assert time.monotonic() - start >= 8 * 0.045
    # What a chip's CPU would have waited, counted by the model whatever the host did (figure 12 reads it per
    # publish()): the eight erases and the two programs above.
    assert f"model_us {8 * 45000 + 85 + 280}" in out, out


def test_an_application_with_packages_boots_as_mip_lays_it_out(tmp_path: Path) -> None:
    """--app keeps the folder's layout (lib/greet/__init__.py, compiled and imported as greet) and --put a path
    with folders (data/note.txt): an application of packages boots as deployed."""
    note = tmp_path / "note.txt"
    note.write_text("noted\n")
    result = subprocess.run(
        [sys.executable, "-m", "host_bridge", "vboard", "--flash", str(tmp_path / "f.flash")]
        + ["--app", str(APPS / "packaged"), "--put", f"{note}:data/note.txt"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "packaged hello world world noted" in result.stdout.splitlines(), result.stdout


def test_a_flash_image_from_another_emulation_boots_after_an_upgrade(tmp_path: Path) -> None:
    """The pool of interned names a flash image remembers (FLASH.qstr) belongs to the emulation that found it. An
    image whose answer came from another (an older release's shims: its own format, a name far past where this
    emulation's pool starts) watches every name again and boots; the answer is then this emulation's."""
    code, out, _ = run_app(tmp_path, "console", {"client_id": "up"})
    assert code == 0, out
    cache = tmp_path / "board.flash.qstr"
    key, known, size = cache.read_text().split()
    cache.write_text(f"{int(known) + 3000} {size}")  # an older release's answer, which it wrote without a key
    code, out, _ = run_app(tmp_path, "console", {"client_id": "up"})
    assert code == 0 and "config up" in out, out
    assert cache.read_text().split() == [key, known, size]


def nvs_copies(flash: Path) -> list[tuple[int, dict[str, object]]]:
    """The whole copies of NVS in a flash file's nvs partition (after the data partitions: two slots of half of
    it, each a header, magic b"vNVS", sequence number, length and CRC-32, then its JSON), newest first."""
    image = flash.read_bytes()[SIM.flash_size :]
    slot = len(image) // 2
    copies = []
    for start in (0, slot):
        magic, seq, length, crc = struct.unpack_from("<4sIII", image, start)
        body = image[start + 16 : start + 16 + length]
        if magic == b"vNVS" and zlib.crc32(body) == crc:
            copies.append((seq, json.loads(body)))
    return sorted(copies, key=lambda copy: -copy[0])


def test_nvs_is_kept_in_the_flash_file_where_the_chip_has_it(tmp_path: Path) -> None:
    """esp32.NVS commits into the flash file's nvs partition, where esp.flash_read() finds it at the chip's NVS
    offset (the sim's table starts its data at 0: after its last partition) and Partition.find(label="nvs") names
    it: copying the flash file copies NVS with it."""
    code, out, _ = run_app(tmp_path, "nvs_image", {"client_id": "n", "nvs_at": SIM.nvs().offset})
    assert code == 0, out
    assert "at the chip's nvs b'\\xff\\xff\\xff\\xff'" in out, out  # erased: nothing committed yet
    assert "count -4354" in out and "committed 1" in out, out  # ESP_ERR_NVS_NOT_FOUND on a new flash
    assert "partition 2 24576 nvs" in out, out  # subtype nvs, ESP32_GENERIC's 24 KiB
    assert nvs_copies(tmp_path / "board.flash")[0] == (1, {"app": {"count": ["i32", 1], "tag": ["blob", "7431"]}})
    moved = tmp_path / "elsewhere.flash"
    shutil.copy(tmp_path / "board.flash", moved)
    code, out, _ = run_app(tmp_path, "nvs_image", {"client_id": "n", "nvs_at": SIM.nvs().offset}, flash=moved)
    assert code == 0 and "count 1" in out and "committed 2" in out, out
    assert "at the chip's nvs b'vNVS'" in out, out  # the older copy's slot first: still whole
    assert [seq for seq, _ in nvs_copies(moved)] == [2, 1]


def test_a_power_cut_inside_an_nvs_commit_leaves_the_copy_before_it(tmp_path: Path) -> None:
    """A commit writes the slot that does not hold the newest copy, its header last: a power cut at any of its
    flash operations leaves either the copy before it or the new one, never none and never a torn one."""
    committed = -4354  # ESP_ERR_NVS_NOT_FOUND: nothing committed yet
    cuts = 0
    for run, cut in enumerate(range(1, 22)):
        code, out, _ = run_app(tmp_path, "nvs_image", {"client_id": "n", "commits": 3}, cut_at_op=cut, seed=run)
        read = [int(line.split()[1]) for line in out.splitlines() if line.startswith("count ")]
        said = [int(line.split()[1]) for line in out.splitlines() if line.startswith("committed")]
        # (a cut among the boot's own writes comes before the application reads)
        assert not read or read[0] in (committed, max(committed, 0) + 1), f"cut at op {cut}: {committed}, {out}"
        committed = max([committed, *read, *said])
        cuts += code == POWER_CUT_EXIT_STATUS
    assert cuts >= 15, f"only {cuts} runs were cut: the cut points miss the commits"
    code, out, _ = run_app(tmp_path, "nvs_image", {"client_id": "n", "commits": 0})
    assert code == 0 and f"count {committed}" in out, out


def test_nvs_kept_beside_an_older_flash_file_moves_into_it(tmp_path: Path) -> None:
    """A flash file made before it held NVS (the data partitions alone), with NVS in FLASH.nvs beside it, boots:
    the file gains an erased nvs partition, the values kept beside it read back, and the first commit moves them
    into the file."""
    create_flash(tmp_path / "board.flash", SIM.flash_size)
    (tmp_path / "board.flash.nvs").write_text(json.dumps({"app": {"count": ["i32", 41]}}))
    code, out, _ = run_app(tmp_path, "nvs_image", {"client_id": "n"})
    assert code == 0 and "count 41" in out and "committed 42" in out, out
    assert (tmp_path / "board.flash").stat().st_size == SIM.flash_size + SIM.nvs().size
    assert not (tmp_path / "board.flash.nvs").exists()
    assert nvs_copies(tmp_path / "board.flash")[0][1]["app"]["count"] == ["i32", 42]  # type: ignore[index]


def test_a_flash_file_of_another_size_is_refused_with_what_to_do(tmp_path: Path) -> None:
    """A flash file neither of the board's data partitions alone (made before it held NVS) nor with its NVS:
    refused before anything boots, naming the option that says its size."""
    create_flash(tmp_path / "board.flash", 2 * SIM.flash_size)
    with pytest.raises(VBoardError, match=r"holds 4194304 bytes.*--flash-size"):
        VirtualBoard(flash=tmp_path / "board.flash")
    assert (tmp_path / "board.flash").stat().st_size == 2 * SIM.flash_size  # untouched
