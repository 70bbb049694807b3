"""Where the files that run on boards live: firmware/ (the board's code), boards/ (board definitions) and the
virtual board's shims, and where builds of them go.

In a source checkout (the editable install that `make test` uses) they are the repository's own folders. An
installed wheel carries firmware/ and boards/ as package data under host_bridge/_assets/ (pyproject.toml maps
them there), so `host-bridge` runs a board from any folder; its builds go to the user's cache instead."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_PACKAGED = _PACKAGE / "_assets"
_CHECKOUT = _PACKAGE.parent
INSTALLED = (_PACKAGED / "firmware").is_dir()

_ROOT = _PACKAGED if INSTALLED else _CHECKOUT
FIRMWARE = _ROOT / "firmware"  # dmqtt/, dlink/, app/, manifest.py
APP = FIRMWARE / "app"  # the board application (boot.py/main.py and what they import)
BOARDS = _ROOT / "boards"  # one folder per board, each with its board.json
SHIMS = _PACKAGE / "vboard" / "shims"  # the virtual board's machine, esp32 and flash emulation


def is_firmware_app(app: Path | str) -> bool:
    """`app` is the project's board application (whose config.json rules the host checks), not one of the
    user's own."""
    return Path(app).resolve() == APP.resolve()


def build_dir() -> Path:
    """Generated files (staged .mpy trees, partition tables): build/ in a checkout, else the user's cache."""
    if not INSTALLED:
        return _CHECKOUT / "build"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "durable-mqtt"


def built(out: Path, make: Callable[[Path], None]) -> Path:
    """The folder `out` of generated files, made once: by `make` into a fresh folder beside it, then renamed into
    place whole, so that concurrent processes (parallel tests, boards) never read a half-made one. When another
    process made it first, its folder is kept; a `make` that raises leaves nothing behind."""
    if out.is_dir():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        make(work)
        try:
            work.rename(out)
        except OSError:  # another process made it first
            pass
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out
