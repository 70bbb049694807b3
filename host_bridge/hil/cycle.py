"""The power-cycle loop, once for everyone (the bench's scenarios, `make demo`, `host-bridge vboard`): boot a
board, cut its power at a random moment or inside a flash operation, boot it again on the same flash, until its
run completes. What "completes" means is the application's: its JSON summary line.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from dboard import console, console_host
from dmqtt import journal_record as rec
from host_bridge.hil.dut import BootEnd, Dut, DutError
from host_bridge.vboard.events import EventSpec


@dataclass(frozen=True)
class CutPlan:
    """How a board's power is cut while it runs.

    cuts: power cuts wanted at most (None: every boot gets one, the run completes when a boot outruns it).
    inside_flash: the share of cuts made inside a flash program or erase (boards that allow it; others get a
    cut at a random moment instead). flash_ops: the range the operation is drawn from (1-based, counted from the
    bench's start of the board, over the boots it makes by itself after it). in_erase: the share of those cuts
    made inside the first or second erase instead (erases are a few in a hundred operations: a dose drawn from
    all of them may miss every one).
    in_sleep: the share of cuts made inside a deep sleep (boards that sleep in no host time; others get a cut
    at a random moment, which lands in a sleep as often as the board sleeps), the Nth sleep from the start drawn
    from `sleeps`. window: seconds after boot within which a cut at a random moment falls; accepted: see
    below."""

    cuts: int | None = 3
    inside_flash: float = 0.5
    flash_ops: tuple[int, int] = (5, 150)
    in_erase: float = 0.0
    in_sleep: float = 0.0
    sleeps: tuple[int, int] = (1, 20)
    window: tuple[float, float] = (0.2, 1.0)
    max_boots: int = 400
    # Instead of a random moment: right after the board says it accepted a message drawn from this range (its
    # `accepted` lines, counted from 1 in each boot), so that the cut lands with flows in flight and before the
    # run can complete (a run longer than cuts x the range's top cannot outrun them).
    accepted: tuple[int, int] | None = None
    # Instead of a random moment, on a board that cuts its own power at its events: at its Nth such event from the
    # start, N drawn from the range (host_bridge/vboard/events.py: "journal", "wake", "join", "connect" ...).
    # Other boards get a cut at a random moment.
    on_event: tuple[str, tuple[int, int]] | None = None

    @classmethod
    def none(cls) -> CutPlan:
        return cls(cuts=0)


# A cut inside a flash operation, as the virtual board says it (host_bridge/vboard/shims/nor_flash.py): the
# operation, its partition, and for a program the first byte written, a journal record's type.
_FLASH_CUT = re.compile(
    r"vboard: power cut during (program|erase) .*?\(partition (\S+?)(?:, first byte 0x([0-9a-f]{2}))?\)"
)
# A journal record's name by its type (the first byte of its program).
RECORD_NAMES = {rec.PUB: "PUB", rec.REL: "REL", rec.DONE: "DONE", rec.RX: "RX", rec.RXDONE: "RXDONE", rec.META: "META",
            rec.MARK: "MARK", rec.HANDLED: "HANDLED", rec.EPOCH: "EPOCH", rec.CONFIRMED: "CONFIRMED"}  # fmt: skip


def flash_cut_kind(console_text: str) -> str:
    """Which operation a cut inside a flash operation hit, from the board's console: "PUB record", "DONE
    record" ... (a program of the journal's ring, by its first record's type), "sector header" (another program
    of the ring), "erase", "filesystem" (a program of LittleFS, the file journal's or the boot counter's)."""
    found = _FLASH_CUT.findall(console_text)
    if not found:
        return "flash (unsaid)"
    operation, partition, first = found[-1]
    if operation == "erase":
        return "erase" if partition == "mqttlog" else "filesystem"
    if partition != "mqttlog":
        return "filesystem"
    name = RECORD_NAMES.get(int(first, 16)) if first else None
    return f"{name} record" if name else "sector header"


@dataclass
class CycleResult:
    boots: int = 0
    cuts: int = 0
    cuts_in_flash: int = 0
    cuts_in_sleep: int = 0
    summary: dict[str, object] | None = None
    last: BootEnd | None = None
    ends: list[str] = field(default_factory=list)
    # What the board said of each boot it made (its `boot` lines): its own boot number and the QoS 1/2 messages
    # it resumed in flight. A boot cut before it could say so is missing here.
    board_boots: list[tuple[int, int]] = field(default_factory=list)
    # The DUT's boot count when the run began (Dut.boots: with counts_own_boots, the board's wakes as well).
    dut_boots_at_start: int = 0
    # Where each cut landed: a flash operation's kind (flash_cut_kind), "sleep", "after an accepted message" or
    # "at a random moment".
    cut_kinds: Counter[str] = field(default_factory=Counter)

    @property
    def resumed_in_flight(self) -> int:
        """Boots after the first that found messages in flight: cuts that landed while flows were open."""
        return sum(1 for _, in_flight in self.board_boots[1:] if in_flight)


def check_reboots(dut: Dut, result: CycleResult, end: BootEnd) -> None:
    """Every boot the bench made is one the board made: the board application numbers its boots in flash, so a
    power switch that does nothing (the board ran on: no new boot line, its old number in the summary) fails
    here rather than passing for a power cut. Only for the board application's console protocol."""
    if dut.summary_keys != console.SUMMARY_KEYS:
        return
    numbers = [n for n, _ in result.board_boots]
    if any(b <= a for a, b in zip(numbers, numbers[1:], strict=False)):
        raise DutError(
            f"{dut.name}: the board's boot numbers {numbers} do not increase; console log {dut.console.path}"
        )
    # The board's own count against the bench's: it may count fewer boots (one cut before its counter was on
    # flash), never more than were made (a reset the bench did not make: a watchdog, a brown-out, a crash).
    made = dut.boots - result.dut_boots_at_start
    if dut.counts_own_boots and numbers and numbers[-1] - numbers[0] + 1 > made:
        raise DutError(
            f"{dut.name}: the board counted boots {numbers[0]} to {numbers[-1]} while the bench made {made} "
            f"(power cuts {result.cuts}, the board's own wakes and resets included): it reset by itself; console "
            f"log {dut.console.path}"
        )
    this_boot = console_host.boots(end.console)
    assert end.summary is not None
    if not this_boot or this_boot[-1][0] != end.summary["boot"]:
        seen = "but the board did not boot then" if this_boot else "without the board's boot line"
        late_port = "" if this_boot else " Or the console port opened after the board printed it."
        raise DutError(
            f"{dut.name}: the run completed in the bench's boot {result.boots}, {seen} (its summary is of boot "
            f"{end.summary['boot']}): did the power switch cut the power?{late_port} Console log {dut.console.path}"
        )


