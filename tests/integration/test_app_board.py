"""The hil_app_board fixture through a board's life: expect() reads the console forward through a deep sleep's wake
and a reset the board makes by itself, an application that returns has ended (not failed), and after a power cut
start() is the power coming back."""

from __future__ import annotations

from collections.abc import Callable

from host_bridge.hil.app_board import AppBoard
from tests.conftest import APPS


def test_expect_follows_the_board_through_wakes_resets_and_a_power_cut(
    hil_app_board: Callable[..., AppBoard],
) -> None:
    board = hil_app_board(APPS / "app_life")
    board.expect(r"^boot 1$")
    board.expect(r"^woke True$")  # (after the deep sleep, the board's second boot)
    board.expect(r"^boot 3$")  # (after the reset it made)
    board.expect(r"^done$")
    assert board.end() == "ended"
    board.power_cut()
    board.start()
    board.expect(r"^boot 4$")
    assert board.end() == "ended"
    assert board.console().count("done") == 2
