"""The bench's foundation: a virtual board lives exactly as long as whatever started it, one flash file has one
board, flash failures are journal errors (never a reconnect loop), a damaged journal is reported at boot, and
the plugin fails a test whose board outlives it. Plus the plugin's options: a real-board run collects the same
scenarios as a virtual one, and real-board-only tests are skipped (not passed) on sim."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dmqtt import journal_record as rec
from host_bridge.boards.definition import BoardDefinition
from host_bridge.errors import VBoardError
from host_bridge.hil.virtual_dut import VirtualDut
from host_bridge.vboard import VirtualBoard
from tests.conftest import REPO

pytest_plugins = ["pytester"]

SIM = BoardDefinition.load("sim")
MQTTLOG = next(p for p in SIM.partitions if p.label == "mqttlog")


def board_pids_on(flash: Path) -> list[int]:
    """Processes (of this machine) running a virtual board on `flash`, found through their environment."""
    wanted = f"VBOARD_FLASH={flash.resolve()}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def ended(pids: list[int]) -> bool:
    """Every one of `pids` has exited: gone, or a zombie (whose files, the flash lock among them, are closed).
    Its environment is no witness: the kernel drops a dying process's memory before it closes its files."""
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat.rpartition(")")[2].split()[0] not in ("Z", "X"):
            return False
    return True


def wait_until(check: object, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def start_cli(tmp_path: Path, flash: Path) -> subprocess.Popen[bytes]:
    """`host-bridge vboard` with a board that keeps trying an unreachable broker (it never ends by itself)."""
    conf = tmp_path / "config.json"
    conf.write_text(json.dumps({"client_id": "orphan", "broker": "127.0.0.1:1", "publish": {"qos": 1, "count": 5}}))
    cli = subprocess.Popen(
        [sys.executable, "-m", "host_bridge", "vboard", "--flash", str(flash), "--config", str(conf)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=REPO,
    )
    assert wait_until(lambda: board_pids_on(flash)), "the board did not start"
    return cli


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "SIGHUP"])
def test_killing_the_vboard_command_in_any_way_leaves_no_board(tmp_path: Path, how: str) -> None:
    flash = tmp_path / "b.flash"
    cli = start_cli(tmp_path, flash)
    board = board_pids_on(flash)
    cli.send_signal(getattr(signal, how))
    cli.wait(10)
    assert wait_until(lambda: ended(board), 5), f"board {board} outlived `host-bridge vboard` ({how})"
    # The lock went with them: the flash file takes a new board at once.
    VirtualBoard(flash=flash).close()


def test_a_second_board_on_one_flash_is_refused_and_the_first_is_unharmed(tmp_path: Path) -> None:
    flash = tmp_path / "b.flash"
    cli = start_cli(tmp_path, flash)
    try:
        first = board_pids_on(flash)
        second = subprocess.run(
            [sys.executable, "-m", "host_bridge", "vboard", "--flash", str(flash)],
            capture_output=True,
            text=True,
            timeout=30,
            cwd=REPO,
        )
        assert second.returncode == 2
        assert f"{flash} is in use by virtual board pid {first[0]}" in second.stderr
        assert "one flash file has one board" in second.stderr
        with pytest.raises(VBoardError, match="in use by"):
            VirtualBoard(flash=flash)  # from Python too
        time.sleep(0.5)
        assert board_pids_on(flash) == first and cli.poll() is None  # the first board runs on
    finally:
        cli.terminate()
        cli.wait(10)


def test_a_board_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    """SIGKILL of a harness (here a Python process using VirtualBoard) leaves no board behind."""
    flash = tmp_path / "b.flash"
    conf = tmp_path / "config.json"
    # No serial line (whose pty would die with the harness and take the board along): the board only keeps
    # trying a broker that is not there.
    conf.write_text(json.dumps({"client_id": "b", "broker": "127.0.0.1:1", "publish": {"qos": 1, "count": 5}}))
    script = (
        "import sys, time; from host_bridge.vboard import VirtualBoard\n"
        f"b = VirtualBoard(flash={str(flash)!r}, config={str(conf)!r})\n"
        "b.start(); print('started', flush=True); time.sleep(60)\n"
    )
    harness = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, env={**os.environ})
    assert harness.stdout is not None and harness.stdout.readline().strip() == b"started"
    time.sleep(1)
    board = board_pids_on(flash)
    assert board, "the board should still be trying to connect"
    harness.kill()
    harness.wait(10)
    assert wait_until(lambda: ended(board), 5), f"board {board} outlived its harness"


