"""Command-line mistakes end with exit 2 and a message that says what a right value looks like: no traceback,
and nothing created (no flash file for a board that never starts)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--heap", "lots"], "argument --heap: 'lots' is not a size: give bytes, or a number with k or M"),
        (["--heap", "10q"], "argument --heap: '10q' is not a size"),
        (["--flash-size", "0"], "argument --flash-size: '0' is not a size"),
    ],
)
def test_a_size_that_is_not_one_is_refused_before_anything_runs(tmp_path: Path, args: list[str], message: str) -> None:
    flash = tmp_path / "b.flash"
    run = subprocess.run(
        [sys.executable, "-m", "host_bridge", "vboard", "--flash", str(flash), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert run.returncode == 2 and message in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and not flash.exists()
