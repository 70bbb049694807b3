"""docs/architecture.md's layer table, read from the imports themselves: every import of every file (lazy ones
and those only for type checkers included) must be of a package its layer may import. Data flows one way: the
firmware imports nothing of the host; the telemetry contract nothing at all; the pipeline only the contract;
host_bridge never the pipeline (the campaigns run it as a command); each host subsystem only what sits below it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import REPO

CORE = "host_bridge"  # errors, processes, logs, assets, net: what every host subsystem stands on
FIRMWARE_SHARED = {"dmqtt", "dlink", "dboard"}
APP_MODULES = {path.stem for path in (REPO / "firmware" / "app").glob("*.py")}  # top-level on a board
PROJECT = FIRMWARE_SHARED | {"app", "dmqtt_telemetry", "dmqtt_pipeline", "host_bridge", "tests", "tools"}

# Layer -> the layers it may import (besides itself). The table of docs/architecture.md.
ALLOWED: dict[str, set[str]] = {
    "dmqtt": set(),
    "dlink": set(),
    "dboard": set(),
    "app": FIRMWARE_SHARED,
    "dmqtt_telemetry": set(),
    "dmqtt_pipeline": {"dmqtt_telemetry"},
    CORE: set(),
    "host_bridge.boards": {CORE},
    "host_bridge.broker": {CORE},
    "host_bridge.vboard": {CORE, "host_bridge.boards"},
    "host_bridge.bridge": {CORE, "dlink", "dmqtt"},
    "host_bridge.recorder": {CORE, "dmqtt", "dmqtt_telemetry"},
    "host_bridge.hil": {
        CORE,
        "host_bridge.boards",
        "host_bridge.vboard",
        "host_bridge.broker",
        "host_bridge.bridge",
        "dboard",
        "dmqtt",
        "dmqtt_telemetry",
    },
    "host_bridge.campaigns": {
        CORE,
        "host_bridge.boards",
        "host_bridge.vboard",
        "host_bridge.broker",
        "host_bridge.bridge",
        "host_bridge.recorder",
        "host_bridge.hil",
        "dmqtt_telemetry",
    },
    "host_bridge.cli": {
        CORE,
        "host_bridge.boards",
        "host_bridge.bridge",
        "host_bridge.recorder",
        "host_bridge.hil",
        "host_bridge.campaigns",
        "dmqtt",
    },
}


def layer_of_module(name: str) -> str | None:
    """The layer a dotted module name belongs to; None for what is not the project's (stdlib, packages)."""
    parts = name.split(".")
    top = parts[0]
    if top == "host_bridge":
        if len(parts) > 1 and f"host_bridge.{parts[1]}" in ALLOWED:
            return f"host_bridge.{parts[1]}"
        return "host_bridge.cli" if parts[1:2] in (["cli"], ["__main__"]) else CORE
    if top in APP_MODULES:
        return "app"
    return top if top in PROJECT else None


def layer_of_file(path: Path) -> str:
    rel = path.relative_to(REPO)
    if rel.parts[0] == "firmware":
        return "app" if rel.parts[1] == "app" else rel.parts[1]
    return layer_of_module(".".join(rel.with_suffix("").parts)) or rel.parts[0]


def imported(path: Path) -> set[str]:
    """Dotted module names a Python file imports, at any depth: lazy imports and type checkers' included."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def files() -> list[Path]:
    roots = ["firmware", "dmqtt_telemetry", "dmqtt_pipeline", "host_bridge"]
    found = [p for root in roots for p in sorted((REPO / root).rglob("*.py*")) if p.suffix in (".py", ".pyi")]
    # The virtual board's shims are MicroPython code of their own (machine, esp32, ...), run only on the port.
    return [p for p in found if "shims" not in p.parts and p.name != "manifest.py"]


def violations(path: Path, mine: str | None = None) -> set[str]:
    """Imports of `path` that its layer (`mine`, else where the file is) may not make."""
    mine = mine or layer_of_file(path)
    bad = set()
    for name in imported(path):
        theirs = layer_of_module(name)
        if theirs is not None and theirs != mine and theirs not in ALLOWED[mine]:
            bad.add(f"{name} ({theirs})")
    return bad


@pytest.mark.parametrize("path", files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_import_is_of_a_layer_below(path: Path) -> None:
    assert violations(path) == set(), f"{layer_of_file(path)} may import only {sorted(ALLOWED[layer_of_file(path)])}"


def test_the_reader_sees_lazy_and_type_only_imports_and_places_every_file(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from dmqtt_pipeline.audit import AuditResult\n"
        "def later():\n    import host_bridge.hil.cycle\n"
    )
    assert {"dmqtt_pipeline.audit", "host_bridge.hil.cycle"} <= imported(probe)
    assert layer_of_module("host_bridge.errors") == CORE and layer_of_module("host_bridge") == CORE
    assert layer_of_module("host_bridge.hil.virtual_dut") == "host_bridge.hil"
    assert layer_of_module("board_app") == "app" and layer_of_module("json") is None
    assert {layer_of_file(p) for p in files()} == set(ALLOWED)


def test_a_layer_that_reaches_up_is_caught(tmp_path: Path) -> None:
    """The rule itself: the virtual board importing the bench (as it once did), and host_bridge importing the
    pipeline, are violations."""
    runner = REPO / "host_bridge" / "vboard" / "runner.py"
    assert violations(runner) == set()
    probe = tmp_path / "runner.py"
    probe.write_text(runner.read_text() + "\nfrom host_bridge.hil.dut import Dut\nimport dmqtt_pipeline.jobs\n")
    assert violations(probe, "host_bridge.vboard") == {
        "host_bridge.hil.dut (host_bridge.hil)",
        "host_bridge.hil.dut.Dut (host_bridge.hil)",
        "dmqtt_pipeline.jobs (dmqtt_pipeline)",
    }


def test_the_layer_table_and_the_readme_name_every_module_of_the_board_application() -> None:
    """docs/architecture.md's app row and the README's layout name each module of firmware/app, and no other."""
    row = next(
        line for line in (REPO / "docs" / "architecture.md").read_text().splitlines() if line.startswith("| app")
    )
    listed = {name.strip().removesuffix(".py") for name in row.split("|")[2].split(":", 1)[1].split(",")}
    assert listed == APP_MODULES, sorted(listed ^ APP_MODULES)
    readme = next(line for line in (REPO / "README.md").read_text().splitlines() if line.startswith("| `firmware/app`"))
    named = set(re.findall(r"\b(\w+)(?:\.py)?\b", readme.split("|")[2]))
    assert APP_MODULES <= named, sorted(APP_MODULES - named)
