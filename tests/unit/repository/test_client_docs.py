"""docs/client.md's API reference names every public name of the library (the modules the mip packages install
that an application uses): each module's public functions, classes and constants in its section, each class's
public methods, properties and attributes in the class's section. A name added to the code and not to the docs
fails here; so does a section that documents a name the code no longer has."""

from __future__ import annotations

import ast
import re

import pytest

from tests.conftest import FIRMWARE, REPO

# The library's public modules, as an application imports them (the codec has docs/codec.md; the session and
# the journal backends are internal: the application reaches them through the client and open_journal()).
MODULES = {
    "dmqtt": "dmqtt/__init__.py",
    "dmqtt.client": "dmqtt/client.py",
    "dmqtt.aio": "dmqtt/aio.py",
    "dmqtt.robust": "dmqtt/robust.py",
    "dmqtt.confirm": "dmqtt/confirm.py",
    "dmqtt.errors": "dmqtt/errors.py",
    "dmqtt.usage": "dmqtt/usage.py",
    "dmqtt.journal": "dmqtt/journal.py",
    "dmqtt.wake": "dmqtt/wake.py",
    "dmqtt.transport": "dmqtt/transport.py",
    "dmqtt.tls": "dmqtt/tls.py",
    "dmqtt.wifi": "dmqtt/wifi.py",
    "dlink.transport": "dlink/transport.py",
    "dlink.now_radio": "dlink/now_radio.py",
    "dlink.now_node": "dlink/now_node.py",
    "dlink.now_transport": "dlink/now_transport.py",
}
DOC = REPO / "docs" / "client.md"


def public(name: str) -> bool:
    return not name.startswith("_") or name == "__version__"


def class_members(node: ast.ClassDef) -> set[str]:
    """Public methods, properties and class attributes, and the attributes __init__ sets on self."""
    members: set[str] = set()
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            if public(item.name):
                members.add(item.name)
            if item.name == "__init__":
                for sub in ast.walk(item):
                    if (
                        isinstance(sub, ast.Attribute)
                        and isinstance(sub.ctx, ast.Store)
                        and isinstance(sub.value, ast.Name)
                        and sub.value.id == "self"
                        and public(sub.attr)
                    ):
                        members.add(sub.attr)
        elif isinstance(item, ast.Assign | ast.AnnAssign):
            targets = item.targets if isinstance(item, ast.Assign) else [item.target]
            members |= {t.id for t in targets if isinstance(t, ast.Name) and public(t.id)}
    return members


def api() -> dict[str, set[str]]:
    """Section title -> the names it must hold: "module" for its top-level names, "module.Class" for a class's
    members (a class documented in a section of its own) or, for a class without members of its own (the
    exceptions), in its module's section."""
    sections: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse((FIRMWARE / path).read_text())
        top: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and public(node.name):
                members = class_members(node)
                if members - {"reason", "reason_code", "code"}:
                    sections[f"{module}.{node.name}"] = members
                else:
                    top |= {node.name} | members  # an exception and its attributes: in the module's table
            elif isinstance(node, ast.FunctionDef) and public(node.name):
                top.add(node.name)
            elif isinstance(node, ast.Assign):
                top |= {t.id for t in node.targets if isinstance(t, ast.Name) and public(t.id) and t.id != "const"}
        if top:
            sections[module] = top
    return sections


def documented() -> dict[str, set[str]]:
    """Section title -> every name in backticks in it (a `call(args)` counts as its name)."""
    text = DOC.read_text()
    reference = text[text.index("## API reference") :]
    out: dict[str, set[str]] = {}
    for block in re.split(r"^### ", reference, flags=re.M)[1:]:
        title, _, body = block.partition("\n")
        names: set[str] = set()
        for ticked in re.findall(r"`([^`]+)`", body):
            names |= set(re.findall(r"(?:await )?([A-Za-z_][A-Za-z0-9_]*)\s*(?:\(|$|,)", ticked))
            names |= {w for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", ticked)}
        out[title.strip().strip("`")] = names
    return out


@pytest.mark.parametrize("section", sorted(api()))
def test_every_public_name_is_in_the_api_reference(section: str) -> None:
    docs = documented()
    assert section in docs, f"docs/client.md has no section `### \\`{section}\\`` in its API reference"
    missing = api()[section] - docs[section]
    assert not missing, f"undocumented in docs/client.md, section {section}: {sorted(missing)}"


def test_every_class_section_names_a_class_the_code_has() -> None:
    stale = set(documented()) - set(api())
    assert not stale, f"docs/client.md documents what the code does not have: {sorted(stale)}"
