"""RTC memory as the board application shares it (firmware/app/sampler.py, docs/low-power.md): the library's hint
first (dmqtt/wake.py), then the application's part, which holds the plan and after it the sensor hook's bytes,
each kept when another is written; and the hint tells a sending wake where its journal's open may resume
(board_open.resume() reads it through dmqtt.wake)."""

from __future__ import annotations

import importlib.util
import struct
import sys
import time
from collections.abc import Iterator
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from dmqtt import wake
from host_bridge import assets
from tests.unit.dmqtt.test_wake import FakeRTC, awake, sending_wake
from tests.unit.nor import NorPartition


@pytest.fixture
def chip(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    """A chip's machine module (RTC memory, the reset cause), and sampler and board_open loaded against it (the
    board's u-named built-ins as CPython's)."""
    FakeRTC.memory_bytes = b""
    machine = SimpleNamespace(RTC=FakeRTC, DEEPSLEEP_RESET=4, reset_cause=lambda: 4)
    for name, module in (("machine", machine), ("umachine", machine), ("ustruct", struct), ("utime", time)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.syspath_prepend(str(assets.APP))  # (board_open imports board_app)
    monkeypatch.delitem(sys.modules, "board_app", raising=False)
    yield SimpleNamespace(machine=machine, sampler=load("sampler"), board_open=load("board_open"))
    sys.modules.pop("board_app", None)


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, assets.APP / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plan(**changes: Any) -> dict[str, Any]:
    found = {"dev": "shed-1", "topic": "sensors/shed-1/telemetry", "qos": 1, "version": 5, "slots": 64, "left": 5,
             "size": 100, "every": 60000, "per_send": 10, "limit": 64, "max_age": 0, "confirm": None, "boot": 3,
             "seq": 4, "taken": 0, "queued": 1, "oldest": 0, "sensor": "aht20.temperature", "refused": 0,
             "link": ""}  # fmt: skip
    return found | changes


def test_the_hint_the_plan_and_the_hooks_bytes_keep_each_other(chip: SimpleNamespace) -> None:
    sampler = chip.sampler
    sampler.app_memory(b"counter=7")  # before any plan
    assert sampler.app_memory() == b"counter=7" and sampler.plan() is None
    sampler.keep(plan(), 0)
    assert sampler.app_memory() == b"counter=7"  # the plan written: the hook's bytes kept
    sampler.app_memory(b"counter=8")
    assert sampler.plan() == plan()  # the hook's written: the plan kept
    assert wake.memory()[:1] == sampler.SAMPLE
    part = NorPartition(6)
    sending_wake(part, readings=3, acked=1)
    session = awake(part)
    wake.keep(session)  # the library's hint, before the application's part: both kept
    assert sampler.plan() == plan() and sampler.app_memory() == b"counter=8"
    assert chip.board_open.resume() == wake.point(wake.hint(session))
    with pytest.raises(ValueError):
        sampler.app_memory(bytes(2048))  # the three pass RTC memory's 2,048 bytes
    sampler.write(sampler.NONE)
    assert sampler.app_memory() == b"counter=8" and sampler.plan() is None
    # boot.py's test of the kind byte, after the hint (it reads RTC memory without loading either module)
    sampler.keep(plan(), 0)
    memory = FakeRTC.memory_bytes
    assert memory[3 + ((memory[1] << 8) | memory[2]) :][:1] == sampler.SAMPLE


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"confirm": False},
        {"confirm": True, "refused": 6, "left": -1},
        {"sensor": None, "oldest": 2**31 + 5},
        {"link": "24d7eb00aa0106" + "k" * 16},
    ],
)
def test_the_plan_reads_back_as_written(chip: SimpleNamespace, changes: dict[str, Any]) -> None:
    chip.sampler.keep(plan(**changes), 0)
    assert chip.sampler.plan() == plan(**changes)


def test_a_plan_cut_short_or_of_another_format_is_none(chip: SimpleNamespace) -> None:
    """The wake then sends (boot.py): a spoiled plan is never read as numbers it does not hold."""
    sampler = chip.sampler
    sampler.keep(plan(), 0)
    memory = wake.memory()
    for spoiled in (memory[:-1], memory[:3] + bytes((sampler.PLAN + 1,)) + memory[4:], memory[:30]):
        wake.memory(spoiled)
        assert sampler.plan() is None


def test_no_hint_or_a_power_on_leaves_the_whole_open(chip: SimpleNamespace) -> None:
    chip.sampler.keep(plan(), 0)
    assert chip.board_open.resume() is None  # a plan, no hint
    FakeRTC.memory_bytes = b'S\x00\x05{"v":' + bytes(100)  # not laid out by the library
    assert chip.board_open.resume() is None
    part = NorPartition(6)
    sending_wake(part, readings=3, acked=1)
    wake.keep(awake(part))
    assert chip.board_open.resume() is not None
    chip.machine.reset_cause = lambda: 1  # a power-on (RTC memory would be lost; a reset keeps it)
    assert chip.board_open.resume() is None
