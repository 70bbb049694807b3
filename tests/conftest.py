"""Shared fixtures: paths, the MicroPython Unix port, a Mosquitto and a Spark session per test session."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.processes import dies_with_parent
from host_bridge.vboard.runner import micropython_executable

# No time limit per example: these machines are shared, and speed belongs in `make bench`, not in a test.
settings.register_profile("project", deadline=None)
settings.load_profile("project")

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[1]
FIRMWARE = REPO / "firmware"
VECTORS = REPO / "tests" / "vectors"
APPS = REPO / "tests" / "vboard_apps"


def run_micropython(script: Path, *args: str, heap: str = "16M", timeout: float = 120) -> str:
    """Run a script on the MicroPython Unix port with firmware/ importable; return stdout, fail on error."""
    env = dict(os.environ, MICROPYPATH=f"{FIRMWARE}:{script.parent}")
    result = subprocess.run(
        [micropython_executable(), "-X", f"heapsize={heap}", str(script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, f"micropython failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result.stdout


def micropython_vector_results(runner: str, vector_file: Path, iterations: int) -> dict[str, str | None]:
    """Run a vector runner (tests/vectors/*_runner.py) on MicroPython: {name: None if it passed, else why}."""
    out = run_micropython(VECTORS / runner, str(vector_file), str(iterations))
    results: dict[str, str | None] = {}
    for line in out.splitlines():
        fields = line.split("\t")
        results[fields[1]] = fields[2] if fields[0] == "FAIL" else None
    return results


@pytest.fixture(scope="session")
def mosquitto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mosquitto]:
    with Mosquitto(tmp_path_factory.mktemp("mosquitto")) as broker:
        yield broker


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local Spark session for the whole test run (a JVM start costs seconds), tuned for small data."""
    from dmqtt_pipeline.spark import session

    s = session("local[2]", app="dmqtt-tests", quick_jvm=True)
    yield s
    s.stop()


def spark_tests() -> set[str]:
    """The tests that take the Spark session (a `spark` argument), as file::function, read from their sources."""
    found = set()
    for path in (REPO / "tests").rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any(arg.arg == "spark" for arg in node.args.args):
                found.add(f"{path.relative_to(REPO)}::{node.name}")
    return found


class SparkOnOneWorker:
    """Under pytest-xdist with --dist loadgroup (make test), the tests that use the Spark session run on one
    worker: one JVM, started once, rather than one per worker on a 2-core machine. The scheduler groups them
    itself: xdist 3.8 groups by renaming a marked item's node id in the worker, which pytest 9 ignores (its
    node ids come from Node._id), so `xdist_group` marks group nothing (measured: every worker started Spark)."""

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getvalue("dist") != "loadgroup":
            return None
        from xdist.scheduler import LoadGroupScheduling

        spark = spark_tests()

        class Scheduling(LoadGroupScheduling):
            def _split_scope(self, nodeid: str) -> str:
                return "spark" if nodeid.split("[")[0] in spark else nodeid

        return Scheduling(config, log)


def pytest_configure(config: pytest.Config) -> None:
    start_load(config)
    if config.pluginmanager.hasplugin("xdist"):  # its hook exists only then (pytest -p no:xdist runs without it)
        config.pluginmanager.register(SparkOnOneWorker(), "spark-on-one-worker")


# TEST_LOAD=N: N busy processes beside the whole run (started by the controller only, not by each xdist worker),
# to show that the suite passes on a loaded machine as CI's often is: slower, never red (README, "Tests").
_LOAD: list[subprocess.Popen[bytes]] = []


def start_load(config: pytest.Config) -> None:
    count = int(os.environ.get("TEST_LOAD", "0") or 0)
    if count <= 0 or hasattr(config, "workerinput"):
        return
    busy = [*dies_with_parent("KILL"), sys.executable, "-c", "while True: pass"]
    _LOAD.extend(subprocess.Popen(busy) for _ in range(count))
    print(f"TEST_LOAD: {count} busy processes beside the suite (pids {' '.join(str(p.pid) for p in _LOAD)})")


def pytest_unconfigure(config: pytest.Config) -> None:
    for process in _LOAD:
        process.kill()
        process.wait()
    _LOAD.clear()
