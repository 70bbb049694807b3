"""The project's modules keep each other's invariants through named members, not private ones: no module reads or
writes another object's underscore name, but for the few below, each with its reason (docs/firmware-style.md).
What one module needs of another's state is a member without an underscore, documented where the other interfaces
are (dmqtt/interfaces.py: Engine, what the asyncio face drives of the client).

A reach is counted by its name, not only by the object it goes through: `obj._x`, `getattr(obj, "_x", ...)` (and
setattr, hasattr), and `self._x` in a subclass whose base another module defines, where the subclass's own module
never sets `_x` (a base's private state used from outside the base's module). The firmware's and the host's
modules are held to it alike."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

FIRMWARE = REPO / "firmware"
HOST = REPO / "host_bridge"

_SESSION = "the session's own handling of a message too large for the broker, split out of session.py to load only "
_SESSION += "when one is (rule 6): Session's code in a module of its own"
# (module, the object it reaches into): (the names it may use, why). Kept short: a new entry needs a reason a
# reviewer accepts, and a new name in an entry is a new entry's worth.
ALLOWED: dict[tuple[str, str], tuple[frozenset[str], str]] = {
    ("dmqtt/oversize.py", "session"): (frozenset({"_addr", "_rel_addr", "_serial", "_state", "_tx"}), _SESSION),
    ("dmqtt/wake.py", "ring"): (
        frozenset({"_after", "_hdr", "_head", "_offset", "_read", "_read_at", "_seq", "_staged"}),
        "the cheap wake's hint reads where the ring's head ends: a method on RingJournal would be heap on every ring "
        "board, for what only a board that deep-sleeps uses (rule 6)",
    ),
    ("dmqtt/wake.py", "session"): (
        frozenset({"_free_after", "_free_pids"}),
        "the same hint reads the session's run of free packet ids (rule 6)",
    ),
    ("dmqtt/aio.py", "_core"): (
        frozenset({"_io_queue"}),
        "MicroPython's asyncio has no public way to wait on a socket's readiness without a stream object: its IO "
        "queue is the one the streams use",
    ),
    ("dmqtt/confirm.py", "self (Session)"): (
        frozenset({"_queue", "_rel_addr", "_serial", "_slot_for", "_state"}),
        "ConfirmingSession is a Session that keeps messages until the recorder confirms them: it re-queues and "
        "finds slots as the session does, one class's state in two modules (confirmation loads only with it)",
    ),
    ("app/board_app.py", "sys.implementation"): (
        frozenset({"_machine"}),
        "MicroPython's own attribute, the port's machine: how the application tells the Unix port from a chip",
    ),
    ("dmqtt/journal_file.py", "self (Framing)"): (
        frozenset({"_check", "_mv", "_rbuf", "_rmv", "_seal"}),
        "Framing (journal_record.py) is the two journal backends' record framing: one copy of it, its helpers theirs",
    ),
    ("dmqtt/journal_ring.py", "self (Framing)"): (
        frozenset({"_check", "_mv", "_pid_record", "_rbuf", "_rmv", "_seal"}),
        "the same framing, for the ring",
    ),
    # The host: the bench's DUTs and the virtual board's emulation.
    ("hil/real_dut.py", "self (Dut)"): (frozenset({"_begin_boot"}), "Dut's boot bookkeeping, a hook for its kinds"),
    ("hil/virtual_dut.py", "self (Dut)"): (frozenset({"_begin_boot"}), "the same hook"),
    ("hil/real_dut.py", "self.dut"): (
        frozenset({"_serial"}),
        "the modem lines of a SerialDut's port: a helper class of the same module, for esptool's reset",
    ),
    ("vboard/shims/aioespnow.py", "asyncio.core"): (
        frozenset({"_io_queue"}),
        "as dmqtt/aio.py: MicroPython's asyncio waits on readiness only through its IO queue",
    ),
    ("vboard/shims/machine.py", "pin"): (
        frozenset({"_handler", "_seen", "_trigger"}),
        "the emulation's interrupt dispatch runs a Pin's handler, as the port's C code does, outside the class",
    ),
    ("vboard/shims/machine.py", "timer"): (frozenset({"_due"}), "the same dispatch, for a Timer's callback"),
    ("vboard/shims/machine.py", "time"): (frozenset({"_port"}), "the port's own clock, under the time shim"),
    ("vboard/shims/network.py", "time"): (frozenset({"_port"}), "the same clock"),
    ("vboard/shims/vair.py", "socket"): (frozenset({"_port"}), "the port's own socket module, under the shim"),
    ("vboard/shims/vboard_state.py", "socket"): (frozenset({"_port"}), "the same socket module"),
    ("vboard/shims/vboard_state.py", "time"): (frozenset({"_port"}), "the emulation's clock, the port's own"),
    ("vboard/shims/network.py", "made"): (
        frozenset({"_sta"}),
        "the one station interface the shim keeps: a second WLAN(STA_IF) is the same interface, as on a chip",
    ),
    ("vboard/shims/socket.py", "network"): (
        frozenset({"_sta"}),
        "a socket works only while the station is up, as lwIP's does: the shims share the station's state",
    ),
    ("vboard/wifi.py", "ap"): (
        frozenset({"_board_event", "_tick"}),
        "the host's access points, driven by the module that runs them: one module's class and its loop",
    ),
    ("vboard/wiring.py", "wiring"): (frozenset({"_check_sharing"}), "a classmethod's check of the instance it makes"),
}

_REFLECTION = ("getattr", "setattr", "hasattr")


def private_reaches(path: Path, root: Path = FIRMWARE) -> set[tuple[str, str, str]]:
    """(module, object, name) for each reach into another object's underscore name in the module (see above)."""
    module = str(path.relative_to(root))
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = ast.unparse(node.value)
            if owner not in ("self", "cls", "super()"):  # (self's: below, for a subclass of another module's base)
                found.add((module, owner, node.attr))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _REFLECTION
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            found.add((module, ast.unparse(node.args[0]), node.args[1].value))
    found |= _inherited_reaches(module, tree)
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _inherited_reaches(module: str, tree: ast.Module) -> set[tuple[str, str, str]]:
    """`self._x` in a class whose base is imported from another module, where this module never sets `_x` nor
    defines it: the base's private state, used from outside its module."""
    imported = {
        alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom) for alias in node.names
    }
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and ast.unparse(node.value) == "self":
            own.add(node.attr)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            own |= {t.id for t in targets if isinstance(t, ast.Name)}
    found = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        bases = [ast.unparse(b) for b in cls.bases if ast.unparse(b).split(".")[0] in imported]
        if not bases:
            continue
        for node in ast.walk(cls):
            if (
                isinstance(node, ast.Attribute)
                and ast.unparse(node.value) == "self"
                and _private(node.attr)
                and node.attr not in own
            ):
                found.add((module, f"self ({bases[0]})", node.attr))
    return found


