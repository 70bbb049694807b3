"""One version, from one place (dmqtt.__version__): the host package's metadata, the mip packages, the
CHANGELOG's newest entry and `host-bridge --version` all say the same."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib.metadata import version

import dmqtt
from tests.conftest import FIRMWARE, REPO


def test_the_version_is_one() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", dmqtt.__version__)
    assert version("durable-mqtt") == dmqtt.__version__  # pyproject.toml reads it from dmqtt
    for package in ("dmqtt", "dlink"):
        assert json.loads((FIRMWARE / package / "package.json").read_text())["version"] == dmqtt.__version__
    newest = re.search(r"^## (\S+)", (REPO / "CHANGELOG.md").read_text(), re.M)
    assert newest is not None and newest.group(1) == dmqtt.__version__, "CHANGELOG.md has no entry for this version"


def test_host_bridge_says_its_version() -> None:
    out = subprocess.run([sys.executable, "-m", "host_bridge", "--version"], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0 and out.stdout.strip() == f"host-bridge {dmqtt.__version__} (dmqtt client)"
