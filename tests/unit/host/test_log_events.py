"""The long-running commands' log events: every name the code logs is in host_bridge.logs.EVENTS, spelled one way
(snake_case) across the bridge and the recorder, and docs/services.md lists exactly those; under journald each
line carries its priority, so that `journalctl -p warning` shows every warning and error."""

from __future__ import annotations

import ast
import logging
import os
import re
import subprocess
import sys

import pytest

from host_bridge import logs
from tests.conftest import REPO

SOURCES = ("host_bridge", "dmqtt_telemetry", "dmqtt_pipeline")


def logged_names() -> dict[str, list[str]]:
    """Each event name an event(logger, level, NAME, ...) call in the host code gives, and where."""
    found: dict[str, list[str]] = {}
    for package in SOURCES:
        for path in (REPO / package).rglob("*.py"):
            if "shims" in path.parts:
                continue  # (MicroPython code: the virtual board's own)
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "event":
                    assert len(node.args) >= 3 and isinstance(node.args[2], ast.Constant), (
                        f"{path}:{node.lineno}: an event's name is a string literal, so that it can be listed"
                    )
                    found.setdefault(node.args[2].value, []).append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_every_event_the_code_logs_is_listed_once_and_spelled_one_way() -> None:
    found = logged_names()
    assert set(found) == set(logs.EVENTS), {
        "logged, not listed": sorted(set(found) - set(logs.EVENTS)),
        "listed, never logged": sorted(set(logs.EVENTS) - set(found)),
    }
    assert all(re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)*", name) for name in found), sorted(found)


def test_docs_services_lists_every_event() -> None:
    text = (REPO / "docs" / "services.md").read_text()
    section = text.split("## Log events", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `([a-z0-9_]+)` \|", section, re.M)
    assert sorted(documented) == sorted(logs.EVENTS), set(documented) ^ set(logs.EVENTS)


@pytest.mark.parametrize("log_format", logs.LOG_FORMATS)
def test_under_journald_each_line_carries_its_priority(log_format: str) -> None:
    """A command whose stdout is the journal's (JOURNAL_STREAM set) heads each line with <N>; otherwise not."""
    script = (
        "import logging, sys; from host_bridge import logs\n"
        f"logs.log_to_stdout('t', {log_format!r})\n"
        "log = logging.getLogger('t')\n"
        "logs.event(log, logging.INFO, 'connected', broker='b')\n"
        "logs.event(log, logging.WARNING, 'port_lost', path='/dev/x')\n"
        "logs.event(log, logging.ERROR, 'store_failed', error='full')\n"
    )
    for journal, prefixes in (("8:123", ["<6>", "<4>", "<3>"]), ("", ["", "", ""])):
        env = {"JOURNAL_STREAM": journal} if journal else {}
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=REPO,
                             env={**_base_env(), **env}).stdout.splitlines()  # fmt: skip
        assert len(out) == 3, out
        for line, prefix in zip(out, prefixes, strict=True):
            assert line.startswith(prefix + ("{" if log_format == "json" else "time=")), line


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}


def test_priorities_follow_syslog() -> None:
    assert [logs.priority_prefix(level) for level in (logging.ERROR, logging.WARNING, logging.INFO, logging.DEBUG)] == [
        "<3>", "<4>", "<6>", "<7>",
    ]  # fmt: skip