def all_reaches() -> set[tuple[str, str, str]]:
    firmware = [private_reaches(p) for p in sorted(FIRMWARE.rglob("*.py"))]
    host = [private_reaches(p, HOST) for p in sorted(HOST.rglob("*.py"))]
    return set().union(*firmware, *host)


def test_no_module_reaches_into_another_objects_private_names() -> None:
    reaches = all_reaches()
    unexplained = sorted(r for r in reaches if r[2] not in ALLOWED.get((r[0], r[1]), (frozenset(), ""))[0])
    assert not unexplained, unexplained
    unused = sorted((key, name) for key, (names, _) in ALLOWED.items() for name in names if (*key, name) not in reaches)
    assert not unused, f"allowed and no longer needed: {unused}"


def test_the_check_sees_a_reach_through_any_expression(tmp_path: Path) -> None:
    """The check itself: an underscore name through a local, an attribute chain, a call or getattr is found;
    self's is not, but for a base another module defines."""
    module = tmp_path / "probe.py"
    module.write_text(
        "from base import Base\n"
        "def f(c, self):\n    c._tail = self._x\n    return self.session._stamp + g()._y + c.__len__()\n"
        "def h(ring):\n    return getattr(ring, '_head', -1)\n"
        "class Sub(Base):\n    def m(self):\n        self._mine = 1\n        return self._mine + self._theirs\n"
    )
    assert private_reaches(module, tmp_path) == {
        ("probe.py", "c", "_tail"),
        ("probe.py", "self.session", "_stamp"),
        ("probe.py", "g()", "_y"),
        ("probe.py", "ring", "_head"),
        ("probe.py", "self (Base)", "_theirs"),
    }
