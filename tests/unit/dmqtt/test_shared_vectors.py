"""The shared vectors, byte for byte, on CPython and on the MicroPython Unix port: the MQTT codec
(tests/vectors/mqtt_codec.json) and the serial link frames (tests/vectors/link_frames.json), each with its
decoder fuzzing, and the board's console lines (tests/vectors/console_lines.json). Each runner lives beside its
vectors so that MicroPython runs the very same file."""

from __future__ import annotations

import importlib
import sys

import pytest

from tests.conftest import VECTORS, micropython_vector_results

sys.path.insert(0, str(VECTORS))

FUZZ_ITERATIONS = 3000
SUITES = {
    "codec": ("vector_runner", "mqtt_codec.json"),
    "link": ("link_runner", "link_frames.json"),
    "console": ("console_runner", "console_lines.json"),
}


def run_cpython(iterations: int) -> dict[str, dict[str, str | None]]:
    return {
        suite: dict(importlib.import_module(runner).run_all(str(VECTORS / vectors), iterations))
        for suite, (runner, vectors) in SUITES.items()
    }


# The case names, known at collection without the fuzzing (which runs in the tests, not at import).
CASES = [(suite, name) for suite, results in run_cpython(0).items() for name in sorted(results)]


@pytest.fixture(scope="module")
def cpython_results() -> dict[str, dict[str, str | None]]:
    return run_cpython(FUZZ_ITERATIONS)


@pytest.fixture(scope="module")
def micropython_results() -> dict[str, dict[str, str | None]]:
    return {
        suite: micropython_vector_results(f"{runner}.py", VECTORS / vectors, FUZZ_ITERATIONS)
        for suite, (runner, vectors) in SUITES.items()
    }


def test_codec_vectors_cover_what_the_issue_names(cpython_results: dict[str, dict[str, str | None]]) -> None:
    codec = cpython_results["codec"]
    names = " ".join(codec)
    for needed in ("3.1 spec example", "minimal 5.0 PUBACK", "full 5.0 PUBACK", "PUBREL 0x62", "fuzz"):
        assert needed in names
    for length in ("127", "128", "16383", "16384", "2097151", "2097152"):
        assert f"remaining_length: {length}" in codec


@pytest.mark.parametrize(("suite", "name"), CASES)
def test_cpython(suite: str, name: str, cpython_results: dict[str, dict[str, str | None]]) -> None:
    assert name in cpython_results[suite], "CPython did not run this vector"
    assert cpython_results[suite][name] is None, cpython_results[suite][name]


@pytest.mark.parametrize(("suite", "name"), CASES)
def test_micropython(suite: str, name: str, micropython_results: dict[str, dict[str, str | None]]) -> None:
    results = micropython_results[suite]
    assert name in results, "MicroPython did not run this vector"
    assert results[name] is None, results[name]