def boot_once(
    dut: Dut,
    cut_after: float | None = None,
    cut_at_op: int = 0,
    timeout: float = 300,
    cut_accepted: int = 0,
    cut_in_sleep: int = 0,
    cut_on: EventSpec | None = None,
) -> BootEnd:
    """One boot (the resets and wakes from deep sleep that follow it included), optionally cut `cut_after`
    seconds in, at flash operation `cut_at_op`, right after the board's `cut_accepted`th accepted message since
    this start (or its `cut_on` event), or inside its `cut_in_sleep`th deep sleep. A board that can cut its own
    power at its events does so for `cut_accepted`; on another the bench watches its console for the line, and
    the board may accept a few more meanwhile."""
    if cut_accepted and dut.event_cuts:
        cut_on, cut_accepted = EventSpec("accepted", cut_accepted), 0
    dut.start(cut_at_op=cut_at_op, cut_in_sleep=cut_in_sleep, cut_on=cut_on)
    done = threading.Event()  # this boot has ended: a watcher must not cut the next one
    watcher: threading.Thread | None = None
    if cut_after is not None:
        watcher = threading.Timer(cut_after, dut.power_cut)
    elif cut_accepted:
        watcher = threading.Thread(target=_cut_when_accepted, args=(dut, cut_accepted, done))
    if watcher is not None:
        watcher.daemon = True
        watcher.start()
    try:
        return dut.wait_boot(timeout)
    finally:
        done.set()
        if isinstance(watcher, threading.Timer):
            watcher.cancel()
        elif watcher is not None:
            watcher.join()


