"""The bench's verdict: per board, what it accepted (its own summary), what the subscriber received, and what
was lost or duplicated, overall and per boot, judged with dmqtt_telemetry.promises, the rules the Spark audit uses
too."""

from __future__ import annotations

import csv
import fcntl
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dboard import console_host
from dmqtt_telemetry.promises import PROMISES, Expectation, QosVerdict, Witness, boot_rows, format_ranges, judge
from host_bridge.hil.cycle import CycleResult
from host_bridge.hil.dut import POWER_CUT_LINE, Dut, DutError
from host_bridge.hil.subscriber import Record, Subscriber

# The heap budget every run is held to (docs/install-paths.md): the lowest free heap the board saw, at the virtual
# board's 64-bit object sizes (a chip's 32-bit objects leave it more), counting back what TLS held on the Unix
# port (mbedTLS allocates from ESP-IDF's heap on an ESP32, from MicroPython's on the Unix port).
HEAP_GOAL = 32 * 1024


@dataclass
class BoardTally:
    """One board's line in a scenario's table."""

    scenario: str
    board: str
    qos: int
    sent: int  # accepted by publish(), as the board's summary says
    received: int  # distinct messages that arrived
    lost: int
    duplicated: int
    boots: int
    power_cuts: int
    verdict: str
    heap_low: int | None = None  # bytes: the board's lowest free heap, as the budget counts it; None unknown
    heap_goal: int = HEAP_GOAL


@dataclass
class BoardRun:
    """What the bench knows of a board's run: its device id, QoS, accepted total, boots and power cuts, the
    lowest free heap its summary reported (heap_min), its summary's last boot, and the witness: the
    seq of each `accepted` line on its console, printed when publish() returned, which the verdict judges every
    accepted message by, whatever the journal kept."""

    dev: str
    qos: int
    sent: int
    boots: int = 1
    power_cuts: int = 0
    heap_low: int | None = None
    witness: Witness | None = None  # its console's `accepted` lines (promises.Witness)
    final: tuple[int, int] | None = None  # its summary's boot, and the messages it accepted in that boot
    resumed_in_flight: int = 0  # boots after a cut that resumed QoS 1/2 messages in flight
    cuts_in_flash: int = 0  # power cuts made inside a flash program or erase
    cuts_in_sleep: int = 0  # power cuts made inside a deep sleep
    cut_kinds: Counter[str] = field(default_factory=Counter)  # where the cuts landed (cycle.CycleResult.cut_kinds)
    counted_boots: int = 0  # the boots the board itself counted over the run (its boot lines: last - first + 1)
    heap_goal: int = HEAP_GOAL  # the lowest free heap it must keep (host_bridge.hil.heap.heap_goal)

    @classmethod
    def from_summary(cls, summary: dict[str, Any], qos: int, boots: int = 1, power_cuts: int = 0) -> BoardRun:
        """From the board's summary line (its last boot's): the accepted total and the heap's low point. Its
        heap_min is the firmware's alone: TLS's buffers are in ESP-IDF's heap on a chip and in the emulation's TLS
        arena on the virtual board, so nothing is counted back."""
        low = summary.get("heap_min")
        heap_low = int(low) if isinstance(low, int) else None
        final = (int(summary["boot"]), int(summary["sent"])) if "boot" in summary and "sent" in summary else None
        return cls(str(summary["dev"]), qos, int(str(summary["total"])), boots, power_cuts, heap_low, final=final)

    @classmethod
    def from_cycle(cls, dut: Dut, result: CycleResult, qos: int) -> BoardRun:
        """From a run to completion (run_to_completion): see witnessed()."""
        if result.summary is None:
            raise DutError(f"{dut.name}: the run ended without its summary line; console log {dut.console.path}")
        run = cls.witnessed(dut, result.summary, qos, result.boots, result.cuts)
        run.resumed_in_flight = result.resumed_in_flight
        run.cuts_in_flash = result.cuts_in_flash
        run.cuts_in_sleep = result.cuts_in_sleep
        run.cut_kinds = result.cut_kinds
        numbers = [n for n, _ in result.board_boots]
        run.counted_boots = numbers[-1] - numbers[0] + 1 if numbers else 0
        return run

    @classmethod
    def witnessed(cls, dut: Dut, summary: dict[str, Any], qos: int, boots: int, power_cuts: int) -> BoardRun:
        """From the summary, and the witness read from the board's whole console (every boot's, what it printed
        before each cut included)."""
        run = cls.from_summary(summary, qos, boots, power_cuts)
        if qos and dut.console.path is not None:
            run.witness = Witness(dut.console.acceptances())
        return run


