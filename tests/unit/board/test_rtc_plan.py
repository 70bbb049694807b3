"""RTC memory as the board application shares it (firmware/app/sampler.py, docs/low-power.md): the plan's part
first, the application's after it, each kept when the other is written; and the plan's header tells a sending
wake where its journal's open may resume (board_open.resume() reads it without loading sampler.py), as
ring_tail.resume() gives it from the hint."""

from __future__ import annotations

import importlib.util
import json
import sys
from array import array
from collections.abc import Iterator
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from dmqtt import journal, ring_tail
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


def plan(ring: Any = None) -> dict[str, Any]:
    return {"v": 2, "left": 5, "taken": 0, "per_send": 10, "queued": 1, "limit": 64, "max_age": 0, "every": 60000,
            "oldest": 0, "ring": ring}  # fmt: skip


def test_the_plan_and_the_applications_bytes_keep_each_other(chip: SimpleNamespace) -> None:
    sampler = chip.sampler
    sampler.app_memory(b"counter=7")  # before any plan
    assert sampler.app_memory() == b"counter=7" and sampler.plan() is None
    sampler.keep(plan(HINT), 0)
    assert sampler.app_memory() == b"counter=7"  # the plan written: the application's bytes kept
    sampler.app_memory(b"counter=8")
    assert sampler.plan() == plan(HINT)  # the application's written: the plan kept
    assert FakeRTC.memory_bytes[:1] == sampler.SAMPLE
    with pytest.raises(ValueError):
        sampler.app_memory(bytes(2048))  # the two pass RTC memory's 2,048 bytes
    sampler.write(sampler.NONE)
    assert sampler.app_memory() == b"counter=8" and sampler.plan() is None


def test_a_sending_wake_reads_where_the_journal_resumes_from_the_header(chip: SimpleNamespace) -> None:
    chip.sampler.keep(plan(HINT), 0)
    chip.sampler.app_memory(b"the application's")
    assert chip.board_open.resume() == ring_tail.resume(HINT) == (3, 7, 5)


def test_no_hint_no_plan_or_a_power_on_leaves_the_whole_open(chip: SimpleNamespace) -> None:
    for memory in (lambda: chip.sampler.keep(plan(None), 0), lambda: chip.sampler.write(chip.sampler.NONE)):
        memory()
        assert chip.board_open.resume() is None
    chip.sampler.keep(plan(HINT), 0)
    chip.machine.reset_cause = lambda: 1  # a power-on (RTC memory would be lost; a reset keeps it)
    assert chip.board_open.resume() is None


def test_a_plan_of_the_first_format_gives_no_sector_the_ring_has(chip: SimpleNamespace) -> None:
    """Format 1 put the plan's JSON at byte 3: read as the header's numbers, its '{"' is a head sector of 31522,
    which no ring has, so an upgraded board's first sending wake opens the whole journal."""
    text = json.dumps({"v": 1, "ring": HINT}).encode()
    FakeRTC.memory_bytes = b"T" + len(text).to_bytes(2, "big") + text
    point = chip.board_open.resume()
    assert point is not None and point[0] == 0x7B22
    assert journal.replay_from(array("I", [1, 2, 3, 0]), point) == 0  # every sector replayed
    assert chip.sampler.plan() is None  # and no sampling wake trusts it
