"""Every module a board may load stays within its .mpy budget (firmware/code_budget.json): on the deployed install
path its code is in the heap, so a module that grows eats into the heap budget of docs/install-paths.md."""

from __future__ import annotations

import json

from host_bridge.boards.firmware_build import board_modules, stage_firmware
from tests.conftest import FIRMWARE


def test_every_module_the_board_loads_is_within_its_budget() -> None:
    budgets = json.loads((FIRMWARE / "code_budget.json").read_text())
    budget = budgets["modules"]
    assert set(budgets["raised"]) <= set(budget), "a raised budget gives its reason under its module's name"
    staged = stage_firmware()
    shipped = {str(p.relative_to(staged)): p.stat().st_size for p in staged.rglob("*.mpy")}
    packages, modules = board_modules(FIRMWARE)
    expected = {name.replace(".", "/") + ".mpy" for name in packages + modules}
    assert set(shipped) == expected == set(budget), "every module the board gets has a budget, and no other"
    over = {name: (size, budget[name]) for name, size in shipped.items() if size > budget[name]}
    assert not over, f"modules over their .mpy budget (bytes, budget): {over}"
