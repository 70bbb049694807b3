"""The host's reader of the board application's console (the twin of dboard/console.py, whose formats it parses;
never on a board: firmware/manifest.py leaves it out). Every host parser of a board's console goes through here:
the bench's DUTs, the demo, the tools and the tests."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

from dboard import console

# The line kinds a host tells apart, by their format in dboard/console.py.
FORMATS: dict[str, str] = {
    "boot": console.BOOT,
    "accepted": console.ACCEPTED,
    "connected": console.CONNECTED,
    "connect_failed": console.CONNECT_FAILED,
    "connection_lost": console.CONNECTION_LOST,
    "publish_nacked": console.PUBLISH_NACKED,  # before publish_refused: its format is the more specific
    "publish_refused": console.PUBLISH_REFUSED,
    "queue_full": console.QUEUE_FULL,
    "message": console.MESSAGE,
    "heap": console.HEAP,
    "config_error": console.CONFIG_ERROR,
    "journal_error": console.JOURNAL_ERROR,
    "unconfirmed": console.UNCONFIRMED,
    "wifi_joined": console.WIFI_JOINED,
    "wifi_down": console.WIFI_DOWN,
    "wifi_up": console.WIFI_UP,
    "sleep": console.SLEEP,
}
# The board's main() returns this after a config_error line (docs/console-protocol.md): a virtual board's exit
# status. (The board writes the literal: a name there would cost a deployed board heap it does not have.)
CONFIG_ERROR_STATUS = 3
# What ends a run badly: the application's own failures, and MicroPython's traceback of an uncaught exception.
TRACEBACK = "Traceback (most recent call last)"
FAILURE_KINDS = ("config_error", "journal_error")
SUMMARY_START = '{"'

_FIELD = re.compile(r"%(?:0?\d*)([dsxr])")
_PATTERNS = {"d": r"(-?\d+)", "x": r"([0-9a-f]+)", "s": r"(.*)", "r": r"(.*)"}


class ConsoleFormatError(ValueError):
    """A line that claims to be of the protocol (a summary) but is not what the protocol says."""


def _compile(fmt: str) -> tuple[re.Pattern[str], str]:
    pattern, kinds, last = "", "", 0
    for field in _FIELD.finditer(fmt):
        pattern += re.escape(fmt[last : field.start()]) + _PATTERNS[field.group(1)]
        kinds += field.group(1)
        last = field.end()
    return re.compile(pattern + re.escape(fmt[last:]) + r"\Z"), kinds


_COMPILED = {kind: _compile(fmt) for kind, fmt in FORMATS.items()}


@dataclass(frozen=True)
class Line:
    """One line of the protocol: its kind (a key of FORMATS, or "summary") and the values its format holds."""

    kind: str
    values: tuple[Any, ...]


def _value(kind: str, text: str) -> Any:
    if kind == "d":
        return int(text)
    if kind == "x":
        return int(text, 16)
    if kind == "r":
        return ast.literal_eval(text)
    return text


def parse_line(line: str) -> Line | None:
    """The protocol line `line` is, or None for any other output (notes, tracebacks, the REPL). A summary that
    is not what the protocol says raises ConsoleFormatError rather than pass for one."""
    line = line.rstrip("\r\n")
    if line.startswith(SUMMARY_START):
        return Line("summary", (parse_summary_line(line),))  # the board application's own summary
    for kind, (pattern, kinds) in _COMPILED.items():
        found = pattern.match(line)
        if found:
            try:
                return Line(kind, tuple(_value(k, v) for k, v in zip(kinds, found.groups(), strict=True)))
            except (ValueError, SyntaxError):
                continue
    return None


def parse_summary_line(line: str, keys: tuple[str, ...] = console.SUMMARY_KEYS) -> dict[str, Any]:
    """A summary as a dict, checked: every one of `keys` there (the application's, console.SUMMARY_KEYS, unless
    another application says otherwise), and those the protocol defines typed as it says (integers but dev)."""
    try:
        summary = json.loads(line)
    except ValueError as exc:
        raise ConsoleFormatError(f"a summary line that is not JSON: {line[:80]!r}") from exc
    if not isinstance(summary, dict):
        raise ConsoleFormatError(f"a summary line that is not an object: {line[:80]!r}")
    missing = [k for k in keys if k not in summary]
    if missing:
        raise ConsoleFormatError(f"a summary without {', '.join(missing)}: {line[:80]!r}")
    typed = [k for k in console.SUMMARY_KEYS if k in summary]
    wrong = [k for k in typed if not _typed_as_defined(k, summary[k])]
    if wrong:
        raise ConsoleFormatError(f"a summary with mistyped {', '.join(wrong)}: {line[:80]!r}")
    return summary


def _typed_as_defined(key: str, value: Any) -> bool:
    if key in ("dev", "version"):
        return isinstance(value, str)
    return isinstance(value, int) and not isinstance(value, bool)


def lines(text: str, kind: str | None = None) -> list[Line]:
    """The protocol lines in a console's text, in order; only those of `kind` when given."""
    found = (parse_line(raw) for raw in text.splitlines())
    return [ln for ln in found if ln is not None and (kind is None or ln.kind == kind)]


def summary(text: str, keys: tuple[str, ...] = console.SUMMARY_KEYS) -> dict[str, Any] | None:
    """The last summary in a console's text (a run that resumed over boots prints one at its end), or None;
    ConsoleFormatError for one that is not what the protocol says. `keys`: those a summary must have."""
    for raw in reversed(text.splitlines()):
        if raw.startswith(SUMMARY_START):
            return parse_summary_line(raw.rstrip("\r"), keys)
    return None


def failure(text: str) -> str | None:
    """The first line saying the run failed (a config or journal error, or a traceback), or None."""
    for raw in text.splitlines():
        if raw.startswith(TRACEBACK):
            return raw
        found = parse_line(raw) if not raw.startswith(SUMMARY_START) else None
        if found is not None and found.kind in FAILURE_KINDS:
            return raw
    return None


def heap_samples(text: str) -> list[dict[str, int]]:
    """The `heap` lines of a console (heap_log_every): each {"seq", "free", "block"}."""
    return [dict(zip(("seq", "free", "block"), ln.values, strict=True)) for ln in lines(text, "heap")]


def acceptances(text: str) -> dict[int, list[int]]:
    """The board's witness of what it accepted: per boot, the seq of each `accepted` line, in the console's
    order (a boot numbers its accepted messages 0, 1, 2 ...: a gap is a console line lost)."""
    found: dict[int, list[int]] = {}
    for ln in lines(text, "accepted"):
        boot, seq = ln.values
        found.setdefault(boot, []).append(seq)
    return found


def boots(text: str) -> list[tuple[int, int]]:
    """Each boot the console shows: (the board's boot number, QoS 1/2 messages in flight when it booted)."""
    return [(ln.values[0], ln.values[1]) for ln in lines(text, "boot")]
