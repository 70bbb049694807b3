"""The frozen image, as far as a machine without ESP-IDF goes: firmware/manifest.py freezes every module the board
application can import (checked against the import graph from main.py, lazy imports included) and nothing the
board never runs; `host-bridge firmware` picks its builder and runs its commands (stand-ins for make and docker
on the PATH here), and says what to do when it has neither."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from host_bridge.boards.firmware_build import board_modules
from tests.conftest import REPO

FIRMWARE = REPO / "firmware"
# What the board application can import that is firmware (the rest is MicroPython's: builtins, or the port's).
FIRMWARE_PACKAGES = ("dmqtt", "dlink", "dboard")


def module_file(name: str) -> Path | None:
    parts = name.split(".")
    if parts[0] in FIRMWARE_PACKAGES:
        return FIRMWARE.joinpath(*parts).with_suffix(".py")
    app = FIRMWARE / "app" / f"{name}.py"
    # boot.py and main.py are the port's entry scripts, run as source: never imported as modules.
    return app if app.exists() and name not in ENTRY_SCRIPTS else None


def run_on_a_board(tree: ast.AST) -> list[ast.AST]:
    """Every node of `tree` but those under `if False:` (imports for type checkers only, never run)."""
    nodes, todo = [], [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Constant) and node.test.value is False:
            todo.extend(node.orelse)
            continue
        nodes.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return nodes


def imports_of(path: Path) -> set[str]:
    """Every firmware module `path` imports, at the top or inside a function (the board loads lazily)."""
    found = set()
    for node in run_on_a_board(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "__import__":
            names = [arg.value for arg in node.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
        else:
            continue
        found |= {n for n in names if module_file(n) is not None and module_file(n).exists()}  # type: ignore[union-attr]
    # load_modules() imports by a list of names, errors.explain() by a name: those strings count too.
    for node in run_on_a_board(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.replace(".", "_").isidentifier()
        ):
            file = module_file(node.value)
            if file is not None and file.exists():
                found.add(node.value)
    return found


ENTRY_SCRIPTS = ("boot", "main")


def reachable_from_main() -> set[str]:
    """What boot.py and main.py import, and what that imports in turn."""
    todo = imports_of(FIRMWARE / "app" / "boot.py") | imports_of(FIRMWARE / "app" / "main.py")
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        file = module_file(name)
        assert file is not None
        todo |= imports_of(file) - seen
    # Importing a package's module runs the package's __init__ first.
    packages = {name.split(".")[0] for name in seen if "." in name}
    return seen | {f"{p}.__init__" for p in packages if (FIRMWARE / p / "__init__.py").exists()}


def test_the_manifest_freezes_every_module_the_application_can_import() -> None:
    packages, modules = board_modules(FIRMWARE)
    frozen = set(packages) | set(modules)
    reachable = reachable_from_main()
    assert {"board_app", "config", "realboard", "dmqtt.client", "dmqtt.codec_text", "dlink.link"} <= reachable
    assert reachable - frozen == set(), "imported by the application but not frozen"
    # Nothing frozen that the board never runs, and every frozen file there.
    assert frozen - reachable == set(), "frozen but never imported on the board"
    assert all(module_file(name) is not None and module_file(name).exists() for name in frozen)  # type: ignore[union-attr]
    assert "dmqtt.codec_host" not in frozen  # the broker's half of the codec stays on the host


def fake_tools(bin_dir: Path, log: Path, tools: list[str]) -> dict[str, str]:
    """Stand-ins on the PATH that record their arguments; `make` also produces the image where the port's build
    puts it (its -C folder/build-BOARD/firmware.bin)."""
    bin_dir.mkdir()
    for tool in tools:
        script = bin_dir / tool
        script.write_text(
            "#!/bin/sh\n"
            f'echo "{tool} $*" >> {log}\n'
            'if [ "$1" = -C ] && [ "${3#BOARD=}" != "$3" ] && [ "$#" = 4 ]; then\n'
            '  mkdir -p "$2/build-${3#BOARD=}" && echo image > "$2/build-${3#BOARD=}/firmware.bin"\n'
            "fi\n"
        )
        script.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}


def firmware(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "host_bridge", "firmware", *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_with_idf_on_the_path_it_builds_with_micropythons_makefiles(tmp_path: Path) -> None:
    source = tmp_path / "micropython"
    (source / "ports" / "esp32").mkdir(parents=True)
    log = tmp_path / "calls"
    env = fake_tools(tmp_path / "bin", log, ["idf.py", "make", "docker"])
    out = tmp_path / "out"
    result = firmware("--board", "esp32-devkitc", "--micropython", str(source), "--out", str(out), env=env)
    assert result.returncode == 0, result.stderr
    manifest = FIRMWARE / "manifest.py"
    port = source / "ports" / "esp32"
    assert log.read_text().splitlines() == [
        f"make -C {source / 'mpy-cross'}",
        f"make -C {port} BOARD=ESP32_GENERIC FROZEN_MANIFEST={manifest} submodules",
        f"make -C {port} BOARD=ESP32_GENERIC FROZEN_MANIFEST={manifest}",
    ]
    assert (out / "firmware.bin").read_text() == "image\n"


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_without_idf_it_builds_in_espressifs_container(tmp_path: Path, engine: str) -> None:
    source = tmp_path / "micropython"
    (source / "ports" / "esp32" / "build-ESP32_GENERIC_C3").mkdir(parents=True)
    (source / "ports" / "esp32" / "build-ESP32_GENERIC_C3" / "firmware.bin").write_text("from the container\n")
    log = tmp_path / "calls"
    env = fake_tools(tmp_path / "bin", log, [engine])
    result = firmware("--board", "esp32-c3-devkitm-1", "--micropython", str(source), "--out", str(tmp_path), env=env)
    assert result.returncode == 0, result.stderr
    call = log.read_text()
    assert call.startswith(f"{engine} run --rm --user {os.getuid()}:{os.getgid()}")
    assert f"-v {source}:/micropython -v {FIRMWARE}:/dmqtt:ro" in call and "espressif/idf:v5.5.2" in call
    assert "make -C ports/esp32 BOARD=ESP32_GENERIC_C3 FROZEN_MANIFEST=/dmqtt/manifest.py" in call
    assert (tmp_path / "firmware.bin").read_text() == "from the container\n"


def test_without_a_builder_or_a_source_tree_it_prints_the_steps(tmp_path: Path) -> None:
    env = fake_tools(tmp_path / "bin", tmp_path / "calls", [])
    no_source = firmware("--board", "esp32-devkitc", env=env)
    assert no_source.returncode == 2
    assert "git clone --branch v1.29.0 https://github.com/micropython/micropython" in no_source.stderr
    assert "make firmware BOARD=esp32-devkitc MICROPY_DIR=$PWD/micropython" in no_source.stderr
    source = tmp_path / "micropython"
    (source / "ports" / "esp32").mkdir(parents=True)
    no_builder = firmware("--board", "esp32-devkitc", "--micropython", str(source), env=env)
    assert no_builder.returncode == 2 and "neither idf.py on the PATH nor docker or podman" in no_builder.stderr
    sim = firmware("--board", "sim", "--micropython", str(source), env=env)
    assert sim.returncode == 2 and "names no MicroPython board" in sim.stderr


def test_a_dry_run_prints_both_ways_of_building(tmp_path: Path) -> None:
    result = firmware("--board", "esp32-s3-devkitc-1", "--dry-run")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "$ make -C '$MICROPY_DIR/mpy-cross'" in lines
    assert any(line.startswith("$ docker run --rm") and "BOARD=ESP32_GENERIC_S3" in line for line in lines)


def test_make_firmware_as_a_dry_run_installs_nothing(tmp_path: Path) -> None:
    """`make firmware DRY_RUN=1` prints the steps from the source tree: no virtual environment made, no package
    installed (a fresh checkout's dry run used to install the whole project first)."""
    venv = tmp_path / "venv"  # where make would make its environment: it must stay absent
    result = subprocess.run(
        ["make", "--no-print-directory", "firmware", "DRY_RUN=1", f"VENV={venv}", f"PYTHON={sys.executable}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "$ make -C '$MICROPY_DIR/mpy-cross'" in result.stdout and "docker run" in result.stdout
    assert not venv.exists() and "pip" not in result.stdout + result.stderr
