"""`make demo`: the whole story on one machine, end to end.

Mosquitto on loopback with a TLS listener, a password file and an ACL (each board may publish only under
sensors/<its client id>/); the recorder (`host-bridge record`) on a persistent QoS 2 session; the serial bridge
(`host-bridge run`); three virtual boards - QoS 0 straight over TCP, QoS 1 and QoS 2 over emulated serial lines
at 115200 baud with bit errors and dropped bytes - each power-cut at random moments (some inside flash writes)
and booted again on the same flash until it has published everything; the recorder SIGKILLed once mid-run and
started again. Then the Spark jobs: audit (with what each board says it accepted), rollup, report. Prints the
verdict table and the report's path; exits 0 only when QoS 1 lost nothing and QoS 2 delivered exactly once.
Every process started here is stopped here, by its pid."""

from __future__ import annotations

import argparse
import json
import random
import secrets
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from host_bridge.boards import BoardDefinition
from host_bridge.broker import Mosquitto, write_password_file
from host_bridge.errors import HostBridgeError
from host_bridge.hil.cycle import CutPlan, CycleResult, run_to_completion
from host_bridge.hil.dut import VirtualDut
from host_bridge.pki import CertificateAuthority
from host_bridge.processes import ManagedProcess
from host_bridge.run import command as bridge_command
from host_bridge.telemetry.format import committed_rows, read_committed
from host_bridge.vboard import LineFaults

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipeline.jobs import JobOutcome

BAUD = 115200
NOISE = LineFaults(baud=BAUD, bit_error_rate=2e-5, drop_rate=1e-5)


@dataclass(frozen=True)
class DemoBoard:
    client_id: str
    transport: str
    mqtt_version: str
    qos: int


BOARDS = (
    DemoBoard("board-qos0-tcp", "tcp", "3.1.1", 0),
    DemoBoard("board-qos1-serial", "serial", "3.1.1", 1),
    DemoBoard("board-qos2-serial", "serial", "5", 2),
)


@dataclass(frozen=True)
class Security:
    """How boards and host tools reach a broker that checks identity: its CA (TLS verified), each board's
    password (user name = client id, kept in a secrets.json put on the board) and the recorder's."""

    ca: Path
    passwords: dict[str, str]
    secrets_dir: Path

    def board_secrets(self, client_id: str) -> Path:
        path = self.secrets_dir / f"{client_id}.secrets.json"
        path.write_text(json.dumps({"password": self.passwords[client_id]}))
        path.chmod(0o600)
        return path


def secure_broker(out: Path, client_ids: list[str]) -> tuple[Mosquitto, Security]:
    """Mosquitto with a TLS listener (certificate from a CA made here), a password file and an ACL: each board
    may publish only under sensors/<its client id>/, the recorder may read sensors/#."""
    pki = CertificateAuthority(out / "pki", "durable-mqtt demo CA")
    cert, key = pki.issue("broker", "localhost", dns="localhost")
    passwords = {name: secrets.token_urlsafe(18) for name in [*client_ids, "recorder"]}
    secrets_dir = out / "secrets"
    secrets_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    password_file = write_password_file(secrets_dir / "mosquitto.passwd", passwords)
    acl = secrets_dir / "mosquitto.acl"
    acl.write_text("user recorder\ntopic read sensors/#\n\npattern write sensors/%c/#\n")
    (secrets_dir / "recorder.password").write_text(passwords["recorder"])
    broker = Mosquitto(
        out / "broker",
        persistence=True,
        tls=(cert, key),
        options=(f"password_file {password_file}", f"acl_file {acl}"),
        allow_anonymous=False,
    )
    return broker, Security(pki.ca, passwords, secrets_dir)


