"""The shared codec vectors, byte for byte, on CPython and on the MicroPython Unix port."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import VECTORS, micropython_vector_results

sys.path.insert(0, str(VECTORS))
import vector_runner  # noqa: E402  (lives beside the vectors so MicroPython runs the same file)

VECTOR_FILE = VECTORS / "mqtt_codec.json"
FUZZ_ITERATIONS = 3000
CPYTHON = dict(vector_runner.run_all(str(VECTOR_FILE), FUZZ_ITERATIONS))
NAMES = sorted(CPYTHON)


@pytest.fixture(scope="module")
def micropython_results() -> dict[str, str | None]:
    return micropython_vector_results("vector_runner.py", VECTOR_FILE, FUZZ_ITERATIONS)


def test_vector_file_covers_what_the_issue_names() -> None:
    names = " ".join(NAMES)
    for needed in ("3.1 spec example", "minimal 5.0 PUBACK", "full 5.0 PUBACK", "PUBREL 0x62", "fuzz"):
        assert needed in names
    for length in ("127", "128", "16383", "16384", "2097151", "2097152"):
        assert f"remaining_length: {length}" in CPYTHON


@pytest.mark.parametrize("name", NAMES)
def test_cpython(name: str) -> None:
    assert CPYTHON[name] is None, CPYTHON[name]


@pytest.mark.parametrize("name", NAMES)
def test_micropython(name: str, micropython_results: dict[str, str | None]) -> None:
    assert name in micropython_results, "MicroPython did not run this vector"
    assert micropython_results[name] is None, micropython_results[name]
