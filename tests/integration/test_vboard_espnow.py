"""ESP-NOW on the virtual board, as the ESP32 port's `espnow` module has it, over an air the boards of one host share
(host_bridge/vboard/air.py): a peer's radio acknowledges a frame when it is powered, active on the frame's channel and
in range; loss, RSSI and range per link; encrypted peers; a receive buffer that drops what does not fit; asyncio and
irq() readers; disturbances scheduled on a board's own events. docs/virtual-board.md ("ESP-NOW") says what differs."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from host_bridge.vboard.air import Air, LinkModel
from host_bridge.vboard.events import EventSpec
from host_bridge.vboard.runner import VirtualBoard
from tests.conftest import APPS

A = "24d7eb0000a1"
B = "24d7eb0000b2"


def lab_board(tmp: Path, name: str, uid: str, air: Air | None, **lab: Any) -> VirtualBoard:
    """A board running tests/vboard_apps/espnow_lab with its lab.json."""
    app = tmp / f"app-{name}"
    shutil.copytree(APPS / "espnow_lab", app)
    (app / "lab.json").write_text(json.dumps(lab))
    return VirtualBoard(
        tmp / f"{name}.flash", app=app, uid=uid, air=air, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


def on_air(board: VirtualBoard) -> None:
    """Until the board's radio is on (its WiFi interface active): what it is sent from then on, it hears."""
    deadline = time.monotonic() + 60
    while board.air is not None and not board.air.radios().get(board.uid):
        assert board.process is not None and board.process.poll() is None, "the board ended before its radio was on"
        assert time.monotonic() < deadline, "the board's radio did not come on within 60 s"
        time.sleep(0.02)


def run(*boards: VirtualBoard) -> list[str]:
    """Start the boards in order, each once the one before has its radio on, then their outputs."""
    try:
        for i, board in enumerate(boards):
            board.start()
            if i < len(boards) - 1:
                on_air(board)
        outs = [board.output(60) for board in boards]
        for board, out in zip(boards, outs, strict=True):
            assert board.wait(10) == 0, out
        return outs
    finally:
        for board in boards:
            board.close()


