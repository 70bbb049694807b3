"""Figure 16 of BENCHMARKS.md: what each heap idiom of the firmware saves (docs/firmware-style.md states them as
rules). Each idiom is a pair of small modules that do the same thing, written the plain way and the firmware's way,
compiled by mpy-cross as a board gets its code (-O3) and imported into a fresh MicroPython Unix port, one process
each: the heap it takes is gc.mem_free() before the import less after it (a collection before each reading). The
Unix port's objects are 64-bit, twice an ESP32's words: the bytes here are about twice a chip's.

    python tools/bench_idioms.py            (part of make bench: --only idioms)
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_report import Section, table

from host_bridge.boards.firmware_build import MPY_CROSS_OPTIONS, mpy_cross_executable
from host_bridge.vboard.runner import micropython_command

# Each idiom: (name, rule, unit, count, plain module, the firmware's module). Each module defines make(), which
# builds what is measured (`count` of the unit); the heap counted is the module's code and what make() keeps.
_FUNCS = "\n".join(f"def f{i}(x):\n    global total\n    total += x + {i}\n    return total\n" for i in range(6))
_METHODS = "\n".join(
    f"    def f{i}(self, x):\n        self.total += x + {i}\n        return self.total\n" for i in range(6)
)
_TEXTS = [f"the value of setting number {i} must be between 0 and {i * 100}" for i in range(12)]
_HELPER = "\n".join(f"def helper{i}(data):\n    return [b ^ {i} for b in data if b > {i}]\n" for i in range(24))

IDIOMS: list[tuple[str, str, str, int, str, str]] = [
    (
        "module",
        "a module of functions rather than a class, for what a board has one of",
        "the whole",
        1,
        "class Engine:\n    def __init__(self):\n        self.total = 0\n"
        + _METHODS
        + "\nkept = []\ndef make():\n    kept.append(Engine())\n",
        "total = 0\n" + _FUNCS + "\ndef make():\n    pass\n",
    ),
    (
        "property",
        "methods rather than properties",
        "the whole",
        1,
        "class State:\n    def __init__(self):\n        self._a = self._b = self._c = self._d = 0\n"
        + "".join(f"    @property\n    def {n}(self):\n        return self._{n}\n" for n in "abcd")
        + "\nkept = []\ndef make():\n    kept.append(State())\n",
        "class State:\n    def __init__(self):\n        self._a = self._b = self._c = self._d = 0\n"
        + "".join(f"    def get_{n}(self):\n        return self._{n}\n" for n in "abcd")
        + "\nkept = []\ndef make():\n    kept.append(State())\n",
    ),
    (
        "array",
        "numbers in a preallocated array rather than attributes",
        "an object of 8 numbers",
        32,
        "class Counters:\n    def __init__(self):\n"
        + "".join(f"        self.c{i} = 0\n" for i in range(8))
        + "\nkept = []\ndef make():\n    for _ in range(32):\n        kept.append(Counters())\n",
        "from array import array\nkept = []\ndef make():\n    for _ in range(32):\n"
        "        kept.append(array('i', [0] * 8))\n",
    ),
    (
        "tuple",
        "a tuple rather than an object, for a record of a few fields",
        "a record of 3 fields",
        64,
        "class Entry:\n    def __init__(self, pid, qos, addr):\n        self.pid = pid\n        self.qos = qos\n"
        "        self.addr = addr\n\nkept = []\ndef make():\n    for i in range(64):\n"
        "        kept.append(Entry(i, 1, i * 16))\n",
        "kept = []\ndef make():\n    for i in range(64):\n        kept.append((i, 1, i * 16))\n",
    ),
    (
        "texts",
        "numbered texts in a module loaded only to say a failure, rather than strings where they are raised",
        "12 failure texts",
        1,
        "def check(i, v):\n"
        + "".join(
            f"    if i == {i} and v > {i * 100}:\n        raise ValueError({t!r})\n" for i, t in enumerate(_TEXTS)
        )  # fmt: skip
        + "\ndef make():\n    pass\n",
        "def check(i, v):\n    if v > i * 100:\n        from idiom_texts import TEXTS\n"
        "        raise ValueError(TEXTS[i])\n\ndef make():\n    pass\n",
    ),
    (
        "lazy",
        "a module imported where it is needed, rather than at the top, for code a run may not use",
        "a 24-function helper",
        1,
        "import idiom_helper\n\ndef work(data):\n    return idiom_helper.helper0(data)\n\ndef make():\n    pass\n",
        "def work(data):\n    import idiom_helper\n    return idiom_helper.helper0(data)\n\ndef make():\n    pass\n",
    ),
    (
        "names",
        "few distinct names: each new one is interned for good",
        "a name",
        64,
        "kept = []\ndef make():\n    class Bag:\n        pass\n    bag = Bag()\n    for i in range(64):\n"
        "        setattr(bag, 'reading_%d_value' % i, i)\n    kept.append(bag)\n",
        "kept = []\ndef make():\n    bag = {}\n    for i in range(64):\n        bag[i] = i\n    kept.append(bag)\n",
    ),
    (
        "header",
        "a module's header as # comments rather than a docstring",
        "a 600-byte header",
        1,
        '"""' + ("The header of a module, said once and at length. " * 12) + '"""\n\ndef make():\n    pass\n',
        "# " + ("The header of a module, said once and at length. " * 12) + "\n\ndef make():\n    pass\n",
    ),
]
# Modules the pairs import (compiled beside them).
SUPPORT = {"idiom_texts": f"TEXTS = {tuple(_TEXTS)!r}\n", "idiom_helper": _HELPER}

_DRIVER = """import gc, sys
sys.path.insert(0, {folder!r})
gc.collect(); gc.collect()
before = gc.mem_free()
import {name} as m
m.make()
gc.collect(); gc.collect()
print(before - gc.mem_free())
"""


def _compile(folder: Path, name: str, source: str) -> int:
    """`source` as `name`.mpy in `folder`, compiled as a board's code is; returns the .mpy's size."""
    src = folder / f"{name}.py"
    src.write_text(source)
    out = folder / f"{name}.mpy"
    subprocess.run([mpy_cross_executable(), *MPY_CROSS_OPTIONS, "-o", str(out), str(src)], check=True)
    src.unlink()
    return out.stat().st_size


def heap_of(folder: Path, name: str) -> int:
    driver = folder / f"drive_{name}.py"
    driver.write_text(_DRIVER.format(folder=str(folder), name=name))
    run = subprocess.run([*micropython_command(), "-X", "heapsize=512k", str(driver)], capture_output=True,
                         text=True, timeout=60, check=True)  # fmt: skip
    return int(run.stdout.split()[-1])


def figure(quick: bool = False) -> dict[str, Any]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, source in SUPPORT.items():
            _compile(folder, name, source)
        for idiom, rule, unit, count, plain, chosen in IDIOMS:
            measured = {}
            for variant, source in (("plain", plain), ("firmware", chosen)):
                module = f"idiom_{idiom}_{variant}"
                mpy = _compile(folder, module, source)
                # Three runs: the least, as the heap of one run does not vary, but a run may meet a collection.
                heap = min(heap_of(folder, module) for _ in range(1 if quick else 3))
                measured[variant] = {"heap": heap, "mpy": mpy}
            rows.append({"idiom": idiom, "rule": rule, "unit": unit, "count": count, **measured})
    return {"idioms": rows, "micropython": " ".join(micropython_command())}


# -- the report (tools/bench_idioms.md) -------------------------------------------------------------------------


def report(fig: dict[str, Any], figures: dict[str, Any]) -> Section:
    rows = []
    for row in fig["idioms"]:
        plain, chosen = row["plain"]["heap"], row["firmware"]["heap"]
        saved = plain - chosen
        per = f"{saved / row['count']:,.0f} per {row['unit'].split(' ', 1)[-1] if row['count'] > 1 else 'whole'}"
        rows.append([row["rule"], row["unit"] if row["count"] == 1 else f"{row['count']} x {row['unit']}",
                     f"{plain:,}", f"{chosen:,}", f"{saved:,}", per if row["count"] > 1 else "-",
                     f"{row['plain']['mpy']:,} / {row['firmware']['mpy']:,}"])  # fmt: skip
    head = ["rule (the firmware's way)", "what is measured", "heap, plain way", "heap, firmware's way", "saved, bytes",
            "saved, each", ".mpy bytes, plain / firmware"]  # fmt: skip
    values = {"table": table(head, rows)}
    for row in fig["idioms"]:  # each saving, for docs/firmware-style.md to quote
        values[f"saved_{row['idiom']}"] = f"{(row['plain']['heap'] - row['firmware']['heap']) / row['count']:,.0f}"
    return Section(values=values)


if __name__ == "__main__":
    print(json.dumps(figure("--quick" in sys.argv), indent=1))
