"""Every ```python snippet of README.md and docs/*.md runs, so that none of them rots: host snippets in CPython
(in a temporary folder, against a Mosquitto of the test's own wherever they name a broker on 127.0.0.1:1883, with a
recorder's store in telemetry/ for a query on one),
and snippets that use the board's client (dmqtt: blocking, asyncio or confirming) as the application of a
virtual board, with the library in lib/ as mip installs it, and the documentation's example broker address
replaced by that Mosquitto's."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from host_bridge.boards.definition import BoardDefinition
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.cycle import boot_once
from host_bridge.hil.virtual_dut import VirtualDut
from tests.conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"```python\n(.*?)```", re.S)
# The example broker of the docs (a LAN address no test may reach) and the local one of the host snippets.
BOARD_BROKER = re.compile(r'"192\.168\.1\.10", 1883')
HOST_BROKER = "127.0.0.1:1883"


def snippets() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        text = doc.read_text()
        for match in FENCE.finditer(text):
            line = text[: match.start()].count("\n") + 2
            found.append((f"{doc.relative_to(REPO)}:{line}", match.group(1)))
    return found


SNIPPETS = snippets()


def test_the_docs_have_snippets_to_run() -> None:
    assert len(SNIPPETS) >= 4, SNIPPETS


@pytest.mark.parametrize(("where", "code"), SNIPPETS, ids=[w for w, _ in SNIPPETS])
def test_snippet_runs(where: str, code: str, tmp_path: Path, mosquitto: Mosquitto) -> None:
    compile(code, where, "exec")  # at least valid Python everywhere
    host, port = mosquitto.address.split(":")
    if re.search(r"dmqtt\.(client|aio|confirm)\b", code):
        app = tmp_path / "app"
        app.mkdir()
        (app / "main.py").write_text(BOARD_BROKER.sub(f'"{host}", {port}', code))
        dut = VirtualDut(
            "doc",
            BoardDefinition.load("sim"),
            flash=tmp_path / "b.flash",
            console_log=tmp_path / "console.log",
            app=app,
            library=True,
        )
        try:
            dut.configure({"client_id": "doc"})
            end = boot_once(dut, timeout=60)
        finally:
            dut.close()
        assert end.status == 0 and "Traceback" not in end.console, (
            f"{where} failed on the virtual board:\n{end.console}"
        )
    else:
        if "telemetry_views" in code:  # a query on a recorder's store: one in the folder it names
            from tests.pipeline.datasets import Msg, write_dataset

            write_dataset(tmp_path / "telemetry", [Msg(f"b{d}", 1, s, s * 60_000) for d in range(3) for s in range(20)])
        script = tmp_path / "snippet.py"
        script.write_text(code.replace(HOST_BROKER, mosquitto.address))
        result = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, f"{where} failed:\n{result.stdout}\n{result.stderr}"