def test_the_api_answers_as_the_esp32_port(tmp_path: Path) -> None:
    """One board, alone: ESP-IDF's error names, the 250-byte frame, 20 peers of which 6 encrypted, no encryption to
    broadcast, the home channel, a unicast frame nobody acknowledges (False) and a broadcast that goes (True)."""
    board = VirtualBoard(
        tmp_path / "b.flash", app=APPS / "espnow_api", stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    out = run(board)[0]
    for line in (
        "inactive send ESP_ERR_ESPNOW_NOT_INIT",
        "no interface ESP_ERR_ESPNOW_IF",
        "unregistered ESP_ERR_ESPNOW_NOT_FOUND",
        "again ESP_ERR_ESPNOW_EXIST",
        "too long ValueError",
        "nobody there False",
        "not waiting True",
        "broadcast True",
        "broadcast encrypted ESP_ERR_ESPNOW_ARG",
        "stats (3, 0, 1, 0, 0)",
        "full ESP_ERR_ESPNOW_FULL",
        "count (20, 0)",
        "encrypted full ESP_ERR_ESPNOW_FULL",
        "count (8, 6)",
        "deleted twice ESP_ERR_ESPNOW_NOT_FOUND",
        "other channel ESP_ERR_ESPNOW_CHAN",
        "channel 6",
        "nothing (None, None) (None, None) 0 False",
        "config 20 1024",
        "iterated (None, None)",
        "constants 250 16 6 20 6",
        "after ESP_ERR_ESPNOW_NOT_INIT",
    ):
        assert line in out, f"{line!r} not in:\n{out}"


def test_two_boards_exchange_frames_and_read_the_link_rssi(tmp_path: Path) -> None:
    with Air() as air:
        air.link(A, B, rssi=-67)
        echo = lab_board(tmp_path, "a", A, air, role="echo", peer=B)
        send = lab_board(tmp_path, "b", B, air, role="send", peer=A)
        echo_out, send_out = run(echo, send)
        assert air.stats.acknowledged == 10 and air.stats.lost == 0, air.stats
        # Each echo answered the frame the echoing board had just taken: its interpreter's work in between, told to
        # the air (figure 14 charges a node's wait for its gateway's answer by it).
        turnarounds = air.turnarounds.get(A, [])
        assert len(turnarounds) == 5 and all(0 < us < 1_000_000 for us in turnarounds), air.turnarounds
    assert "echoed 5 stats (5, 5, 0, 5, 0)" in echo_out, echo_out
    assert "acked 5 answers 5 [b'PING 0 ', b'PING 1 ']" in send_out, send_out
    assert "rssi -67" in send_out, send_out


def test_aioespnow_and_irq_readers(tmp_path: Path) -> None:
    for role in ("aio", "irq"):
        with Air() as air:
            echo = lab_board(tmp_path / role, "a", A, air, role=role, peer=B)
            send = lab_board(tmp_path / role, "b", B, air, role="send", peer=A)
            echo_out, send_out = run(echo, send)
        assert "echoed 5 stats (5, 5, 0, 5, 0)" in echo_out, (role, echo_out)
        assert "acked 5 answers 5" in send_out, (role, send_out)


def test_no_acknowledgement_off_channel_out_of_range_or_powered_off(tmp_path: Path) -> None:
    """A peer on another channel, out of range or not running hears nothing and acknowledges nothing."""
    with Air() as air:
        echo = lab_board(tmp_path / "chan", "a", A, air, role="echo", peer=B, channel=6, quiet_ms=2000)
        send = lab_board(tmp_path / "chan", "b", B, air, role="send", peer=A, channel=1, answers_ms=200)
        echo_out, send_out = run(echo, send)
    assert "acked 0 answers 0" in send_out and "(5, 0, 5, 0, 0)" in send_out, send_out
    assert "echoed 0 stats (0, 0, 0, 0, 0)" in echo_out, echo_out
    with Air() as air:
        air.link(A, B, in_range=False)
        echo = lab_board(tmp_path / "range", "a", A, air, role="echo", peer=B, quiet_ms=2000)
        send = lab_board(tmp_path / "range", "b", B, air, role="send", peer=A, answers_ms=200)
        echo_out, send_out = run(echo, send)
    assert "acked 0 answers 0" in send_out and "echoed 0" in echo_out, (send_out, echo_out)
    with Air() as air:
        send = lab_board(tmp_path / "off", "b", B, air, role="send", peer=A, answers_ms=200)
        send_out = run(send)[0]
        assert air.stats.lost == 5, air.stats
    assert "acked 0 answers 0 [] stats (5, 0, 5, 0, 0)" in send_out, send_out


def test_a_lossy_link_loses_frames_and_acknowledgements(tmp_path: Path) -> None:
    """At 30% loss each way some frames are not heard, and some heard are reported failed (their acknowledgement
    lost): the receiver heard more than the sender was told."""
    with Air(LinkModel(loss=0.3), seed=7) as air:
        echo = lab_board(tmp_path, "a", A, air, role="echo", peer=B, count=40, quiet_ms=2000)
        send = lab_board(tmp_path, "b", B, air, role="send", peer=A, count=40, answers_ms=1000)
        echo_out, send_out = run(echo, send)
    acked = int(send_out.split("acked ")[1].split()[0])
    heard = int(echo_out.split("echoed ")[1].split()[0])
    assert 10 < acked < heard < 40, (echo_out, send_out)


def test_encrypted_peers_read_only_with_the_same_key(tmp_path: Path) -> None:
    key = "0123456789abcdef"
    with Air() as air:
        echo = lab_board(tmp_path / "same", "a", A, air, role="echo", peer=B, lmk=key)
        send = lab_board(tmp_path / "same", "b", B, air, role="send", peer=A, lmk=key)
        echo_out, send_out = run(echo, send)
    assert "echoed 5" in echo_out and "acked 5 answers 5" in send_out, (echo_out, send_out)
    with Air() as air:
        echo = lab_board(tmp_path / "other", "a", A, air, role="echo", peer=B, lmk="fedcba9876543210", quiet_ms=3000)
        send = lab_board(tmp_path / "other", "b", B, air, role="send", peer=A, lmk=key, answers_ms=200)
        echo_out, send_out = run(echo, send)
    # The radio acknowledges before decrypting: the sender is told its frames went; the receiver drops them.
    assert "acked 5 answers 0" in send_out, send_out
    assert "echoed 0 stats (0, 0, 0, 5, 5)" in echo_out, echo_out


def test_a_full_receive_buffer_drops_frames_yet_acknowledges_them(tmp_path: Path) -> None:
    with Air() as air:
        sink = lab_board(tmp_path, "a", A, air, role="sink", peer=B, wait_ms=3000)
        send = lab_board(tmp_path, "b", B, air, role="send", peer=A, pad=200, answers_ms=100)
        sink_out, send_out = run(sink, send)
    assert "acked 5" in send_out, send_out
    assert "kept 2 stats (0, 0, 0, 5, 3)" in sink_out, sink_out  # 528 bytes hold two frames of 208


def test_disturbances_on_a_board_s_own_events(tmp_path: Path) -> None:
    """The link lost at the sender's third send; the echo board powered off while the sender is held at its
    second: frames from then on are not acknowledged, whatever the host's load."""
    with Air() as air:
        air.at(EventSpec("send", 3), lambda: air.link(A, B, in_range=False), board=B)
        echo = lab_board(tmp_path / "lost", "a", A, air, role="echo", peer=B, quiet_ms=3000)
        send = lab_board(tmp_path / "lost", "b", B, air, role="send", peer=A, answers_ms=500)
        echo_out, send_out = run(echo, send)
        assert air.stats.event_actions == 1
    assert "acked 2 answers" in send_out and "echoed 2" in echo_out, (send_out, echo_out)
    with Air() as air:
        hold = air.hold_at(EventSpec("send", 2), board=B)
        echo = lab_board(tmp_path / "cut", "a", A, air, role="echo", peer=B)
        send = lab_board(tmp_path / "cut", "b", B, air, role="send", peer=A, answers_ms=200)
        try:
            echo.start()
            on_air(echo)
            send.start()
            assert hold.reached.wait(60)
            echo.power_cut()
            hold.release()
            send_out = send.output(60)
            assert send.wait(10) == 0, send_out
        finally:
            hold.release()
            echo.close()
            send.close()
    # (the echo's answer to the first frame may or may not have left before its power went)
    assert "acked 1 answers" in send_out and "(5, 1, 4," in send_out, send_out
