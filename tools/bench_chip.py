"""Figure 13 of BENCHMARKS.md: what an ESP32 at 240 MHz should sustain, estimated from this run's figures.

    python tools/bench_chip.py [--quick]        (part of make bench)

The one measurement here: pystone (micropython-lib's pystone_lowmem, fetched from PyPI at bench time and checked
against its SHA-256) on the MicroPython Unix port of this machine, for the ratio between this interpreter and the
chip's. The chip's figure is public: 1,602 and 1,661 pystones/s with the same script on an ESP32 at 240 MHz with
MicroPython 1.12 (micropython/micropython issues #6565 and #5673). Builds since 1.18 run the VM from IRAM and
compile with -O2 (micropython/micropython pull request #7850), which scored 1.54 to 3.08 times the build before it,
benchmark by benchmark; that build had lost a third of 1.12's pystone score when MicroPython was pinned to one core
(issue #6565: 1,732 to 1,166). So a current build runs at 1.04 to 2.07 times 1.12's speed, and about 1.47 times in
the middle (the geometric mean of the gains' two ends): the estimate is given at the three (SPEEDS).
The report (report() below) combines the ratio with the clients' loopback rates (figure 1), the flash model
(figure 2) and the link's clean-line efficiency (figure 3)."""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench_report import Section, table
from figure_cli import print_figure

from host_bridge.vboard.runner import micropython_command
from host_bridge.vboard.shims import nor_flash
from host_bridge.vboard.stock import fetch_member

PYSTONE = {
    "url": "https://files.pythonhosted.org/packages/2b/e9/cd38fe0fe0024193e6b8132b8c370c28ccd4bd8fae92dd5ae3b54d08768f/"
    "micropython-pystone_lowmem-3.4.2-4.tar.gz",
    "sha256": "3d5cd43a7b21539d55ad5de85a273c4c4025296a78525774b1583e22b6cd1c5c",
}
ESP32_PYSTONES = (1602 + 1661) / 2  # MicroPython 1.12 at 240 MHz, the two public runs above
# A current build's speed against 1.12's on the chip: the build pinned to one core kept 1,166 of 1,732 pystones
# (issue #6565), and pull request #7850 gained 1.54 to 3.08 times over it, benchmark by benchmark (bm_fannkuch
# +54%, misc_aes +208%). Each end, and their geometric mean, with where it comes from.
_PINNED = 1166 / 1732
SPEEDS: dict[str, dict[str, Any]] = {
    "slow": {"speed": _PINNED * 1.54, "source": "issue #6565's pinned build (1,166 of 1,732 pystones) times pull "
             "request #7850's smallest gain (bm_fannkuch, 1.54x)"},
    "middle": {"speed": _PINNED * (1.54 * 3.08) ** 0.5, "source": "the same build times the geometric mean of pull "
               "request #7850's smallest and largest gains"},
    "fast": {"speed": _PINNED * 3.08, "source": "the same build times pull request #7850's largest gain "
             "(misc_aes, 3.08x)"},
}  # fmt: skip
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
        source = fetch_member(PYSTONE["url"], PYSTONE["sha256"], "pystone_lowmem.py")
        (Path(tmp) / "pystone_lowmem.py").write_bytes(source)
        here = pystones(Path(tmp), PASSES // 10 if quick else PASSES)
    return {
        "pystones_here": here,
        "esp32_pystones": ESP32_PYSTONES,
        "speeds": SPEEDS,
        # How many times slower the chip's interpreter is than this machine's, at each end of a current build's speed.
        "ratios": {end: here / (ESP32_PYSTONES * value["speed"]) for end, value in SPEEDS.items()},
    }


# -- the report (tools/bench_chip.md): the ratio against figures 1, 2 and 3 -------------------------------------


def speed_values(figure: dict[str, Any]) -> dict[str, str]:
    """A figure's `ratios` and `speeds` (this figure's, or figure 14's copy of them) as its template quotes them:
    ratio_slow, ratio_middle, ratio_fast, speed_slow, ..."""
    return {
        **{f"ratio_{end}": f"{ratio:.0f}" for end, ratio in figure["ratios"].items()},
        **{f"speed_{end}": f"{value['speed']:.2f}" for end, value in figure["speeds"].items()},
    }


def report(chip: dict[str, Any], figures: dict[str, Any]) -> Section:
    ratios = chip["ratios"]
    values = {"pystones_here": f"{chip['pystones_here']:,.0f}", "esp32_pystones": f"{chip['esp32_pystones']:,.0f}",
              **speed_values(chip)}  # fmt: skip
    if "clients" not in figures or "serial" not in figures:
        return Section(values)  # the table's part is left out: it needs figures 1 and 3
    loop = {
        r["qos"]: r["rate"]
        for r in figures["clients"]["rows"]
        if r["path"] == "loopback" and r["broker_nodelay"] and r["client"] == "dmqtt-ram" and r["size"] == 64
    }
    serial = {
        (r["baud"], r["qos"]): r["payload_efficiency"] * r["baud"] / 10 / r["payload_bytes"]
        for r in figures["serial"]["rows"]
        if r["line"] == "clean" and r["size"] == 64 and r.get("payload_efficiency")
    }
    pub = 7 + 13 + len("bench/t") + 64  # the loopback run's PUB record
    records: dict[int, list[int]] = {0: [], 1: [pub, 9], 2: [pub, 13, 9]}  # PUB, then REL at QoS 2, then DONE
    rows = []
    for qos in (0, 1, 2):
        if qos not in loop:
            continue
        program_ms = sum(nor_flash.program_us(0, n) for n in records[qos]) / 1000
        erase_ms = nor_flash._T_SECTOR_ERASE_US / 1000 * sum(records[qos]) / 4096
        flash_ms = program_ms + erase_ms
        bound = [1000 / (ratio * 1000 / loop[qos] + flash_ms) for ratio in (ratios["slow"], ratios["fast"])]
        cpu = " / ".join(f"{1000 * ratios[end] / loop[qos]:.1f}" for end in ("slow", "middle", "fast"))
        cells = [f"QoS {qos}", cpu, f"{flash_ms:.2f}", f"{bound[0]:.0f} - {bound[1]:.0f}"]
        for baud in (115200, 921600):
            link = serial.get((baud, qos))
            cells.append(f"{min(bound[0], link):.0f} - {min(bound[1], link):.0f}" if link else "-")
        rows.append(cells)
    head = ["", "CPU ms per message (slow / middle / fast end)", "flash ms per message", "msg/s over TCP",
            "msg/s, serial 115200", "msg/s, serial 921600"]  # fmt: skip
    values["table"] = table(head, rows)
    return Section(values)


def main() -> None:
    print_figure(__doc__, figure)


if __name__ == "__main__":
    main()
