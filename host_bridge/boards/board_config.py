"""The board's config.json on the host. Its rules have one owner, the firmware's checker (firmware/app/config.py,
which the board runs at boot); the host runs that very file before anything is written, flashed or booted
(`deploy`, `vboard`, the bench's virtual boards), so a bad file is reported with its path, line and column
instead of by a board that has already started. docs/config.schema.json describes the same file for editors."""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from host_bridge import assets
from host_bridge.errors import HostBridgeError


class BoardConfigError(HostBridgeError):
    """A config.json (or its secrets.json) the board would refuse."""


@functools.cache
def checker() -> ModuleType:
    """The firmware's own config checker, loaded from its source once per process, with its texts
    (config_text, which it looks up by name when it refuses a file, as the board does) and a gateway's checker
    (gateway_config, which it hands a gateway's config to)."""
    sys.modules.setdefault("config_text", _load("config_text", assets.APP / "config_text.py"))
    sys.modules.setdefault("gateway_config", _load("gateway_config", assets.APP / "gateway_config.py"))
    return _load("board_config", assets.APP / "config.py")


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_json(path: Path) -> Any:
    """A JSON file's value; BoardConfigError with the path, line and column of a syntax error."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise BoardConfigError(f"{path} does not exist") from None
    except OSError as exc:
        raise BoardConfigError(f"cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise BoardConfigError(
            f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None


def check_value(raw: Any, where: str = "config.json", secrets: Path | None = None) -> dict[str, Any]:
    """`raw` (a parsed config.json), with `secrets` (a secrets.json) merged as the board merges it, as the board
    reads it; BoardConfigError naming the key and what is expected. Messages name fields, never secret values."""
    module = checker()
    try:
        if secrets is not None:
            module.merge_secrets(raw, read_json(secrets))
        checked: dict[str, Any] = module.check(raw)
    except module.ConfigError as exc:
        raise BoardConfigError(f"{where}{'' if secrets is None else f' with {secrets}'}: {exc}") from None
    return checked


def check_file(path: Path, secrets: Path | None = None) -> dict[str, Any]:
    """config.json, with secrets.json merged as the board merges it, checked by the board's rules."""
    return check_value(read_json(path), str(path), secrets)
