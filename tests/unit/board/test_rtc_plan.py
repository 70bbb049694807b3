"""RTC memory as the board application shares it (firmware/app/sampler.py, docs/low-power.md): the plan's part
first, the application's after it, each kept when the other is written; and the plan's hint tells a sending wake
where its journal's open may resume (board_open.resume() reads it without loading sampler.py)."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from host_bridge import assets

HINT = [3, "444d514a0400000000000007aabbccdd", 802, 793, 293, 60, 293, 293, 4, 5]


class FakeRTC:
    memory_bytes = b""

    def memory(self, data: bytes | None = None) -> bytes | None:
        if data is None:
            return FakeRTC.memory_bytes
        if len(data) > 2048:
            raise ValueError("buffer too long")
        FakeRTC.memory_bytes = bytes(data)
        return None


@pytest.fixture
def chip(monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    """A chip's machine module (RTC memory, the reset cause), and sampler and board_open loaded against it."""
    FakeRTC.memory_bytes = b""
    machine = SimpleNamespace(RTC=FakeRTC, DEEPSLEEP_RESET=4, reset_cause=lambda: 4)
    monkeypatch.setitem(sys.modules, "machine", machine)
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


def read_plan() -> Any:
    """The plan in RTC memory as the sampling wake reads it (sampler.plan_size's layout), or None."""
    memory = FakeRTC.memory_bytes
    try:
        return json.loads(memory[3 : 3 + ((memory[1] << 8) | memory[2])])
    except (ValueError, IndexError):
        return None


def plan(ring: Any = None) -> dict[str, Any]:
    return {"v": 1, "left": 5, "taken": 0, "per_send": 10, "queued": 1, "limit": 64, "max_age": 0, "every": 60000,
            "oldest": 0, "ring": ring}  # fmt: skip


def test_the_plan_and_the_applications_bytes_keep_each_other(chip: SimpleNamespace) -> None:
    sampler = chip.sampler
    sampler.app_memory(b"counter=7")  # before any plan
    assert sampler.app_memory() == b"counter=7" and read_plan() is None
    sampler.keep(plan(HINT), 0)
    assert sampler.app_memory() == b"counter=7"  # the plan written: the application's bytes kept
    sampler.app_memory(b"counter=8")
    assert read_plan() == plan(HINT)  # the application's written: the plan kept
    assert FakeRTC.memory_bytes[:1] == sampler.SAMPLE
    with pytest.raises(ValueError):
        sampler.app_memory(bytes(2048))  # the two pass RTC memory's 2,048 bytes
    sampler.write(sampler.NONE)
    assert sampler.app_memory() == b"counter=8" and read_plan() is None


def test_a_sending_wake_reads_where_the_journal_resumes_from_the_plan(chip: SimpleNamespace) -> None:
    chip.sampler.keep(plan(HINT), 0)
    chip.sampler.app_memory(b"the application's")
    assert chip.board_open.resume() == (3, 7, 5)  # the head sector, its sequence number, the oldest live one's


def test_no_hint_no_plan_or_a_power_on_leaves_the_whole_open(chip: SimpleNamespace) -> None:
    for memory in (lambda: chip.sampler.keep(plan(None), 0), lambda: chip.sampler.write(chip.sampler.NONE)):
        memory()
        assert chip.board_open.resume() is None
    FakeRTC.memory_bytes = b'S\x00\x05{"v":' + bytes(100)  # spoiled
    assert chip.board_open.resume() is None
    chip.sampler.keep(plan(HINT), 0)
    chip.machine.reset_cause = lambda: 1  # a power-on (RTC memory would be lost; a reset keeps it)
    assert chip.board_open.resume() is None