def run_dut(tmp_path: Path, config: dict[str, object], **options: object) -> tuple[str, int | None]:
    dut = VirtualDut("d", SIM, flash=tmp_path / "board.flash", console_log=tmp_path / "console.log", **options)  # type: ignore[arg-type]
    try:
        dut.configure(config)
        dut.start()
        end = dut.wait_boot(60)
        return end.console, end.status
    finally:
        dut.close()


def test_a_failing_flash_is_a_journal_error_not_a_reconnect_loop(tmp_path: Path, mosquitto: object) -> None:
    """The journal partition fails (EIO) from its 3rd operation on: the board says `journal error` with the
    offset, and stops (exit 5) instead of reconnecting and retrying the same program for ever."""
    config = {"client_id": "badflash", "broker": mosquitto.address, "publish": {"qos": 1, "count": 20}}  # type: ignore[attr-defined]
    started = time.monotonic()
    console, status = run_dut(tmp_path, config, fail_flash=("mqttlog", 3))
    assert status == 5, console
    assert "journal error: flash program failed at journal offset 0x" in console, console
    assert "connection lost" not in console and console.count("injected fault") == 1, console
    assert time.monotonic() - started < 20


def test_a_damaged_journal_is_detected_at_boot_and_reported(tmp_path: Path, mosquitto: object) -> None:
    config = {
        "client_id": "damaged",
        "broker": mosquitto.address,
        "publish": {"qos": 1, "count": 60, "payload_bytes": 120},
    }  # type: ignore[attr-defined]
    console, status = run_dut(tmp_path, config)
    assert status == 0, console
    # Damage a record in the oldest sector (sector 0 of the ring), past its 16-byte header.
    with open(tmp_path / "board.flash", "r+b") as f:
        f.seek(MQTTLOG.offset + 16 + 40)
        byte = f.read(1)
        f.seek(MQTTLOG.offset + 16 + 40)
        f.write(bytes([byte[0] & 0x0F]))  # clearing bits: what a failing cell or a stray program does
    console, status = run_dut(tmp_path, config)
    assert status == 0, console
    # The sector starts with its META snapshot after the header; the damaged byte is in the record after it.
    after_meta = 16 + rec.OVERHEAD + rec.META_SIZE
    assert f"journal: damaged record at 0x{after_meta:x}; the rest of sector 0 skipped" in console, console


def test_the_plugin_fails_a_test_whose_board_outlives_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        f"""
        import json
        from host_bridge.vboard import VirtualBoard, LineFaults

        def test_forgets_its_board(tmp_path):
            conf = tmp_path / "config.json"
            conf.write_text(json.dumps({{"client_id": "b", "mode": "recv", "bytes": 10, "timeout_ms": 60000}}))
            board = VirtualBoard(flash=tmp_path / "b.flash", config=conf, faults=LineFaults(),
                                 app={str(REPO / "tests" / "vboard_apps" / "uart_rate")!r})
            board.start()  # never closed
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*board process(es) outlived the test that started them (now killed)*virtual board on*"]
    )


def collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    result = pytester.runpytest_subprocess(
        str(REPO / "tests" / "hil"), "--collect-only", "-q", "-p", "no:cacheprovider", *args
    )
    return sorted(line.split("::", 1)[1] for line in result.outlines if "::" in line)


def test_a_real_board_run_collects_the_same_scenarios(pytester: pytest.Pytester) -> None:
    sim = collected(pytester)
    real = collected(pytester, "--hil-dut", "/dev/ttyUSB0", "--hil-board", "esp32-devkitc")
    assert real == sim and len(sim) > 30


def test_options_are_checked_once_with_a_plain_message(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--hil-dut", "/dev/ttyUSB0", "--collect-only", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--hil-dut /dev/ttyUSB0: give its --hil-board*"])
    result = pytester.runpytest_subprocess(
        "--hil-dut", "/dev/ttyUSB0", "--hil-board", "esp99", "--collect-only", "-p", "no:cacheprovider"
    )
    result.stderr.fnmatch_lines(["*no board definition at*esp99*esp32-devkitc*"])


def test_real_board_tests_are_skipped_with_a_reason_on_sim(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.hil_real
        def test_needs_hardware(hil_dut):
            raise AssertionError("must not run on sim")
        """
    )
    result = pytester.runpytest_subprocess("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*needs a real board: run with --hil-dut PORT --hil-board NAME*"])
