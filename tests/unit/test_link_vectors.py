"""The shared link frame vectors and the frame decoder fuzzing, on CPython and on the MicroPython Unix port."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import VECTORS, micropython_vector_results

sys.path.insert(0, str(VECTORS))
import link_runner  # noqa: E402  (lives beside the vectors so MicroPython runs the same file)

VECTOR_FILE = VECTORS / "link_frames.json"
FUZZ_ITERATIONS = 3000
CPYTHON = dict(link_runner.run_all(str(VECTOR_FILE), FUZZ_ITERATIONS))
NAMES = sorted(CPYTHON)


@pytest.fixture(scope="module")
def micropython_results() -> dict[str, str | None]:
    return micropython_vector_results("link_runner.py", VECTOR_FILE, FUZZ_ITERATIONS)


@pytest.mark.parametrize("name", NAMES)
def test_cpython(name: str) -> None:
    assert CPYTHON[name] is None, CPYTHON[name]


@pytest.mark.parametrize("name", NAMES)
def test_micropython(name: str, micropython_results: dict[str, str | None]) -> None:
    assert name in micropython_results, "MicroPython did not run this vector"
    assert micropython_results[name] is None, micropython_results[name]
