"""The board's console protocol, read on the host (dboard/console_host.py) from the very lines the vectors say
the board prints (tests/vectors/console_lines.json; tests/unit/dmqtt/test_shared_vectors.py checks that the board
prints them): every line read back as its kind and values, summaries checked, other output left alone."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dboard import console, console_host
from tests.conftest import VECTORS

VECTORS_FILE = json.loads((VECTORS / "console_lines.json").read_text())


def value(arg: Any) -> Any:
    return bytes.fromhex(arg["bytes"]) if isinstance(arg, dict) else arg


@pytest.mark.parametrize("vec", VECTORS_FILE["lines"], ids=lambda v: v["kind"])
def test_every_line_is_read_back_as_its_kind_and_values(vec: dict[str, Any]) -> None:
    line = console_host.parse_line(vec["line"])
    assert line == console_host.Line(vec["kind"], tuple(value(a) for a in vec["args"]))


def test_every_format_of_the_board_has_a_reader_and_a_vector() -> None:
    formats = {name.lower() for name, v in vars(console).items() if isinstance(v, str) and name.isupper()}
    assert formats == set(console_host.FORMATS)
    assert formats == {v["kind"] for v in VECTORS_FILE["lines"]}


def test_the_summary_is_checked_against_the_protocols_keys() -> None:
    line = VECTORS_FILE["summary"]["line"]
    summary = console_host.summary("connected session_present=0 inflight=0\n" + line + "\n")
    assert summary is not None and summary["total"] == 100 and summary["link"] == {"retransmissions": 3}
    assert list(summary)[: len(console.SUMMARY_KEYS)] == list(console.SUMMARY_KEYS)
    assert console_host.summary("connected session_present=0 inflight=0\n") is None


@pytest.mark.parametrize("bad", VECTORS_FILE["bad_summaries"], ids=lambda b: b["name"])
def test_a_summary_that_is_not_what_the_protocol_says_is_refused(bad: dict[str, str]) -> None:
    with pytest.raises(console_host.ConsoleFormatError):
        console_host.summary(bad["line"])


def test_another_applications_summary_is_read_with_its_own_keys() -> None:
    assert console_host.summary('{"total": 5, "ms": 10}', keys=("total", "ms")) == {"total": 5, "ms": 10}
    with pytest.raises(console_host.ConsoleFormatError, match="without ms"):
        console_host.summary('{"total": 5}', keys=("total", "ms"))


@pytest.mark.parametrize("text", VECTORS_FILE["not_protocol"])
def test_other_output_is_not_taken_for_a_protocol_line(text: str) -> None:
    assert console_host.parse_line(text) is None


def test_failures_heap_samples_and_lines_of_a_console() -> None:
    text = "\n".join(
        [
            "connected session_present=0 inflight=0",
            'heap {"seq": 32, "free": 41000, "block": 20000}',
            "connection lost ([Errno 104] ECONNRESET)",
            'heap {"seq": 64, "free": 40900, "block": 19000}',
        ]
    )
    assert console_host.failure(text) is None
    assert console_host.heap_samples(text) == [
        {"seq": 32, "free": 41000, "block": 20000},
        {"seq": 64, "free": 40900, "block": 19000},
    ]
    assert [ln.kind for ln in console_host.lines(text)] == ["connected", "heap", "connection_lost", "heap"]
    assert console_host.failure(text + "\njournal error: flash program failed at journal offset 0x1000\n") == (
        "journal error: flash program failed at journal offset 0x1000"
    )
    assert console_host.failure("Traceback (most recent call last):\n  File ...") is not None
