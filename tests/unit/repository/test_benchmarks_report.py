"""BENCHMARKS.md is what tools/benchmarks.py renders from bench/results.json and the templates beside the tools:
the figures' tables and goal rows come from the data, and the opening's table of goals holds every figure's goals."""

from __future__ import annotations

import json
import re
from pathlib import Path

import benchmarks
import pytest

REPO = Path(__file__).resolve().parents[3]

RESULTS = json.loads((REPO / "bench" / "results.json").read_text())


@pytest.fixture(scope="module")
def rendered() -> str:
    return benchmarks.render(RESULTS)


def tables(text: str) -> list[list[str]]:
    found: list[list[str]] = []
    block: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append(line)
        elif block:
            found.append(block)
            block = []
    return found


def test_the_report_is_what_the_renderer_gives_for_the_results(rendered: str) -> None:
    committed = (REPO / "BENCHMARKS.md").read_text()
    assert tables(committed) == tables(rendered), (
        "a table of BENCHMARKS.md is not the renderer's: make bench, or --render"
    )
    assert committed == rendered, "BENCHMARKS.md differs from `python tools/benchmarks.py --render`"


def test_the_opening_holds_every_figures_goals(rendered: str) -> None:
    opening = tables(rendered)[0]
    assert opening[0] == "| goal | target | measured |  | figure |"
    rows = opening[2:]
    goals = [g for section in benchmarks.reports(RESULTS).values() for g in section.goals]
    assert len(rows) == len(goals) > 30
    for row, goal in zip(rows, goals, strict=True):
        assert row.startswith(f"| {goal.text} | {goal.target} | {goal.measured} |")
        assert f"[{goal.figure}](#" in row
    # Each goal the figures' own goal tables state is in the opening, with the same measure and verdict.
    for block in tables(rendered)[1:]:
        if block[0] in ("| goal |  | measured |  |", "| figure | goal | measured |  |"):
            for line in block[2:]:
                text, target, measured, verdict = (cell.strip() for cell in line.strip("|").split("|"))
                assert any(r.startswith(f"| {text} | {target} | {measured} | {verdict} |") for r in rows), line
    missed = [goal for goal in goals if goal.ok is False]
    assert sum(1 for row in rows if "| **missed** |" in row) == len(missed)
    assert f"Of {len(goals)} goals, {len(missed)} are missed" in rendered


def test_every_figure_has_a_heading_its_goals_link_to(rendered: str) -> None:
    anchors = set(re.findall(r"\]\(#([\w-]+)\)", rendered))
    headings = {benchmarks.slug(title) for title, _ in benchmarks.HEADING.findall(rendered)}
    assert anchors <= headings
    assert len(headings) >= len(benchmarks.FIGURES)


def test_prose_is_wrapped_at_the_docs_width(rendered: str) -> None:
    long = [line for line in rendered.splitlines()
            if len(line) > benchmarks.WIDTH and not line.startswith("|") and " " in line.strip("- ")]  # fmt: skip
    assert not [line for line in long if len(max(line.split(), key=len)) < len(line) - benchmarks.WIDTH]


def test_a_part_is_left_out_when_the_run_lacks_its_values() -> None:
    template = "Intro {{a}}.\n\n<!-- part: extra -->\nMore {{b}} and {{c}}.\n"
    assert benchmarks.fill(template, {"a": "1"}, "t") == "Intro 1."
    assert benchmarks.fill(template, {"a": "1", "b": "2", "c": "3"}, "t") == "Intro 1.\n\nMore 2 and 3."


def test_a_template_and_its_tool_out_of_step_are_refused() -> None:
    with pytest.raises(benchmarks.ReportError, match=r"names \['a'\]"):
        benchmarks.fill("Intro {{a}}.", {}, "t")
    with pytest.raises(benchmarks.ReportError, match=r"gives \['typo'\]"):
        benchmarks.fill("Intro {{a}}.", {"a": "1", "typo": "2"}, "t")
    # A value for a part that is left out (another of its values missing) is a tool out of step too.
    with pytest.raises(benchmarks.ReportError, match=r"gives \['b'\]"):
        benchmarks.fill("Intro {{a}}.\n\n<!-- part: x -->\n{{b}} {{c}}\n", {"a": "1", "b": "2"}, "t")


def test_a_missed_goal_is_bold_in_the_opening() -> None:
    results = json.loads(json.dumps(RESULTS))
    results["figures"] = {"boot": results["figures"]["boot"] | {"goal_ms": 1}}
    text = benchmarks.render(results)
    assert "Of 1 goals, 1 are missed (in bold), in figures [8](#8-virtual-board-boot)." in text
    assert "| **missed** | [8](#8-virtual-board-boot) |" in text


def test_rendering_fills_the_values_the_documents_quote(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    stale = "The lowest keeps <!-- bench:heap.worst_kb -->1.0<!-- /bench --> KB.\n"
    (tmp_path / "README.md").write_text(stale)
    (tmp_path / "docs" / "page.md").write_text(stale)
    benchmarks.write_report(tmp_path, RESULTS)
    worst = benchmarks.quotable(benchmarks.reports(RESULTS))["heap.worst_kb"]
    for document in (tmp_path / "README.md", tmp_path / "docs" / "page.md"):
        assert document.read_text() == stale.replace("1.0", worst)
    assert (tmp_path / "BENCHMARKS.md").read_text() == (REPO / "BENCHMARKS.md").read_text()
