"""Figure 13 of BENCHMARKS.md: what an ESP32 at 240 MHz should sustain, estimated from this run's figures.

    python tools/bench_chip.py [--quick]        (part of make bench)

The one measurement here: pystone (micropython-lib's pystone_lowmem, fetched from PyPI at bench time and checked
against its SHA-256) on the MicroPython Unix port of this machine, for the ratio between this interpreter and the
chip's. The chip's figure is public: 1,602 and 1,661 pystones/s with the same script on an ESP32 at 240 MHz with
MicroPython 1.12 (micropython/micropython issues #6565 and #5673); builds since 1.18 run the VM from IRAM and
compile with -O2 (micropython/micropython pull request #7850), which roughly doubled the scores of MicroPython's
own benchmarks (+54% to +208% across those it lists). The estimate is given for both: the 1.12 figure, and twice
it.
tools/benchmarks.py's render_chip() combines the ratio with the clients' loopback rates (figure 1), the flash
model (figure 2) and the link's clean-line efficiency (figure 3)."""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from figure_cli import print_figure
from sdist import fetch_member

from host_bridge.vboard.runner import micropython_command

PYSTONE = {
    "url": "https://files.pythonhosted.org/packages/2b/e9/cd38fe0fe0024193e6b8132b8c370c28ccd4bd8fae92dd5ae3b54d08768f/"
    "micropython-pystone_lowmem-3.4.2-4.tar.gz",
    "sha256": "3d5cd43a7b21539d55ad5de85a273c4c4025296a78525774b1583e22b6cd1c5c",
}
ESP32_PYSTONES = (1602 + 1661) / 2  # MicroPython 1.12 at 240 MHz, the two public runs above
OPTIMISED_BUILDS = 2.0  # VM in IRAM and -O2 (pull request #7850): about twice the 1.12 scores
PASSES = 50000


def pystones(folder: Path, passes: int) -> float:
    """Pystones per second on the Unix port: the best of three runs."""
    script = f"import sys; sys.path.insert(0, {str(folder)!r}); import pystone_lowmem; pystone_lowmem.main({passes})"
    best = 0.0
    for _ in range(3):
        out = subprocess.run([*micropython_command(), "-c", script], capture_output=True, text=True, check=True).stdout
        found = re.search(r"benchmarks at ([0-9.]+) pystones/second", out)
        if found is None:
            raise SystemExit(f"pystone said: {out}")
        best = max(best, float(found.group(1)))
    return best


def figure(quick: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        fetch_member(PYSTONE["url"], PYSTONE["sha256"], "pystone_lowmem.py", Path(tmp) / "pystone_lowmem.py")
        here = pystones(Path(tmp), PASSES // 10 if quick else PASSES)
    return {
        "pystones_here": here,
        "esp32_pystones": ESP32_PYSTONES,
        "optimised_builds": OPTIMISED_BUILDS,
        "ratio_slow": here / ESP32_PYSTONES,
        "ratio_fast": here / (ESP32_PYSTONES * OPTIMISED_BUILDS),
    }


def main() -> None:
    print_figure(__doc__, figure)


if __name__ == "__main__":
    main()
