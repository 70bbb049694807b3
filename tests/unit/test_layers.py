"""shared/DESIGN.md's layer rule, read from the imports themselves: the firmware imports nothing of the host,
and the pipeline nothing of the firmware. (Data flows one way; each layer knows only the one below it.) The
third rule, that the host tools reach the pipeline only through the demo's jobs, does not hold yet: the
recorder's store imports the pipeline's Parquet schema; issue 11 moves the telemetry format into one module."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO


def imported(path: Path) -> set[str]:
    """Top-level package names a Python file imports (at any depth of the file, lazy imports included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def importers(folder: str, forbidden: set[str]) -> dict[str, set[str]]:
    found = {}
    for path in sorted((REPO / folder).rglob("*.py")):
        bad = imported(path) & forbidden
        if bad:
            found[str(path.relative_to(REPO))] = bad
    return found


def test_the_firmware_imports_nothing_of_the_host() -> None:
    assert importers("firmware", {"host_bridge", "pipeline", "tests", "tools"}) == {}


def test_the_pipeline_imports_nothing_of_the_firmware() -> None:
    assert importers("pipeline", {"dmqtt", "dlink", "tests", "tools"}) == {}


def test_the_rule_sees_imports() -> None:
    """The reader itself: a lazy import inside a function counts."""
    assert {"pipeline", "json"} <= imported(REPO / "host_bridge" / "demo.py")
