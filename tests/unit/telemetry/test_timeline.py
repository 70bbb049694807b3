"""The bench's timeline (dmqtt_telemetry.timeline), as docs/pipeline.md specifies it: what the campaigns write
is what the report reads, and a bad line is refused naming its line."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dmqtt_telemetry.timeline import Event, TimelineError, TimelineWriter, read


def test_what_a_writer_notes_reads_back_in_order_from_many_threads(tmp_path: Path) -> None:
    writer = TimelineWriter(tmp_path / "timeline.jsonl")

    def board(name: str) -> None:
        for _ in range(50):
            writer.note("power-cut", name)

    threads = [threading.Thread(target=board, args=(f"b{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    writer.note("recorder-kill")
    for t in threads:
        t.join()
    writer.note("link-counters", "b0", retransmissions=3, crc_errors=1)
    events = read((tmp_path / "timeline.jsonl").read_text())
    assert len(events) == 4 * 50 + 2
    assert sum(e.event == "power-cut" and e.dev == "b2" for e in events) == 50
    assert events[-1] == Event(events[-1].at, "link-counters", "b0", {"retransmissions": 3, "crc_errors": 1})
    assert all(e.at.tzinfo is UTC for e in events) and events == sorted(events, key=lambda e: e.at)


def test_the_documented_lines_parse() -> None:
    text = (
        '{"at": "2026-11-25T05:41:07.123456Z", "event": "power-cut", "dev": "demo-q1"}\n'
        '{"at": "2026-11-25T05:41:08.000000Z", "event": "recorder-kill"}\n'
    )
    assert read(text) == [
        Event(datetime(2026, 11, 25, 5, 41, 7, 123456, tzinfo=UTC), "power-cut", "demo-q1"),
        Event(datetime(2026, 11, 25, 5, 41, 8, tzinfo=UTC), "recorder-kill"),
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"event": "power-cut", "dev": "a"}', "t.jsonl:2: not a timeline event"),
        ('{"at": "yesterday", "event": "power-cut", "dev": "a"}', "t.jsonl:2: not a timeline event"),
        ('{"at": "2026-11-25T05:41:07.000000Z", "event": "meteor"}', "t.jsonl:2: unknown event 'meteor' (known:"),
        ('{"at": "2026-11-25T05:41:07.000000Z", "event": "power-cut"}', "t.jsonl:2: power-cut needs dev"),
        ('{"at": "2026-11-25T05:41:07.000000Z", "event": "broker-kill", "dev": "a"}', "broker-kill takes no dev"),
        (
            '{"at": "2026-11-25T05:41:07.000000Z", "event": "link-counters", "dev": "a", "counters": {"x": "1"}}',
            "counters must map names to integers",
        ),
        ("not json", "t.jsonl:2: not a timeline event"),
    ],
)
def test_a_bad_line_is_refused_naming_it(line: str, message: str) -> None:
    good = '{"at": "2026-11-25T05:41:07.000000Z", "event": "bridge-kill"}'
    with pytest.raises(TimelineError, match=message.replace("(", r"\(")):
        read(f"{good}\n{line}\n", "t.jsonl")
