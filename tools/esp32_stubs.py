"""Lay out the installed micropython-esp32-stubs as a folder mypy can use on MYPYPATH.

The stubs install as top-level .pyi files in site-packages, which mypy (PEP 561) does not search; pyright
does. This links every file the distribution installed into OUT, so `MYPYPATH=OUT mypy` type-checks the
firmware against the ESP32 port's modules (machine, esp32, network, time.ticks_ms, micropython.const ...).
"""

from __future__ import annotations

import shutil
import sys
from importlib import metadata
from pathlib import Path


def main(out: Path) -> int:
    shutil.rmtree(out, ignore_errors=True)
    count = 0
    # The esp32 port's modules, and the private helpers (_mpy_shed) they import from the stdlib stubs.
    esp32 = metadata.distribution("micropython-esp32-stubs").files or []
    shed = [f for f in metadata.distribution("micropython-stdlib-stubs").files or [] if f.parts[0] == "_mpy_shed"]
    for entry in [*esp32, *shed]:
        if entry.suffix != ".pyi":
            continue
        target = out / entry
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(Path(str(entry.locate())).resolve())
        count += 1
    print(f"esp32 stubs: {count} modules linked into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
