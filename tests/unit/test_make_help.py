"""A bare `make` prints the targets and does nothing else (no install, no sudo); every target a user may run is
listed with what it does."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.conftest import REPO


@pytest.mark.skipif(shutil.which("make") is None, reason="make is how the project is run; CI has it")
def test_a_bare_make_lists_every_target_and_runs_nothing() -> None:
    bare = subprocess.run(["make", "--no-print-directory"], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert bare.returncode == 0, bare.stderr
    assert bare.stdout == subprocess.run(["make", "-s", "help"], cwd=REPO, capture_output=True, text=True).stdout
    makefile = (REPO / "Makefile").read_text()
    targets = re.search(r"^\.PHONY:(.*)$", makefile, re.M)
    assert targets is not None
    listed = {line.split()[1] for line in bare.stdout.splitlines() if line.startswith("make ")}
    assert set(targets.group(1).split()) - {"help"} == listed, bare.stdout
    # Nothing but echo in the recipe: the help installs nothing.
    dry = subprocess.run(["make", "-n", "help"], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert all(line.startswith("echo ") for line in dry.stdout.splitlines()), dry.stdout
