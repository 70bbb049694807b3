"""Log lines of the long-running commands (`run`, `record`): one event a line on stdout, as logfmt (the default:
key=value pairs that logfmt parsers take, a value quoted where it must be, the time in UTC as RFC 3339) or as a
JSON object a line (`--log-format json`, for a log collector). Every line starts with time, level (and the bridge's
board) and event, then the event's own fields; no free text. A warning that repeats (the same event and fields
but the volatile ones) within REPEAT_WINDOW_S is printed once, and the next one printed says how many were folded
into it (repeated=N). Every event is named in EVENTS, one spelling for both commands (docs/services.md lists them).
Under systemd (JOURNAL_STREAM set: stdout is the journal's) each line starts with its syslog priority, <3> to <7>,
which journald takes as the entry's priority, so that `journalctl -p warning` shows the warnings and errors."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Mapping
from typing import Any

LOG_FORMATS = ("logfmt", "json")
REPEAT_WINDOW_S = 60.0

# Every event the long-running commands log: its name, which command logs it, and what it says. One spelling
# (snake_case) across both, so that an alert written for one name sees every occurrence
# (tests/unit/host/test_log_events.py holds the code and docs/services.md to this list).
EVENTS: dict[str, tuple[str, str]] = {
    "start": ("run, record", "the command started, with its settings"),
    "signal": ("run, record", "a signal arrived, and what it does (stop, reload, report)"),
    "exit": ("run", "the bridge stopped, with its counters in total"),
    "reloaded": (
        "run, record",
        "SIGHUP read the config again and applied it: the bridge's boards started and stopped, the settings changed "
        "(`applied`), and any it could not apply (`not_applied`) or that need a restart (the recorder's "
        "`needs_restart`; a warning when there are any)",
    ),
    "reload_failed": ("run, record", "SIGHUP's config did not load; everything running is kept"),
    "metrics_not_moved": ("run", "SIGHUP's new metrics address could not be served; the old one is kept"),
    "broker_unreachable": ("run, record", "every attempt to reach the broker fails (said once), and what to check"),
    "broker_back": ("run", "the broker answers again, after how long"),
    "recovered": ("record", "at start: rows the last run had logged and not committed, now in the store"),
    "port_open": ("run", "a board's serial port opened"),
    "port_unavailable": ("run", "a board's serial port cannot be opened; tried again"),
    "port_lost": ("run", "a board's serial port went away; reopened when it is back"),
    "stopped": ("run", "a board's session ended (unplugged, removed, the bridge stopping), with its counters"),
    "counters": ("run", "a board's counters (every stats_every, on SIGUSR1; at exit its `stopped` line has them)"),
    "console": ("run", "a line the board printed outside the link's frames"),
    "line_noise": ("run", "bytes on the serial line that were no frame"),
    "board_restarted": ("run", "the board restarted: its broker connection is closed"),
    "bad_control": ("run", "a control message from the board that could not be read"),
    "gateway": ("run", "a gateway board asked for its nodes to be relayed (docs/nodes.md)"),
    "bad_node_record": ("run", "bytes from a gateway that are no node record: its link is out of step"),
    "connect_failed": ("run, record", "a connection to the broker failed"),
    "connected": ("run, record", "connected to the broker"),
    "disconnected": ("run, record", "the broker connection ended"),
    "refused": ("run", "a destination the board asked for that the bridge's allow list does not hold"),
    "client": ("run", "the client id of a board's CONNECT, when it changes"),
    "wrong_board": (
        "run",
        "the board on a port said it is another than the port's client_id: refused, nothing of it reaches the broker",
    ),
    "broker_stalled": ("run", "the broker stopped reading: the board is held"),
    "broker_resumed": ("run", "the broker reads again"),
    "subscribed": ("record", "the recorder's subscription, with the QoS granted"),
    "subscribed_below_qos2": ("record", "the broker granted less than QoS 2: the audit cannot judge exactly once"),
    "client_id_changed": ("record", "the recorder's client id differs from the one its store kept"),
    "progress": ("record", "what the recorder received and committed (every stats_every)"),
    "maintained": ("record", "the store kept small: files of closed days compacted, days past --retain-days dropped"),
    "maintenance_failed": ("record", "a compaction or a drop failed; the store is as it was, tried again later"),
    "maintenance_resumed": ("record", "at start: a compaction or a drop the last run's end interrupted, finished now"),
    "store_failed": ("record", "a commit to the store failed (a full disk, say): the recorder disconnects"),
    "store_still_failing": ("record", "the store still fails"),
    "store_recovered": ("record", "the store takes commits again"),
    "commit_failed": ("record", "a commit of the log failed"),
    "commit_recovered": ("record", "commits of the log work again"),
}
# syslog priorities (sd-daemon(3)'s <N> prefix) of the logging levels.
_PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3, logging.CRITICAL: 2}


DEFAULT_LOG_FORMAT = "logfmt"


def add_log_format_argument(parser: argparse.ArgumentParser, default: str | None = DEFAULT_LOG_FORMAT) -> None:
    """`--log-format`; default None for a command whose config file may set it (the default is then the file's)."""
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=default,
        help=f"logfmt (key=value) or json, one event a line (default {DEFAULT_LOG_FORMAT})",
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


def priority_prefix(level: int) -> str:
    """journald's priority prefix for a level: <3> for errors, <4> warnings, <6> information, <7> debugging."""
    return f"<{_PRIORITY.get(level, 6)}>"


class Logfmt(logging.Formatter):
    def __init__(self, journald: bool = False) -> None:
        super().__init__()
        self.journald = journald

    def format(self, record: logging.LogRecord) -> str:
        line = self.line(fields_of(record))
        return priority_prefix(record.levelno) + line if self.journald else line

    def line(self, fields: dict[str, Any]) -> str:
        return " ".join(f"{key}={logfmt_value(value)}" for key, value in fields.items())


class Json(Logfmt):
    def line(self, fields: dict[str, Any]) -> str:
        return json.dumps(fields, default=str)


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
    """Send `logger_name` and its children to stdout in `log_format`, and nowhere else; each line headed by its
    priority when stdout is the journal's (systemd sets JOURNAL_STREAM for a service whose output it takes)."""
    handler = logging.StreamHandler(sys.stdout)
    journald = bool(os.environ.get("JOURNAL_STREAM"))
    handler.setFormatter(Json(journald) if log_format == "json" else Logfmt(journald))
    handler.addFilter(FoldRepeats())
    root = logging.getLogger(logger_name)
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