@dataclass
class BoardRun:
    """One board's life in the demo: booted again after every power cut until its run completes (the bench's
    power-cycle loop, host_bridge.hil.cycle)."""

    spec: DemoBoard
    workdir: Path
    broker: str
    messages: int
    cuts_wanted: int
    rng: random.Random
    state: str = "waiting"
    summary: dict[str, Any] | None = None
    error: str | None = None
    result: CycleResult | None = None
    thread: threading.Thread | None = field(default=None, repr=False)
    security: Security | None = None

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True)
        serial = self.spec.transport == "serial"
        put: tuple[tuple[Path, str], ...] = ()
        if self.security is not None:
            put = ((self.security.board_secrets(self.spec.client_id), "secrets.json"), (self.security.ca, "ca.pem"))
        # The serial port exists before the bridge starts, and stays through every boot (the cable stays in).
        self.dut = VirtualDut(
            self.spec.client_id,
            BoardDefinition.load("sim"),
            flash=self.workdir / "board.flash",
            console_log=self.workdir / "console.log",
            faults=LineFaults(BAUD, NOISE.bit_error_rate, NOISE.drop_rate, seed=self.rng.randrange(1 << 30))
            if serial
            else None,
            serial_link=self.serial_link if serial else None,
            seed=self.rng.randrange(1 << 30),
            put=put,
        )
        publish = {
            "topic": "sensors/{client_id}/telemetry",
            "qos": self.spec.qos,
            "count": self.messages,
            "interval_ms": 10,
            "payload_bytes": 100,
        }
        config: dict[str, Any] = {
            "client_id": self.spec.client_id,
            "transport": self.spec.transport,
            "mqtt_version": self.spec.mqtt_version,
            "publish": publish,
        }
        if serial:
            config["uart"] = {"id": 1, "baud": BAUD}  # the bridge speaks TLS to the broker for it
        else:
            config["broker"] = self.broker
            if self.security is not None:
                config["tls"] = {"ca": "ca.pem", "server_hostname": "localhost"}
        if self.security is not None:
            config["username"] = self.spec.client_id  # its password is in secrets.json on the board
        self.dut.configure(config)
        self._stop = threading.Event()

    @property
    def serial_link(self) -> Path:
        return self.workdir / "ttyBOARD"

    @property
    def cuts(self) -> int:
        return self.dut.cuts

    @property
    def boots(self) -> int:
        return self.dut.boots

    @property
    def pids(self) -> list[int]:
        return self.dut.pids

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=self.spec.client_id, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """No further boot; the running one (if any) loses power."""
        self._stop.set()
        self.dut.power_cut()
        if self.thread is not None:
            self.thread.join(30)
        self.dut.close()

    def _run(self) -> None:
        # Every other cut lands on a flash operation (journal writes included), the rest at a random moment
        # within the time the run takes (about 10 ms per message), so that it lands mid-run.
        plan = CutPlan(
            self.cuts_wanted, inside_flash=0.5, flash_ops=(5, 150), window=(0.2, max(0.4, self.messages * 0.01))
        )

        def progress(_result: CycleResult, state: str) -> None:
            self.state = state

        try:
            self.result = run_to_completion(self.dut, plan, self.rng, timeout=300, on_boot=progress, stop=self._stop)
            self.summary = self.result.summary
        except Exception as exc:  # noqa: BLE001 (reported by the main thread, which owns the exit status)
            self.error = str(exc)
            self.state = "FAILED"

    @property
    def finished(self) -> bool:
        return self.thread is not None and not self.thread.is_alive()


def distinct_messages(out: Path) -> dict[str, int]:
    """Distinct (boot, seq) per device in what the recorder has committed."""
    seen: dict[str, set[tuple[int, int]]] = {}
    for row in read_committed(out, ["dev", "boot", "seq"]):
        if row["dev"] is not None:
            seen.setdefault(row["dev"], set()).add((row["boot"], row["seq"]))
    return {dev: len(s) for dev, s in seen.items()}


def start_recorder(broker: str, out: Path, logs: Path, security: Security | None = None) -> ManagedProcess:
    args = [
        sys.executable,
        "-m",
        "host_bridge",
        "record",
        "--broker",
        broker,
        "--out",
        str(out),
        "--client-id",
        "demo-recorder",
    ]
    if security is not None:
        args += [
            "--tls",
            "--cafile",
            str(security.ca),
            "--username",
            "recorder",
            "--password-file",
            str(security.secrets_dir / "recorder.password"),
        ]
    recorder = ManagedProcess([*args, "--flush-seconds", "1", "--stats-every", "5"], logs / "recorder.log")
    recorder.wait_for("event=connected", timeout=30)
    return recorder


@dataclass
class DemoResult:
    exit_code: int
    outcome: JobOutcome | None
    runs: list[BoardRun]
    recorder_kills: int
    pids: list[int]  # every process the demo started (broker, recorders, bridge, boards): all ended by now