class Verdict:
    def __init__(
        self, scenario: str, tallies: list[BoardTally], per_qos: dict[int, QosVerdict], boots: list[dict[str, Any]]
    ) -> None:
        self.scenario = scenario
        self.tallies = tallies
        self.per_qos = per_qos
        self.boots = boots  # per (board, boot): received, highest seq, lost, duplicates, missing seqs

    @property
    def ok(self) -> bool:
        return all(v.ok for v in self.per_qos.values())

    def table(self) -> str:
        head = (
            f"{'board':<30}{'QoS':>4}{'sent':>7}{'received':>10}{'lost':>6}{'dup':>5}{'boots':>7}{'cuts':>6}"
            f"{'heap KB':>9}  verdict"
        )
        lines = [f"scenario {self.scenario}", head]
        for t in self.tallies:
            heap = "-" if t.heap_low is None else f"{t.heap_low / 1024:.1f}"
            lines.append(
                f"{t.board:<30}{t.qos:>4}{t.sent:>7}{t.received:>10}{t.lost:>6}{t.duplicated:>5}{t.boots:>7}"
                f"{t.power_cuts:>6}{heap:>9}  {t.verdict}"
            )
        for v in self.per_qos.values():
            lines += [f"  QoS {v.qos} ({PROMISES[v.qos]}): {p}" for p in v.problems[:10]]
        for t in self.short_of_heap():
            lines.append(f"  heap: {t.board} reached {t.heap_low} bytes free, under the budget of {t.heap_goal}")
        return "\n".join(lines)

    def short_of_heap(self) -> list[BoardTally]:
        return [t for t in self.tallies if t.heap_low is not None and t.heap_low < t.heap_goal]

    def boot_table(self) -> str:
        """Per board and boot (as the board numbers its boots): what arrived of each."""
        lines = [f"{'board':<30}{'boot':>5}{'received':>10}{'highest':>9}{'lost':>6}{'dup':>5}  missing seq"]
        for b in self.boots:
            missing = format_ranges(b["missing_ranges"]) or "-"
            lines.append(
                f"{b['dev']:<30}{b['boot']:>5}{b['received']:>10}{b['highest_seq']:>9}"
                f"{b['lost']:>6}{b['duplicates']:>5}  {missing}"
            )
        return "\n".join(lines)

    def save(self, folder: Path) -> Path:
        """verdict.csv in `folder` (one row per board) and verdict.txt (the table); returns the CSV's path."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "verdict.csv"
        write_csv(path, self.tallies)
        (folder / "verdict.txt").write_text(self.table() + "\n\nper boot\n" + self.boot_table() + "\n")
        return path

    def assert_kept(self) -> None:
        """AssertionError with the table when a QoS promise was broken, or a board's heap went under the budget."""
        assert self.ok, "a QoS promise was broken:\n" + self.table()
        assert not self.short_of_heap(), "a board's free heap went under the budget:\n" + self.table()