def _cut_when_accepted(dut: Dut, n: int, done: threading.Event) -> None:
    """Cut the power once the console since this start shows `n` accepted messages (read every 5 ms, only what
    is new: a few more may be accepted meanwhile); nothing if the boot ends first."""
    seen = 0
    read = 0
    partial = ""
    while not done.wait(0.005):
        text = dut.console.since_start()
        new, read = partial + text[read:], len(text)
        *whole, partial = new.split("\n")
        seen += len(console_host.lines("\n".join(whole), "accepted"))
        if seen >= n:
            dut.power_cut()
            return


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
    result = CycleResult(dut_boots_at_start=dut.boots)
    while stop is None or not stop.is_set():
        cut_after: float | None = None
        cut_at_op = cut_accepted = cut_in_sleep = 0
        cut_on: EventSpec | None = None
        if plan.cuts is None or result.cuts < plan.cuts:
            draw = rng.random()
            if draw < plan.in_sleep:
                if dut.sleep_cuts:
                    cut_in_sleep = rng.randrange(*plan.sleeps)
                else:
                    cut_after = rng.uniform(*plan.window)
            elif dut.flash_cuts and draw < plan.in_sleep + plan.inside_flash:
                if plan.in_erase and rng.random() < plan.in_erase:
                    cut_at_op = -rng.randrange(1, 3)
                else:
                    cut_at_op = rng.randrange(*plan.flash_ops)
            elif plan.on_event is not None and dut.event_cuts:
                cut_on = EventSpec(plan.on_event[0], rng.randrange(*plan.on_event[1]))
            elif plan.accepted is not None:
                cut_accepted = rng.randrange(*plan.accepted)
            else:
                cut_after = rng.uniform(*plan.window)
        if on_boot is not None:
            on_boot(result, f"boot {result.boots + 1} running")
        started = time.monotonic()
        end = boot_once(dut, cut_after, cut_at_op, timeout, cut_accepted, cut_in_sleep, cut_on)
        result.boots += 1
        result.last = end
        result.ends.append(end.kind)
        result.board_boots += console_host.boots(end.console)
        if end.kind == "power-cut":
            result.cuts += 1
            result.cuts_in_flash += 1 if cut_at_op else 0
            result.cuts_in_sleep += 1 if cut_in_sleep else 0
            if cut_at_op:
                result.cut_kinds[flash_cut_kind(end.console)] += 1
            elif cut_in_sleep:
                result.cut_kinds["sleep"] += 1
            elif cut_on is not None:
                result.cut_kinds[f"at the board's {cut_on.event} event"] += 1
            else:
                result.cut_kinds["after an accepted message" if cut_accepted else "at a random moment"] += 1
            if on_boot is not None:
                on_boot(result, f"power cut {result.cuts}")
            if result.boots >= plan.max_boots:
                raise DutError(
                    f"{dut.name}: the run did not complete in {result.boots} boots; console log {dut.console.path}"
                )
            continue
        if end.kind == "done":
            result.summary = end.summary
            check_reboots(dut, result, end)
            if on_boot is not None:
                on_boot(result, f"done after {result.boots} boots")
            return result
        tail = "\n".join(end.console.splitlines()[-12:])
        raise DutError(
            f"{dut.name}: boot {dut.boots} failed (exit {end.status}) after {time.monotonic() - started:.1f} s; "
            f"console log {dut.console.path}:\n{tail}"
        )
    return result
