"""The README's table of `host-bridge vboard` options is the command's whole set: an option added to the command
and not to the table fails here, and so does a row for an option the command no longer has."""

from __future__ import annotations

import argparse
import re

from host_bridge.cli import build_parser
from tests.conftest import REPO


def vboard_options() -> set[str]:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    vboard = commands.choices["vboard"]
    return {o for a in vboard._actions for o in a.option_strings if o.startswith("--") and o != "--help"}


def readme_table() -> tuple[set[str], set[str]]:
    """(the options each row is about: its first cell; every option the table names)."""
    text = (REPO / "README.md").read_text()
    start = text.index("Its options (all of `host-bridge vboard --help`)")
    rows = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    firsts = {o for row in rows[2:] for o in re.findall(r"`(--[a-z-]+)", row.split("|")[1])}
    named = {o for row in rows[2:] for o in re.findall(r"`(--[a-z-]+)", row)}
    return firsts, named


def test_the_readme_lists_every_vboard_option_and_no_other() -> None:
    options = vboard_options()
    firsts, named = readme_table()
    assert options <= named, f"missing from the README's vboard table: {sorted(options - named)}"
    assert firsts <= options, f"rows for options `host-bridge vboard` does not have: {sorted(firsts - options)}"