def write_csv(path: Path, tallies: list[BoardTally], append: bool = False) -> None:
    """The tallies as CSV rows: a new file with its header, or (append) added to the file, the header written
    only into an empty one. Appends hold an exclusive lock, so that parallel test workers share one campaign
    file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a" if append else "w", newline="") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        writer = csv.DictWriter(f, fieldnames=list(BoardTally.__dataclass_fields__))
        if f.tell() == 0:
            writer.writeheader()
        for t in tallies:
            writer.writerow(asdict(t))


def judge_runs(scenario: str, subscriber: Subscriber, runs: list[BoardRun], settle: float = 15) -> Verdict:
    """Wait until every board's accepted messages have arrived (up to `settle` seconds for QoS 1/2, which must
    all arrive, and a few seconds for QoS 0 stragglers, which may not), then judge."""
    for run in runs:
        try:
            subscriber.wait_for(run.dev, run.sent, settle if run.qos else min(settle, 3.0))
        except TimeoutError:
            pass  # judged below: the verdict says what was lost
    wanted = {r.dev for r in runs}
    rows = [b for b in boot_rows(subscriber.deliveries()) if b["dev"] in wanted]
    per_qos, checks = judge(rows, {r.dev: Expectation(r.sent, r.qos, r.witness, r.final) for r in runs})
    tails = {c["dev"]: c["lost_tail"] for c in checks}
    tallies = []
    for run in runs:
        mine = [b for b in rows if b["dev"] == run.dev]
        lost = sum(b["lost"] for b in mine) + tails.get(run.dev, 0)
        dups = sum(b["duplicates"] for b in mine)
        kept = run.qos == 0 or (lost == 0 and (run.qos == 1 or dups == 0))
        kept = kept and (run.heap_low is None or run.heap_low >= run.heap_goal)
        tallies.append(
            BoardTally(
                scenario,
                run.dev,
                run.qos,
                run.sent,
                sum(b["distinct"] for b in mine),
                lost,
                dups,
                run.boots,
                run.power_cuts,
                "PASS" if kept else "FAIL",
                run.heap_low,
                run.heap_goal,
            )
        )
    return Verdict(scenario, tallies, per_qos, rows)


def resent_without_cut(records: list[Record], dev: str, console_log: str) -> list[str]:
    """Messages of `dev` the broker passed on more often than the board had a chance to send them, judged from
    the order of the board's life, never from host clocks: the board sends a message at most once a connection
    (it sends again only on a new one, [MQTT-4.4.0-1]), and once a wake of the application ends with nothing in
    flight (its `sleep: ..., 0 in flight` line, or the run's summary) the broker has acknowledged every message
    it accepted and the journal says so, so nothing of them may go again. So a message may be delivered as often
    as the board had connections from its `accepted` line to that point: the one it was connected on then, every
    `connected` line after, and one more per power cut (a cut can fall after a connection's resends, before the
    board could say it connected). `records` are the subscriber's (what the broker passed on, in order),
    `console_log` the board's console with the bench's power cut lines (ConsoleLog.all())."""
    copies: Counter[tuple[int, int]] = Counter()
    for record in records:
        seen = record.telemetry
        if seen is not None and seen.dev == dev:
            copies[(seen.boot, seen.seq)] += 1
    again = {key: n for key, n in copies.items() if n > 1}
    if not again:
        return []
    # The board's life in order: its protocol lines (console_host's kinds and values), boots and cuts.
    life: list[tuple[str, tuple[Any, ...]]] = []
    for text in console_log.splitlines():
        if text == POWER_CUT_LINE:
            life.append(("cut", ()))
        elif text.startswith("=== boot "):
            life.append(("new boot", ()))
        else:
            line = console_host.parse_line(text)
            if line is not None:
                life.append((line.kind, line.values))
    found = []
    for (boot, seq), n in sorted(again.items()):
        chances = _chances(life, boot, seq)
        if chances is not None and n > chances:
            found.append(
                f"boot {boot} seq {seq}: delivered {n} times, while the board had {chances} connection(s) to send it "
                "on before it had nothing in flight"
            )
    return found


def _chances(life: list[tuple[str, tuple[Any, ...]]], boot: int, seq: int) -> int | None:
    """How many connections the board had to send message (boot, seq) on (resent_without_cut); None when the
    console never said it accepted it (the witness's verdict judges that)."""
    connected = app = False
    chances = 0
    accepted = False
    for kind, values in life:
        if kind in ("cut", "new boot"):
            chances += kind == "cut" and accepted
            connected = app = False
        elif kind == "boot":
            app = True  # the board application's wake: it connects and sends (a sampling wake only journals)
        elif kind == "connected":
            connected = True
            chances += accepted
        elif kind == "connection_lost":
            connected = False
        elif kind == "accepted" and tuple(values) == (boot, seq):
            accepted = True
            chances += connected
        elif accepted and (kind == "summary" or (kind == "sleep" and app and values[1] == 0)):
            return max(chances, 1)
    return max(chances, 1) if accepted else None
