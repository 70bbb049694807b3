"""A bare `make` prints the targets and does nothing else (no install, no sudo); every target a user may run is
listed with what it does."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.conftest import REPO


@pytest.mark.skipif(shutil.which("make") is None, reason="make is how the project is run; CI has it")
def test_a_bare_make_lists_every_target_and_runs_nothing() -> None:
    def make(*args: str) -> subprocess.CompletedProcess[str]:
        # As a user runs it: not as a sub-make of `make test` (whose variables would change what it prints).
        env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
        return subprocess.run(["make", *args], cwd=REPO, capture_output=True, text=True, timeout=30, env=env)

    bare = make()
    assert bare.returncode == 0, bare.stderr
    assert bare.stdout == make("-s", "help").stdout
    makefile = (REPO / "Makefile").read_text()
    targets = re.search(r"^\.PHONY:(.*)$", makefile, re.M)
    assert targets is not None
    listed = {line.split()[1] for line in bare.stdout.splitlines() if line.startswith("make ")}
    assert set(targets.group(1).split()) - {"help"} == listed, bare.stdout
    # Nothing but echo in the recipe: the help installs nothing.
    dry = make("-n", "help")
    assert all(line.startswith("echo ") for line in dry.stdout.splitlines()), dry.stdout
