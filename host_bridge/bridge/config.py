"""The schema of `host-bridge run --config` (TOML), declared once with msgspec: every key and its type, unknown
keys refused. A mistake is reported with the file, the key, the value found and what is expected, before anything
runs.

msgspec rather than pydantic: its typed Structs refuse unknown fields and say where a value is wrong in one
small dependency with no others, it reads the TOML's types as they are (no silent coercion of "fast" into a
number), and it writes JSON Schema from the same declarations."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import msgspec

from host_bridge.errors import HostBridgeError

Baud = Annotated[int, msgspec.Meta(gt=0)]


class BoardEntry(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """[[board]]: a board's serial port, its name in the logs (default: the port's file name), its baud rate."""

    port: str
    name: str | None = None
    baud: Baud | None = None


class TLSSection(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """[tls]: TLS to the broker, its certificate verified (files on this host)."""

    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None


class BridgeConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The whole file: broker = "HOST:PORT", baud, allow = ["HOST:PORT", ...], [tls], [[board]]."""

    broker: str | None = None
    baud: Baud = 115200
    allow: list[str] = []
    tls: TLSSection | None = None
    board: list[BoardEntry] = []


class ConfigError(HostBridgeError):
    """A config file that does not match its schema."""


def load(path: Path, raw: dict[str, Any]) -> BridgeConfig:
    """`raw` (the parsed TOML of `path`) checked against the schema; ConfigError naming the key and the value."""
    try:
        return msgspec.convert(raw, BridgeConfig)
    except msgspec.ValidationError as exc:
        raise ConfigError(describe(path, raw, str(exc))) from None


def describe(path: Path, raw: dict[str, Any], error: str) -> str:
    """msgspec's words ("Expected `int`, got `str` - at `$.baud`") as the file, the key, the value and what is
    expected."""
    found = re.match(r"(.*?)(?: - at `\$(.*)`)?$", error)
    assert found is not None
    what, where = found.group(1), found.group(2) or ""
    keys = [k for k in re.findall(r"\.(\w+)|\[(\d+)\]", where)]
    value: Any = raw
    names = []
    for key, index in keys:
        value = value[key] if key else value[int(index)]
        names.append(key if key else f"[{int(index) + 1}]")
    key = ".".join(names).replace(".[", "[") or "the file"
    unknown = re.match(r"Object contains unknown field `(\w+)`", what)
    if unknown:
        known = ", ".join(_fields(names))
        return f"{path}: unknown key {'.'.join([*names, unknown.group(1)]).replace('.[', '[')} (known: {known})"
    if what.startswith("Object missing required field"):
        return f"{path}: {key}: {what[0].lower() + what[1:]}"
    return f"{path}: {key} = {value!r}: {what[0].lower() + what[1:]}"


def _fields(names: list[str]) -> list[str]:
    """The keys the schema knows where an unknown one was found."""
    struct: type[msgspec.Struct] = BridgeConfig
    if names and names[0] == "tls":
        struct = TLSSection
    elif names and names[0] == "board":
        struct = BoardEntry
    return list(struct.__struct_fields__)
