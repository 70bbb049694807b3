"""The README and the pages a newcomer reads first read in short sentences: a median of 18 words a sentence or
fewer, one idea a sentence, lists where a sentence would chain colons. Counted as a reader meets the prose:
headings, tables, code blocks and HTML comments left out; a code span or a link's text is read as written, a list
item is a sentence of its own."""

from __future__ import annotations

import re
import statistics

import pytest

from tests.conftest import REPO

ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.")


def sentence_lengths(markdown: str) -> list[int]:
    """Words per sentence of the document's prose."""
    text = re.sub(r"```.*?```|<!--.*?-->", "", markdown, flags=re.S)
    lengths: list[int] = []
    block: list[str] = []

    def flush() -> None:
        if not block:
            return
        para = re.sub(r"`[^`]*`", "CODE", " ".join(block))
        para = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", para)
        for abbreviation in ABBREVIATIONS:
            para = para.replace(abbreviation, abbreviation.replace(".", ""))
        for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9`(\"'*\[])", para):
            words = re.findall(r"[\w'’-]+", sentence)
            if len(words) >= 2:
                lengths.append(len(words))
        block.clear()

    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "|")):
            flush()
            continue
        if re.match(r"([-*]|\d+\.)\s", stripped):
            flush()
            stripped = re.sub(r"^([-*]|\d+\.)\s+", "", stripped)
        block.append(stripped)
    flush()
    return lengths


# The pages a newcomer reads first (issue 52).
FIRST_PAGES = (
    "README.md",
    "docs/promise.md",
    "docs/hil-bench.md",
    "docs/low-power.md",
    "docs/client.md",
    "docs/virtual-board.md",
)


@pytest.mark.parametrize("page", FIRST_PAGES)
def test_the_median_sentence_is_18_words_or_fewer(page: str) -> None:
    lengths = sentence_lengths((REPO / page).read_text())
    assert len(lengths) > 20, len(lengths)
    assert statistics.median(lengths) <= 18, statistics.median(lengths)


def test_the_count_reads_sentences_as_a_reader_does() -> None:
    text = (
        "# A heading is no sentence\n\nOne two three. Four `five six` seven!\n\n- an item of its own\n\n| a | table |\n"
    )
    assert sentence_lengths(text) == [3, 3, 5]
