"""Figure 15 of BENCHMARKS.md: what each install of the host package weighs. From the distributions installed in
this environment (importlib.metadata: the files each one's RECORD lists, their sizes on disk), the closure of
durable-mqtt's requirements without extras, with [bench], with [recorder] and with [pipeline]; the package's own
files and the development tools are not counted. tests/integration/test_light_install.py installs the base into a fresh
environment from the registry and checks what comes.

    python tools/bench_install.py            (part of make bench: --only install)
"""

from __future__ import annotations

import json
import re
from importlib.metadata import PackageNotFoundError, distribution
from typing import Any

from bench_report import Section, table

PACKAGE = "durable-mqtt"
EXTRAS = ("bench", "recorder", "pipeline")


def _name(requirement: str) -> tuple[str, str | None]:
    """A Requires-Dist line -> (distribution name, the extra it is for or None)."""
    name = re.split(r"[ ;<>=!~\[]", requirement, maxsplit=1)[0]
    extra = re.search(r'extra\s*==\s*"([^"]+)"', requirement)
    return name, extra.group(1) if extra else None


def closure(names: list[str]) -> set[str]:
    """Every distribution `names` need, themselves included (their own extras not followed)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue  # (a requirement for another platform or Python)
        seen.add(name)
        for requirement in dist.requires or []:
            if ";" in requirement and "extra" in requirement.split(";", 1)[1]:
                continue
            if ";" in requirement and "python_version" in requirement:
                continue
            todo.append(_name(requirement)[0])
    return seen


def size_mb(name: str) -> float:
    files = distribution(name).files or []
    return sum((f.locate().stat().st_size for f in files if f.locate().exists()), 0) / 1e6  # type: ignore[attr-defined]


def figure(quick: bool = False) -> dict[str, Any]:
    own = distribution(PACKAGE)
    base: list[str] = []
    extras: dict[str, list[str]] = {extra: [] for extra in EXTRAS}
    for requirement in own.requires or []:
        name, extra = _name(requirement)
        if extra is None:
            base.append(name)
        elif extra in extras:
            extras[extra].append(name)
    installs: dict[str, Any] = {}
    for label, names in (("base", base), *((f"[{e}]", base + extras[e]) for e in EXTRAS)):
        members = closure(names)
        sizes = {name: round(size_mb(name), 1) for name in sorted(members)}
        installs[label] = {"mb": round(sum(sizes.values()), 1), "distributions": sizes}
    return {"installs": installs}


# -- the report (tools/bench_install.md) ------------------------------------------------------------------------


def report(fig: dict[str, Any], figures: dict[str, Any]) -> Section:
    rows = []
    for label, install in fig["installs"].items():
        biggest = sorted(install["distributions"].items(), key=lambda item: -item[1])[:4]
        rows.append([label, f"{install['mb']:.1f}", len(install["distributions"]),
                     ", ".join(f"{name} {mb:.1f}" for name, mb in biggest)])  # fmt: skip
    return Section({"table": table(["install", "MB", "distributions", "largest (MB)"], rows)})


def main() -> int:
    print(json.dumps(figure(), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
