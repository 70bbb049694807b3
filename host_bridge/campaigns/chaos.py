"""A campaign of everything at once: boards on TCP and on noisy serial lines publish QoS 1 and QoS 2 while the
broker (persistence on), the bridge and the recorder are each SIGKILLed and started again at random moments,
the boards lose power at random, and the recorder's disk fills for a while; a board that ends its run with messages
the recorder has not confirmed boots once more (its next wake, which sends them again); then the Spark audit judges
the run (QoS 1: nothing lost; QoS 2: nothing lost, nothing twice).

`host-bridge chaos --messages 2000 --faults 10` for a long campaign (`make soak`); the tests run a
dose. Every process started here is stopped here, by its pid.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dmqtt_telemetry.promises import AuditSummary
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.campaigns.stack import BoardSpec, Say, Stack, run_pipeline

BOARDS = (
    BoardSpec("chaos-tcp-q1", "tcp", "3.1.1", 1),
    BoardSpec("chaos-tcp-q2", "tcp", "5", 2),
    BoardSpec("chaos-serial-q1", "serial", "3.1.1", 1),
    BoardSpec("chaos-serial-q2", "serial", "5", 2),
)
KINDS = ("broker", "bridge", "recorder", "disk_full")  # the broker: SIGKILLed, or restarted cleanly (broker_fault)


@dataclass
class CampaignResult:
    faults: Counter[str] = field(default_factory=Counter)
    power_cuts: int = 0
    boots: int = 0
    audit: AuditSummary | None = None
    failures: list[str] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    # QoS 2 messages the broker passed on twice after it went down between the two (Stack.duplicates_at_the_broker)
    broker_redelivered: list[str] = field(default_factory=list)
    # QoS 2 copies their boards marked as sent again on purpose (end-to-end confirmation's repair)
    resent: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures and self.audit is not None and self.audit.ok

    def figures(self) -> dict[str, Any]:
        verdicts = self.audit.verdicts if self.audit else {}
        return {
            "faults": dict(self.faults),
            "power_cuts": self.power_cuts,
            "boots": self.boots,
            "repaired": self.audit.repaired if self.audit else 0,
            "broker_redelivered": len(self.broker_redelivered),
            "resent": len(self.resent),
            "qos": {
                q: {
                    "messages": v.messages,
                    "lost": v.lost,
                    "duplicated": v.duplicates,
                    "verdict": "PASS" if v.ok else "FAIL",
                }
                for q, v in sorted(verdicts.items())
            },
            "failures": self.failures,
        }


class DiskFiller:
    """Fills the recorder's disk (a tmpfs of its own when root) and gives the space back."""

    def __init__(self, mount: Path | None) -> None:
        self.mount = mount
        self.ballast = mount / "ballast" if mount else None

    def fill(self) -> bool:
        if self.ballast is None:
            return False
        chunk = b"\0" * (1 << 16)
        with open(self.ballast, "wb", buffering=0) as f:  # unbuffered: nothing left to fail at close
            try:
                while True:
                    f.write(chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise  # not a full disk: the episode would prove nothing
        return True

    def free(self) -> None:
        if self.ballast is not None:
            self.ballast.unlink(missing_ok=True)


def small_disk(folder: Path, size: str = "64m") -> Path | None:
    """A tmpfs of `size` at `folder` (root only); None where it cannot be mounted."""
    if os.geteuid() != 0:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    return folder if done.returncode == 0 else None


def unmount(disk: Path, say: Say) -> None:
    """The disk's tmpfs away (lazily: a process still in it lets go later), said when umount refuses: a mount
    left behind would outlive the campaign."""
    done = subprocess.run(["umount", "-l", str(disk)], capture_output=True, text=True)
    if done.returncode:
        say(f"[chaos] umount {disk} failed ({done.returncode}): {done.stderr.strip()}")


def run_campaign(
    out: Path,
    messages: int = 120,
    cuts: int = 2,
    faults: int = 1,
    seed: int = 7,
    say: Say = print,
    broker_fault: str = "kill",
    confirm: bool = True,
    app: Path | None = None,
    report: bool = True,
) -> CampaignResult:
    """Everything in `out` (emptied first). `faults`: how many of each kind (broker, bridge and recorder
    SIGKILLs, disk-full episodes) are injected while the boards run. `broker_fault`: "kill" (SIGKILL) or
    "restart" (SIGTERM: Mosquitto saves its state first).

    Mosquitto's persistence is a snapshot taken after changes, not a write-ahead log: a SIGKILL can lose
    messages it has already acknowledged (PUBACK, PUBCOMP) and not yet saved. Measured without confirmation: 2
    messages of 2,400 lost over 3 broker SIGKILLs. With `confirm` (end-to-end confirmation, docs/confirmation.md)
    the boards send those again from flash when the recorder's confirmation shows the store lacks them: the
    audit counts them as repaired. `report`: the rollup and the report after the audit (False: the verdict
    alone, for a test that wants only that)."""
    rng = random.Random(seed)
    if out.exists():
        shutil.rmtree(out)
    result = CampaignResult()
    out.mkdir(parents=True)
    disk = small_disk(out / "disk")
    try:
        filler = DiskFiller(disk)
        if disk is None:
            say("      (not root: no tmpfs for the disk-full episodes; they are left out)")
        broker = Mosquitto(out / "broker", persistence="every-change")
        stack = Stack(
            out,
            broker,
            BOARDS,
            messages,
            cuts,
            rng,
            recorded=(disk or out) / "recorded",
            confirm=confirm,
            app=app,
        )
        try:
            stack.start()
            say(
                f"[chaos] {len(stack.runs)} boards x {messages} messages, {cuts} power cuts each; "
                f"{faults} of each fault: {', '.join(KINDS)}"
            )
            schedule = [kind for kind in KINDS for _ in range(faults) if kind != "disk_full" or disk is not None]
            rng.shuffle(schedule)
            # Spread over the boards' run (about 15 ms a message on the noisy serial lines, plus their power cuts).
            span = max(3.0, messages * 0.015)
            due = sorted(rng.uniform(0.5, span) for _ in schedule)
            start = time.monotonic()
            disk_freed_at = None
            while not stack.boards_finished or schedule or disk_freed_at is not None:
                time.sleep(0.1)
                now = time.monotonic() - start
                if disk_freed_at is not None and now >= disk_freed_at:
                    filler.free()
                    disk_freed_at = None
                    say(f"[chaos] {now:5.1f}s disk space given back")
                if not schedule or now < due[0] or disk_freed_at is not None:
                    continue
                kind = schedule.pop()
                due.pop(0)
                result.faults[kind] += 1
                say(f"[chaos] {now:5.1f}s {kind}")
                if kind == "broker":
                    stack.broker_going_down()
                    if broker_fault == "kill":
                        broker.kill()
                    else:
                        broker.stop()
                    stack.timeline.note("broker-kill" if broker_fault == "kill" else "broker-restart")
                    time.sleep(rng.uniform(0.2, 1.0))
                    stack.start_broker()
                elif kind == "bridge":
                    assert stack.bridge is not None
                    stack.bridge.kill()
                    stack.timeline.note("bridge-kill")
                    time.sleep(rng.uniform(0.2, 1.0))
                    stack.start_bridge()
                elif kind == "recorder":
                    assert stack.recorder is not None
                    stack.recorder.kill()
                    stack.timeline.note("recorder-kill")
                    stack.start_recorder()
                elif filler.fill():
                    stack.timeline.note("disk-full")
                    disk_freed_at = now + rng.uniform(2.0, 4.0)
            result.failures += stack.failures()
            stack.wake_unconfirmed(lambda text: say(f"[chaos] {text}"))
            stack.drain(lambda text: say(f"[chaos] {text.strip()}"), timeout=120)
            duplicates, result.broker_redelivered, result.resent = stack.duplicates_at_the_broker()
            result.failures += [f"QoS 2 delivered twice at the broker: {d}" for d in duplicates]
        finally:
            filler.free()
            stack.stop()
        result.power_cuts = sum(r.cuts for r in stack.runs)
        result.boots = sum(r.boots for r in stack.runs)
        result.pids = stack.pids
        timeline = stack.timeline.path if report else None
        result.audit = run_pipeline(stack.recorded, out / "results", stack.write_expected(), timeline)
        (out / "figures.json").write_text(json.dumps(result.figures(), indent=2))
        say("[chaos] " + json.dumps(result.figures()))
        return result
    finally:
        if disk is not None:
            unmount(disk, say)
