"""shared/DESIGN.md's layer rule, read from the imports themselves. Data flows one way and each layer knows only
the one below it: the firmware imports nothing of the host; the pipeline nothing of the firmware, and of
host_bridge only the telemetry contract (host_bridge.telemetry: the format and the promises); host_bridge
reaches the pipeline only through the jobs the demo runs (host_bridge/demo.py)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def imported(path: Path, runtime_only: bool = False) -> set[str]:
    """Dotted module names a Python file imports (at any depth, lazy imports included); with runtime_only, not
    those under `if TYPE_CHECKING:`, which never run."""
    names: set[str] = set()
    todo: list[ast.AST] = [ast.parse(path.read_text(), str(path))]
    while todo:
        node = todo.pop()
        if runtime_only and _type_checking_only(node):
            todo.extend(getattr(node, "orelse", []))
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        todo.extend(ast.iter_child_nodes(node))
    return names


def importers(
    folder: str, forbidden: set[str], allowed: set[str] = frozenset(), runtime_only: bool = False
) -> dict[str, set[str]]:
    """Files under folder importing a module of a forbidden package, other than the allowed modules."""
    found = {}
    for path in sorted((REPO / folder).rglob("*.py")):
        bad = {
            name
            for name in imported(path, runtime_only)
            if name.split(".")[0] in forbidden and not any(name == a or name.startswith(a + ".") for a in allowed)
        }
        if bad:
            found[str(path.relative_to(REPO))] = bad
    return found


def test_the_firmware_imports_nothing_of_the_host() -> None:
    assert importers("firmware", {"host_bridge", "pipeline", "tests", "tools"}) == {}


def test_the_pipeline_imports_nothing_of_the_firmware_and_of_the_host_only_the_telemetry_contract() -> None:
    assert importers("pipeline", {"dmqtt", "dlink", "tests", "tools", "host_bridge"}, {"host_bridge.telemetry"}) == {}


def test_the_host_reaches_the_pipeline_only_through_the_demo() -> None:
    found = importers("host_bridge", {"pipeline", "tests", "tools"}, runtime_only=True)
    assert set(found) <= {"host_bridge/demo.py"}, found
    assert found, "the demo runs the pipeline's jobs: the rule's reader must see it do so"


def test_the_rule_sees_imports() -> None:
    """The reader itself: a lazy import inside a function counts; one only for type checkers does not."""
    demo = imported(REPO / "host_bridge" / "demo.py", runtime_only=True)
    assert {"pipeline.jobs", "json"} <= demo
    assert "pipeline.audit.AuditResult" in imported(REPO / "host_bridge" / "chaos.py")
    assert "pipeline.audit.AuditResult" not in imported(REPO / "host_bridge" / "chaos.py", runtime_only=True)
