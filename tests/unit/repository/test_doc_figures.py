"""One source for every measured figure (docs/README's rule): a document that states a measured figure (KB, MB,
ms, us, msg/s, a test count, a suite's time) either links to the BENCHMARKS.md figure that measures it, in the same
paragraph, list item or table row, or quotes it between `<!-- bench:FIGURE.VALUE -->` and `<!-- /bench -->`, where
`python tools/benchmarks.py --render` writes the value from bench/results.json. A suite's time is given as its
bound ("within 6 minutes"), never as a measurement."""

from __future__ import annotations

import json
import re
from pathlib import Path

import benchmarks
import pytest

REPO = Path(__file__).resolve().parents[3]

DOCUMENTS = sorted(
    [REPO / "README.md", REPO / "CHANGELOG.md", *(REPO / "docs").glob("*.md"), *(REPO / "examples").glob("*.md")]
)
UNIT = r"(?:KB|MB|ms|us|msg/s)"
FIGURE = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s?" + UNIT + r"(?![\w/])")
# The words that make a size or a time a measurement rather than a setting or a chip's rating.
MEASURING = re.compile(
    r"\b(measured|measures|takes?|took|keeps|kept|leaves|costs?|spent|reached|reaches|starts in|runs in|sustains?|"
    r"allocates|used about|lasts)\b",
    re.IGNORECASE,
)
TEST_COUNT = re.compile(r"\b\d[\d,]* (?:tests|passed|failed)\b")
SUITE = re.compile(r"\b(?:pytest|make test|the suite|test suite)\b", re.IGNORECASE)
DURATION = re.compile(r"(?<!within )\b\d+(?:\.\d+)?\s?(?:s|seconds|minutes|min)\b")
# A block that names the source of its figures states a specification or a rating, not a measurement of ours.
SOURCED = re.compile(r"datasheet|RFC \d|issue #?\d|pull request|ESP-FAQ|Espressif's", re.IGNORECASE)


def blocks(text: str) -> list[str]:
    """Paragraphs, list items and table rows, code blocks and quoted values left out."""
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    text = benchmarks.QUOTE.sub("", text)
    found: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        if paragraph.lstrip().startswith("|"):
            found += paragraph.splitlines()
        else:
            found += re.split(r"\n(?=\s*[-*] |\s*\d+\. )", paragraph)
    return found


def unsourced(text: str) -> list[str]:
    """The measured figures of a document that neither link to BENCHMARKS.md nor are quoted through the renderer."""
    bad = []
    for block in blocks(text):
        if "BENCHMARKS.md" in block:
            continue
        sourced = SOURCED.search(block)
        for sentence in re.split(r"(?<=[.;])\s", " ".join(block.split())):
            measured = MEASURING.search(sentence) and not sourced
            hits = [m.group(0) for m in FIGURE.finditer(sentence) if measured or "msg/s" in m.group(0)]
            hits += TEST_COUNT.findall(sentence)
            if SUITE.search(sentence):
                hits += DURATION.findall(sentence)
            bad += [f"{hit!r} in: {sentence[:140]}" for hit in hits]
    return bad


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_a_measured_figure_is_linked_or_rendered(document: Path) -> None:
    assert unsourced(document.read_text()) == []


def test_the_check_catches_what_it_is_for() -> None:
    assert unsourced("The client sends 5,000 msg/s on loopback.")
    assert unsourced("A deployed board keeps 26.1 KB free.")
    assert unsourced("All 1,231 tests pass.")
    assert unsourced("make test takes 378 s of pytest.")
    assert unsourced("`make test` takes 6.3 minutes.")
    assert unsourced("A QoS 1 publish() takes 0.4 ms on the board.")
    assert unsourced("Figure 10 of [BENCHMARKS.md](BENCHMARKS.md): a deployed board keeps 26.1 KB free.") == []
    assert unsourced("Each erase is 45 ms (the W25Q32JV's datasheet); the timeout is 280 ms.") == []
    assert unsourced("A sector erase takes 45 ms (the W25Q32JV's datasheet).") == []
    assert unsourced("`make test` runs within 6 minutes of pytest.") == []
    assert unsourced("keeps <!-- bench:heap.worst_kb -->26.1<!-- /bench --> KB") == []


def test_quoted_values_are_the_renderers() -> None:
    values = benchmarks.quotable(benchmarks.reports(json.loads((REPO / "bench" / "results.json").read_text())))
    for document in DOCUMENTS:
        for _, key, quoted, _ in benchmarks.QUOTE.findall(document.read_text()):
            assert key in values, f"{document.name}: no value {key} in the report"
            assert quoted == values[key], f"{document.name}: {key} is {values[key]}, not {quoted}: --render"
