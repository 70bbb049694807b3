"""Host config files checked against declared schemas (msgspec Structs): every key and its type, unknown keys
refused, and a mistake reported with the file, the key, the value found and what is expected, before anything
runs. Used for `host-bridge run --config` and `host-bridge record --config` (TOML) and the board definitions
(board.json).

msgspec rather than pydantic: its typed Structs refuse unknown fields and say where a value is wrong in one
small dependency with no others, it reads the files' types as they are (no silent coercion of "fast" into a
number), and it writes JSON Schema from the same declarations."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec
import msgspec.inspect

from host_bridge.errors import HostBridgeError

T = TypeVar("T", bound=msgspec.Struct)

# What the commands' files share: a duration, and the [tls] section.
Seconds = Annotated[float, msgspec.Meta(ge=0)]


class TLSSection(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """[tls]: TLS to the broker, its certificate verified (files on this host)."""

    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None


class SchemaError(HostBridgeError):
    """A config file that does not match its schema."""


def convert(path: Path | str, raw: Any, schema: type[T]) -> T:
    """`raw` (the parsed file at `path`) as a `schema`; SchemaError naming the key, the value and what is
    expected."""
    try:
        return msgspec.convert(raw, schema)
    except msgspec.ValidationError as exc:
        raise SchemaError(describe(path, raw, schema, str(exc))) from None


def describe(path: Path | str, raw: Any, schema: type[msgspec.Struct], error: str) -> str:
    """msgspec's words ("Expected `int`, got `str` - at `$.baud`") as the file, the key, the value and what is
    expected."""
    found = re.match(r"(.*?)(?: - at `\$(.*)`)?$", error, re.S)
    assert found is not None
    what, where = found.group(1), found.group(2) or ""
    value: Any = raw
    names: list[str | int] = []
    for key, index in re.findall(r"\.(\w+)|\[(\d+)\]", where):
        value = value[key] if key else value[int(index)]
        names.append(key if key else int(index))
    unknown = re.match(r"Object contains unknown field `(\w+)`", what)
    if unknown:
        known = ", ".join(_fields(schema, names))
        return f"{path}: unknown key {_dotted([*names, unknown.group(1)])} (known: {known})"
    key = _dotted(names) or "the file"
    if what.startswith("Object missing required field"):
        return f"{path}: {key}: {what[0].lower() + what[1:]}"
    choices = _type_at(schema, names)
    if isinstance(choices, msgspec.inspect.LiteralType):
        return f"{path}: {key} = {value!r}: expected one of {', '.join(repr(v) for v in choices.values)}"
    return f"{path}: {key} = {value!r}: {what[0].lower() + what[1:]}"


def _dotted(names: list[str | int]) -> str:
    """partitions[2].size, as a person counts: [1] is the first entry."""
    text = ""
    for name in names:
        text += f"[{name + 1}]" if isinstance(name, int) else f".{name}" if text else name
    return text


def _fields(schema: type[msgspec.Struct], names: list[str | int]) -> list[str]:
    """The keys the schema knows in the object at `names`, where an unknown one was found."""
    info = _type_at(schema, names)
    if isinstance(info, msgspec.inspect.ListType):
        info = _unwrap(info.item_type)
    assert isinstance(info, msgspec.inspect.StructType)
    return [f.encode_name for f in info.fields]


def _type_at(schema: type[msgspec.Struct], names: list[str | int]) -> msgspec.inspect.Type:
    info: msgspec.inspect.Type = msgspec.inspect.type_info(schema)
    for name in names:
        info = _unwrap(info)
        if isinstance(info, msgspec.inspect.ListType):
            info = info.item_type
        elif isinstance(info, msgspec.inspect.StructType):
            info = next(f.type for f in info.fields if f.encode_name == name)
    return _unwrap(info)


def _unwrap(info: msgspec.inspect.Type) -> msgspec.inspect.Type:
    """X | None as X."""
    if isinstance(info, msgspec.inspect.UnionType):
        return next(t for t in info.types if not isinstance(t, msgspec.inspect.NoneType))
    return info
