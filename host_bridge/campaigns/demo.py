"""The demo: the whole story on one machine, end to end (`host-bridge demo`, `make demo`).

Mosquitto on loopback with a TLS listener, a password file and an ACL (each board may publish only under
sensors/<its client id>/); the recorder (`host-bridge record`) on a persistent QoS 2 session; the serial bridge
(`host-bridge run`); three virtual boards - QoS 0 straight over TCP, QoS 1 and QoS 2 over emulated serial lines
at 115200 baud with bit errors and dropped bytes - each power-cut at random moments (some inside flash writes)
and booted again on the same flash until it has published everything; the recorder SIGKILLed once mid-run and
started again. Then the Spark jobs: audit (with what each board says it accepted), rollup, report. Prints the
verdict table and the report's path; exits 0 only when QoS 1 lost nothing and QoS 2 delivered exactly once.
Every process started here is stopped here, by its pid."""

from __future__ import annotations

import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from dmqtt_telemetry.format import committed_rows
from dmqtt_telemetry.promises import AuditSummary
from host_bridge.campaigns.stack import (
    BAUD,
    NOISE,
    BoardRun,
    BoardSpec,
    Stack,
    pipeline_command,
    run_pipeline,
    secure_broker,
)

BOARDS = (
    BoardSpec("board-qos0-tcp", "tcp", "3.1.1", 0),
    BoardSpec("board-qos1-serial", "serial", "3.1.1", 1),
    BoardSpec("board-qos2-serial", "serial", "5", 2),
)


@dataclass
class DemoResult:
    exit_code: int
    audit: AuditSummary | None
    runs: list[BoardRun]
    recorder_kills: int
    pids: list[int]  # every process the demo started (broker, recorders, bridge, boards): all ended by now


def run_demo(
    out: Path,
    messages: int = 200,
    cuts: int = 3,
    seed: int = 2026,
    kill_recorder: bool = True,
    app: Path | None = None,
) -> DemoResult:
    """Everything in `out` (emptied first): broker/, boards/, logs/, recorded/ (Parquet), results/ (audit,
    rollup, report). `app`: the boards' application folder instead of the firmware's."""
    started = time.monotonic()
    rng = random.Random(seed)
    if out.exists():
        shutil.rmtree(out)

    def say(text: str) -> None:
        print(f"[{time.monotonic() - started:5.1f}s] {text}", flush=True)

    say(f"[1/5] Mosquitto on loopback (TLS, passwords, ACL), the recorder, the serial bridge (output in {out})")
    broker, security = secure_broker(out, [spec.client_id for spec in BOARDS])
    stack = Stack(out, broker, BOARDS, messages, cuts, rng, security, confirm=True, app=app)
    kills = 0
    try:
        stack.start()
        say(
            f"      broker {broker.address}; recorder -> {stack.recorded}; "
            f"bridge for {len(stack.serial_ports)} serial boards at {BAUD} baud, "
            f"bit error rate {NOISE.bit_error_rate:g}, dropped bytes {NOISE.drop_rate:g}"
        )
        say(
            f"[2/5] {len(stack.runs)} virtual boards publish {messages} messages each; "
            f"{cuts} power cuts per board at random moments"
        )
        # Early in the boards' runs (about a third of the way at 10 ms a message), so that deliveries are in
        # flight and queued at the broker while the recorder is down.
        kill_at = time.monotonic() + min(2.0, 0.3 + messages * 0.005) if kill_recorder else None
        next_progress = time.monotonic()
        while not stack.boards_finished or kill_at is not None:
            time.sleep(0.2)
            if kill_at is not None and time.monotonic() >= kill_at:
                assert stack.recorder is not None
                stack.recorder.kill()
                stack.timeline.note("recorder-kill")
                kills += 1
                say("      recorder SIGKILLed mid-run; starting it again (its session and log carry on)")
                stack.start_recorder()
                kill_at = None
            if time.monotonic() >= next_progress:
                states = " | ".join(f"{r.spec.client_id}: {r.state}, {r.cuts} cuts" for r in stack.runs)
                say(f"      {states} | recorder: {committed_rows(stack.recorded)} rows")
                next_progress = time.monotonic() + 3
        failed = stack.failures()
        for failure in failed:
            say(f"      FAILED {failure}")
        say("[3/5] boards done; waiting for the recorder to commit what the broker holds for it")
        stack.drain(say)
        duplicates, _, _ = stack.duplicates_at_the_broker()  # (the demo never stops its broker)
        for duplicate in duplicates:
            say(f"      FAILED QoS 2 delivered twice at the broker: {duplicate}")
        failed += duplicates
    finally:
        stack.stop()
    expected = stack.write_expected()
    results = out / "results"
    command = pipeline_command(stack.recorded, results, expected, stack.timeline.path)
    say(f"[4/5] Spark: audit, rollup, report ({' '.join(command[1:])})")
    audit = run_pipeline(stack.recorded, results, expected, stack.timeline.path)
    say(f"[5/5] report: {audit.report}")
    say(
        f"      QoS 1 lost nothing and QoS 2 delivered exactly once through "
        f"{sum(r.cuts for r in stack.runs)} power cuts: {'yes' if audit.ok else 'NO'}"
    )
    exit_code = 1 if failed or not audit.ok else 0
    return DemoResult(exit_code, audit, stack.runs, kills, stack.pids)
