"""The power-cycle loop, once for everyone (the bench's scenarios, `make demo`, `host-bridge vboard`): boot a
board, cut its power at a random moment or inside a flash operation, boot it again on the same flash, until its
run completes. What "completes" means is the application's: its JSON summary line.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from host_bridge.hil.dut import BootEnd, Dut, DutError


@dataclass(frozen=True)
class CutPlan:
    """How a board's power is cut while it runs.

    cuts: power cuts wanted at most (None: every boot gets one, the run completes when a boot outruns it).
    inside_flash: the share of cuts made inside a flash program or erase (boards that allow it; others get a
    cut at a random moment instead). flash_ops: the range the operation is drawn from (1-based, per boot).
    window: seconds after boot within which a cut at a random moment falls."""

    cuts: int | None = 3
    inside_flash: float = 0.5
    flash_ops: tuple[int, int] = (5, 150)
    window: tuple[float, float] = (0.2, 1.0)
    max_boots: int = 400

    @classmethod
    def none(cls) -> CutPlan:
        return cls(cuts=0)


@dataclass
class CycleResult:
    boots: int = 0
    cuts: int = 0
    cuts_in_flash: int = 0
    summary: dict[str, object] | None = None
    last: BootEnd | None = None
    ends: list[str] = field(default_factory=list)


def boot_once(dut: Dut, cut_after: float | None = None, cut_at_op: int = 0, timeout: float = 300) -> BootEnd:
    """One boot (machine.reset() included), optionally cut `cut_after` seconds in or at flash operation
    `cut_at_op`."""
    dut.start(cut_at_op=cut_at_op)
    timer = threading.Timer(cut_after, dut.power_cut) if cut_after is not None else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        return dut.wait_boot(timeout)
    finally:
        if timer is not None:
            timer.cancel()


def run_to_completion(
    dut: Dut,
    plan: CutPlan,
    rng: random.Random,
    timeout: float = 300,
    on_boot: Callable[[CycleResult, str], None] | None = None,
    stop: threading.Event | None = None,
) -> CycleResult:
    """Boot `dut` again and again, cutting its power as `plan` says, until a boot completes the run. DutError
    when a boot fails (the console log named), or when the run never completes within plan.max_boots."""
    result = CycleResult()
    while stop is None or not stop.is_set():
        cut_after: float | None = None
        cut_at_op = 0
        if plan.cuts is None or result.cuts < plan.cuts:
            if dut.flash_cuts and rng.random() < plan.inside_flash:
                cut_at_op = rng.randrange(*plan.flash_ops)
            else:
                cut_after = rng.uniform(*plan.window)
        if on_boot is not None:
            on_boot(result, f"boot {result.boots + 1} running")
        started = time.monotonic()
        end = boot_once(dut, cut_after, cut_at_op, timeout)
        result.boots += 1
        result.last = end
        result.ends.append(end.kind)
        if end.kind == "power-cut":
            result.cuts += 1
            result.cuts_in_flash += 1 if cut_at_op else 0
            if on_boot is not None:
                on_boot(result, f"power cut {result.cuts}")
            if result.boots >= plan.max_boots:
                raise DutError(
                    f"{dut.name}: the run did not complete in {result.boots} boots; console log {dut.console.path}"
                )
            continue
        if end.kind == "done":
            result.summary = end.summary
            if on_boot is not None:
                on_boot(result, f"done after {result.boots} boots")
            return result
        tail = "\n".join(end.console.splitlines()[-12:])
        raise DutError(
            f"{dut.name}: boot {dut.boots} failed (exit {end.status}) after {time.monotonic() - started:.1f} s; "
            f"console log {dut.console.path}:\n{tail}"
        )
    return result
