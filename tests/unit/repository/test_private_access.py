"""The firmware's modules keep each other's invariants through named members, not private ones: no module reads or
writes another object's underscore name, but for the few below, each with its reason (docs/firmware-style.md).
What one module needs of another's state is a member without an underscore, documented where the other interfaces
are (dmqtt/interfaces.py: Engine, what the asyncio face drives of the client)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

FIRMWARE = REPO / "firmware"

# (module, the object it reaches into): why. Kept short: a new entry needs a reason a reviewer accepts.
ALLOWED = {
    ("dmqtt/oversize.py", "session"): "the session's own handling of a message too large for the broker, split out "
    "of session.py to load only when one is (rule 6): Session's code in a module of its own",
    ("dmqtt/wake.py", "ring"): "the cheap wake's hint reads where the ring's head ends: a method on RingJournal "
    "would be heap on every ring board, for what only a board that deep-sleeps uses (rule 6)",
    ("dmqtt/wake.py", "session"): "the same hint reads the session's run of free packet ids (rule 6)",
    ("dmqtt/aio.py", "_core"): "MicroPython's asyncio has no public way to wait on a socket's readiness without a "
    "stream object: its IO queue is the one the streams use",
}


def private_reaches(path: Path, root: Path = FIRMWARE) -> set[tuple[str, str, str]]:
    """(module, object, name) for each `obj._name` in the module whose object is not self, cls or super()."""
    module = str(path.relative_to(root))
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = ast.unparse(node.value)
            if owner not in ("self", "cls", "super()"):  # (a subclass calling its base's own)
                found.add((module, owner, node.attr))
    return found


def test_no_firmware_module_reaches_into_another_objects_private_names() -> None:
    reaches = set().union(*(private_reaches(p) for p in sorted(FIRMWARE.rglob("*.py"))))
    unexplained = sorted(r for r in reaches if (r[0], r[1]) not in ALLOWED)
    assert not unexplained, unexplained
    unused = sorted(key for key in ALLOWED if not any((r[0], r[1]) == key for r in reaches))
    assert not unused, f"allowed and no longer needed: {unused}"


def test_the_check_sees_a_reach_through_any_expression(tmp_path: Path) -> None:
    """The check itself: an underscore name through a local, an attribute chain or a call is found; self's is not."""
    module = tmp_path / "probe.py"
    module.write_text("def f(c, self):\n    c._tail = self._x\n    return self.session._stamp + g()._y + c.__len__()\n")
    assert private_reaches(module, tmp_path) == {
        ("probe.py", "c", "_tail"),
        ("probe.py", "self.session", "_stamp"),
        ("probe.py", "g()", "_y"),
    }
