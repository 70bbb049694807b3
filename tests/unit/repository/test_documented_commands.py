"""Every `host-bridge` command line in the documentation (README.md, docs/, the folders' READMEs, examples/) is
one the CLI accepts: each is parsed by the very parser `host-bridge` runs (nothing is executed: many need a
real board or a broker). A renamed option or subcommand fails here, naming the file, the line and why."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex

import pytest

from host_bridge.cli import build_parser
from tests.conftest import REPO

DOCS = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    *sorted(REPO.glob("*/README.md")),
]
COMMAND = re.compile(r"^(?:\$ )?(?:\S*/)?host-bridge (.*)$")


def shell_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line inside a ```sh/bash/console fence, continuation lines joined."""
    found, fence, pending, start = [], None, "", 0
    for number, line in enumerate(text.split("\n"), 1):
        if line.startswith("```"):
            fence = line[3:].strip() if fence is None else None  # the language of the fence opened, or None
            continue
        if fence not in ("sh", "bash", "console", "shell", ""):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        found.append((start, (pending + line).strip()))
        pending = ""
    return found


def command_lines() -> list[tuple[str, str]]:
    lines = []
    for doc in DOCS:
        text = doc.read_text()
        for number, line in shell_blocks(text):
            found = COMMAND.match(line)
            if found:
                # The command alone: no comment, no shell operators after it.
                cmd = re.split(r"\s+#|\s&&|\s\|\s|\s>|\s&(?:\s|$)", found.group(1))[0].strip()
                lines.append((f"{doc.relative_to(REPO)}:{number}", cmd))
    return lines


COMMANDS = command_lines()


def test_the_docs_have_command_lines_to_check() -> None:
    subcommands = {shlex.split(cmd)[0] for _, cmd in COMMANDS}
    assert len(COMMANDS) >= 20 and {"vboard", "run", "record", "pipeline", "flash", "deploy", "broker"} <= subcommands


@pytest.mark.parametrize(("where", "cmd"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_a_documented_command_line_is_one_the_cli_accepts(where: str, cmd: str) -> None:
    args = shlex.split(cmd)
    parser = build_parser(args[0])
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
        try:
            parsed = parser.parse_args(args)
        except SystemExit as exc:
            # --help and --version end here with 0; a wrong line with 2 and argparse's reason.
            assert exc.code == 0, f"{where}: host-bridge {cmd}\n{errors.getvalue()}"
            return
    assert isinstance(parsed, argparse.Namespace) and parsed.handler is not None
