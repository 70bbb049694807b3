"""Log lines of the long-running commands (`run`, `record`): one event a line on stdout, as logfmt (the default:
key=value pairs that logfmt parsers take, a value quoted where it must be, the time in UTC as RFC 3339) or as a
JSON object a line (`--log-format json`, for a log collector). Every line starts with time, level (and the bridge's
board) and event, then the event's own fields; no free text. A warning that repeats (the same event and fields
but the volatile ones) within REPEAT_WINDOW_S is printed once, and the next one printed says how many were folded
into it (repeated=N)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Mapping
from typing import Any

LOG_FORMATS = ("logfmt", "json")
REPEAT_WINDOW_S = 60.0


DEFAULT_LOG_FORMAT = "logfmt"


def add_log_format_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=DEFAULT_LOG_FORMAT,
        help="logfmt (key=value) or json, one event a line",
    )


def event(log: logging.Logger | Board, level: int, name: str, **fields: Any) -> None:
    """Log the event `name` with its fields, in order."""
    log.log(level, name, extra={"fields": fields})


class Board(logging.LoggerAdapter):  # type: ignore[type-arg]
    """A logger whose every event carries board=NAME first (the bridge's board threads)."""

    def __init__(self, logger: logging.Logger, board: str) -> None:
        super().__init__(logger, {"board": board})

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        kwargs["extra"] = {**(kwargs.get("extra") or {}), **(self.extra or {})}
        return msg, kwargs


def utc(created: float) -> str:
    """RFC 3339 in UTC, to the millisecond: 2026-11-25T04:20:01.123Z."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + f".{int(created % 1 * 1000):03d}Z"


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """time, level, board (the bridge's), event, then the event's fields (a record logged without event() keeps
    its text as msg)."""
    head: dict[str, Any] = {"time": utc(record.created), "level": record.levelname.lower()}
    board = getattr(record, "board", None)
    if board is not None:
        head["board"] = board
    own: Mapping[str, Any] | None = getattr(record, "fields", None)
    if own is None:
        return {**head, "event": "log", "msg": record.getMessage()}
    return {**head, "event": record.getMessage(), **own}


def logfmt_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = "" if value is None else str(value)
    if text and text.isprintable() and not any(c in text for c in ' "=\\'):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'


class Logfmt(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return " ".join(f"{key}={logfmt_value(value)}" for key, value in fields_of(record).items())


class Json(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(fields_of(record), default=str)


class FoldRepeats(logging.Filter):
    """Warnings and errors that repeat within `window` seconds (same event and fields, but for `volatile` ones)
    are printed once; the next one printed carries repeated=N, the number folded into it."""

    def __init__(self, window: float = REPEAT_WINDOW_S, volatile: tuple[str, ...] = ("retry_in",)) -> None:
        super().__init__()
        self.window = window
        self.volatile = volatile
        self._last: dict[tuple[str, ...], tuple[float, int]] = {}  # key -> (when printed, folded since)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        own: dict[str, Any] = dict(getattr(record, "fields", {}) or {})
        key = (record.getMessage(), *(f"{k}={v}" for k, v in own.items() if k not in self.volatile))
        printed, folded = self._last.get(key, (0.0, 0))
        if record.created - printed < self.window:
            self._last[key] = (printed, folded + 1)
            return False
        if folded:
            record.fields = {**own, "repeated": folded}
        self._last[key] = (record.created, 0)
        return True


def log_to_stdout(logger_name: str, log_format: str = "logfmt", level: int = logging.INFO) -> None:
    """Send `logger_name` and its children to stdout in `log_format`, and nowhere else."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(Json() if log_format == "json" else Logfmt())
    handler.addFilter(FoldRepeats())
    root = logging.getLogger(logger_name)
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
