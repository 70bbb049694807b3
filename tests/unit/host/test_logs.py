"""The long-running commands' log lines: logfmt that a logfmt parser takes (values quoted where they must be, no
free text), UTC RFC 3339 times, the bridge's board up front, JSON with --log-format json, and a repeated warning
printed once with the count of those folded into the next one."""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime

import pytest

from host_bridge import logs

PAIR = re.compile(r'(\w[\w.-]*)=("(?:[^"\\]|\\.)*"|[^ "=]*)(?: |$)')


def parse_logfmt(line: str) -> dict[str, str]:
    """A strict logfmt reader: the whole line must be key=value pairs."""
    pairs = PAIR.findall(line)
    assert " ".join(f"{k}={v}" for k, v in pairs) == line, f"not logfmt: {line!r}"
    return {k: json.loads(v) if v.startswith('"') else v for k, v in pairs}


@pytest.fixture
def logger(request: pytest.FixtureRequest) -> logging.Logger:
    name = f"test-logs-{request.node.name}"
    return logging.getLogger(name)


def lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_logfmt_quotes_what_must_be_and_keeps_the_board_and_the_time_in_utc(
    logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.log_to_stdout(logger.name)
    board = logs.Board(logger, "b1")
    logs.event(board, logging.WARNING, "port_lost", path="/dev/ttyUSB0", error='[Errno 5] I/O "error"\nnext')
    logs.event(logger, logging.INFO, "start", boards=2, tls=True, allowed="-")
    first, second = (parse_logfmt(line) for line in lines(capsys))
    assert list(first)[:4] == ["time", "level", "board", "event"]
    assert first["board"] == "b1" and first["event"] == "port_lost" and first["level"] == "warning"
    assert first["error"] == '[Errno 5] I/O "error"\nnext'  # quoted and escaped, read back whole
    assert (second["boards"], second["tls"], second["allowed"]) == ("2", "true", "-")
    when = datetime.strptime(first["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert abs((datetime.now(UTC) - when).total_seconds()) < 60  # UTC, not local time


def test_json_lines_for_a_log_collector(logger: logging.Logger, capsys: pytest.CaptureFixture[str]) -> None:
    logs.log_to_stdout(logger.name, "json")
    logs.event(logs.Board(logger, "b2"), logging.INFO, "connected", destination="127.0.0.1:1883")
    (line,) = lines(capsys)
    record = json.loads(line)
    assert (record["board"], record["event"], record["destination"]) == ("b2", "connected", "127.0.0.1:1883")


def test_a_repeated_warning_is_printed_once_with_a_count(
    logger: logging.Logger, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr(logging.time, "time", lambda: now[0])  # type: ignore[attr-defined]
    monkeypatch.setattr(logging.time, "time_ns", lambda: int(now[0] * 1e9))  # type: ignore[attr-defined]
    logs.log_to_stdout(logger.name)
    board = logs.Board(logger, "b3")
    for second in range(0, 130):  # an absent port, retried every second for two minutes
        now[0] = 1000.0 + second
        logs.event(board, logging.WARNING, "port_unavailable", path="/dev/ttyUSB9", retry_in="1s")
    logs.event(board, logging.INFO, "port_open", path="/dev/ttyUSB9")
    printed = [parse_logfmt(line) for line in lines(capsys)]
    warnings = [p for p in printed if p["event"] == "port_unavailable"]
    assert [w.get("repeated") for w in warnings] == [None, "59", "59"], warnings  # at 0 s, 60 s, 120 s
    assert printed[-1]["event"] == "port_open"  # information is never folded