def run_demo(
    out: Path,
    messages: int = 200,
    cuts: int = 3,
    seed: int = 2026,
    spark: SparkSession | None = None,
    kill_recorder: bool = True,
) -> DemoResult:
    """Everything in `out` (emptied first): broker/, boards/, logs/, recorded/ (Parquet), results/ (audit,
    rollup, report). `spark`: a session to reuse (the tests share one); otherwise one is started and stopped."""
    started = time.monotonic()
    rng = random.Random(seed)
    if out.exists():
        shutil.rmtree(out)
    logs = out / "logs"
    logs.mkdir(parents=True)
    recorded = out / "recorded"

    def say(text: str) -> None:
        print(f"[{time.monotonic() - started:5.1f}s] {text}", flush=True)

    say(f"[1/5] Mosquitto on loopback (TLS, passwords, ACL), the recorder, the serial bridge (output in {out})")
    runs: list[BoardRun] = []
    kills = 0
    bridge = recorder = None
    pids: list[int] = []
    broker_process, security = secure_broker(out, [spec.client_id for spec in BOARDS])
    with broker_process as broker:
        assert broker.process is not None
        pids.append(broker.process.pid)
        try:
            recorder = start_recorder(broker.address, recorded, logs, security)
            pids.append(recorder.process.pid)
            runs = [
                BoardRun(
                    spec,
                    out / "boards" / spec.client_id,
                    broker.address,
                    messages,
                    cuts,
                    random.Random(rng.random()),
                    security=security,
                )
                for spec in BOARDS
            ]
            ports = {r.spec.client_id: str(r.serial_link) for r in runs if r.spec.transport == "serial"}
            bridge_args = bridge_command(broker.address, BAUD, ports, 10, "--tls", "--cafile", str(security.ca))
            bridge = ManagedProcess(bridge_args, logs / "bridge.log")
            pids.append(bridge.process.pid)
            bridge.wait_for("event=start")
            say(
                f"      broker {broker.address}; recorder -> {recorded}; "
                f"bridge for {len(ports)} serial boards at {BAUD} baud, "
                f"bit error rate {NOISE.bit_error_rate:g}, dropped bytes {NOISE.drop_rate:g}"
            )
            say(
                f"[2/5] {len(runs)} virtual boards publish {messages} messages each; "
                f"{cuts} power cuts per board at random moments"
            )
            for run in runs:
                run.start()
            # Early in the boards' runs (about a third of the way at 10 ms a message), so that deliveries are in
            # flight and queued at the broker while the recorder is down.
            kill_at = time.monotonic() + min(2.0, 0.3 + messages * 0.005) if kill_recorder else None
            next_progress = time.monotonic()
            while not all(r.finished for r in runs) or kill_at is not None:
                time.sleep(0.2)
                if kill_at is not None and time.monotonic() >= kill_at:
                    recorder.kill()
                    kills += 1
                    say("      recorder SIGKILLed mid-run; starting it again (its session and log carry on)")
                    recorder = start_recorder(broker.address, recorded, logs, security)
                    pids.append(recorder.process.pid)
                    kill_at = None
                if time.monotonic() >= next_progress:
                    states = " | ".join(f"{r.spec.client_id}: {r.state}, {r.cuts} cuts" for r in runs)
                    say(f"      {states} | recorder: {committed_rows(recorded)} rows")
                    next_progress = time.monotonic() + 3
            failed = [r for r in runs if r.error]
            for r in failed:
                say(f"      {r.spec.client_id} FAILED: {r.error}")
            expected = {
                r.spec.client_id: {"messages": r.summary["total"], "qos": r.spec.qos} for r in runs if r.summary
            }
            say("[3/5] boards done; waiting for the recorder to commit what the broker holds for it")
            wait_for_recorder(recorded, expected, say)
            code = recorder.stop()
            if code != 0:
                raise HostBridgeError(f"the recorder exited {code}; see {logs / 'recorder.log'}")
            recorder = None
        finally:
            stop_all(runs, recorder, bridge)
    (out / "expected.json").write_text(json.dumps(expected, indent=2))
    say(
        f"[4/5] Spark: audit, rollup, report (python -m pipeline all --input {recorded} "
        f"--out {out / 'results'} --expect {out / 'expected.json'})"
    )
    outcome = run_pipeline(recorded, out / "results", out / "expected.json", spark)
    say(f"[5/5] report: {outcome.report_path}")
    kept = outcome.audit is not None and outcome.audit.ok
    say(
        f"      QoS 1 lost nothing and QoS 2 delivered exactly once through {sum(r.cuts for r in runs)} power cuts: "
        f"{'yes' if kept else 'NO'}"
    )
    exit_code = 1 if failed or not kept else 0
    return DemoResult(exit_code, outcome, runs, kills, pids + [pid for r in runs for pid in r.pids])


def stop_all(runs: list[BoardRun], recorder: ManagedProcess | None, bridge: ManagedProcess | None) -> None:
    """Boards first (no more traffic), then the recorder (it commits what it holds), then the bridge."""
    for r in runs:
        r.stop()
    if recorder is not None:
        recorder.stop()
    if bridge is not None:
        bridge.stop()


def wait_for_recorder(recorded: Path, expected: dict[str, dict[str, int]], say: Any, timeout: float = 60) -> None:
    """Until every QoS 1/2 board's accepted messages are committed (QoS 0 may have lost some), then a little
    longer for QoS 0 stragglers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        have = distinct_messages(recorded)
        if all(have.get(dev, 0) >= e["messages"] for dev, e in expected.items() if e["qos"] > 0):
            break
        time.sleep(0.5)
    else:
        say("      still missing messages after 60 s; the audit will say which")
    time.sleep(1.5)


def run_pipeline(recorded: Path, results: Path, expect_file: Path, spark: SparkSession | None) -> JobOutcome:
    from pipeline.audit import load_expectations
    from pipeline.jobs import run_job
    from pipeline.spark import session

    own = spark is None
    spark = spark or session()
    try:
        return run_job(spark, "all", str(recorded), str(results), load_expectations(expect_file.read_text()))
    finally:
        if own:
            spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m host_bridge.demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("build/demo"), help="work and result folder (emptied first)")
    parser.add_argument("--messages", type=int, default=200, help="messages per board")
    parser.add_argument("--cuts", type=int, default=3, help="power cuts per board")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)

    def interrupted(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM cleans up as Ctrl-C does: every process started here is stopped

    signal.signal(signal.SIGTERM, interrupted)
    return run_demo(args.out.resolve(), args.messages, args.cuts, args.seed).exit_code


if __name__ == "__main__":
    from pipeline.spark import PipelineError

    try:
        sys.exit(main())
    except (HostBridgeError, PipelineError) as exc:
        print(f"demo: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
