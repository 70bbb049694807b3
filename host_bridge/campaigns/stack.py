"""The start-up sequence the demo and the chaos campaign share, and what they do around it.

A `Stack` is a broker, the recorder on it, the virtual boards (each booted again after every power cut until its
run completes) and the serial bridge for the boards on serial lines: started in that order, stopped in the
reverse one (boards first, so that no traffic is left; then the recorder, which commits what it holds; then the
bridge and the broker). Every process started is stopped here, by its pid, and listed in `pids`.

The Spark jobs are run as the user runs them, `host-bridge pipeline all ...`, and their verdict is read back
from the summary they write: the campaigns sit above the pipeline and never import it."""

from __future__ import annotations

import json
import random
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dmqtt_telemetry.format import read_committed
from dmqtt_telemetry.promises import AuditSummary
from dmqtt_telemetry.timeline import TimelineWriter
from host_bridge.boards.definition import BoardDefinition
from host_bridge.bridge.run_command import command as bridge_command
from host_bridge.broker.mosquitto import ACL, Mosquitto, write_password_file
from host_bridge.broker.pki import CertificateAuthority
from host_bridge.errors import HostBridgeError
from host_bridge.hil.cycle import CutPlan, CycleResult, boot_once, run_to_completion
from host_bridge.hil.subscriber import Subscriber
from host_bridge.hil.virtual_dut import VirtualDut
from host_bridge.processes import ManagedProcess
from host_bridge.recorder.record_command import command as recorder_command
from host_bridge.vboard import LineFaults
from host_bridge.vboard.events import EventSpec, Hold

BAUD = 115200
NOISE = LineFaults(baud=BAUD, bit_error_rate=2e-5, drop_rate=1e-5)
# End-to-end confirmation: how long a board lets an acknowledged message go unconfirmed before sending it again
# (a gap the recorder sees is reported at once; this is for a lost tail).
CONFIRM_TIMEOUT_S = 5

Say = Callable[[str], None]


@dataclass(frozen=True)
class BoardSpec:
    client_id: str
    transport: str  # "tcp" or "serial"
    mqtt_version: str
    qos: int


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
    """Mosquitto with a TLS listener (certificate from a CA made here), a password file and the ACL
    (host_bridge.broker.mosquitto.ACL: each board publishes only under sensors/<its client id>/, only the recorder
    confirms)."""
    pki = CertificateAuthority(out / "pki", "durable-mqtt demo CA")
    cert, key = pki.issue("broker", "localhost", dns="localhost")
    passwords = {name: secrets.token_urlsafe(18) for name in [*client_ids, "recorder"]}
    secrets_dir = out / "secrets"
    secrets_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    password_file = write_password_file(secrets_dir / "mosquitto.passwd", passwords)
    acl = secrets_dir / "mosquitto.acl"
    acl.write_text(ACL)
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
    """One board's life in a campaign: booted again after every power cut until its run completes (the bench's
    power-cycle loop, host_bridge.hil.cycle), in a thread of its own."""

    spec: BoardSpec
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
    timeline: TimelineWriter | None = None
    confirm: bool = False
    app: Path | None = None  # the board application's folder (None: the firmware's)

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
            **self._app_option(),
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
        if self.confirm and self.spec.qos:
            config["confirm"] = {"timeout_s": CONFIRM_TIMEOUT_S}
        self.dut.configure(config)
        self._stop = threading.Event()

    def _app_option(self) -> dict[str, Any]:
        return {"app": self.app} if self.app is not None else {}

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
        """No further boot; the running one (if any) loses power, and so does one that starts meanwhile: the
        run's thread may be past its check of the stop and about to boot, and that boot would otherwise run on to
        its end, 30 s of join per board (likely why a Ctrl-C of the demo once took over a minute to stop)."""
        self._stop.set()
        deadline = time.monotonic() + 30
        while True:
            self.dut.power_cut()
            if self.thread is None or time.monotonic() > deadline:
                break
            self.thread.join(0.1)
            if not self.thread.is_alive():
                break
        self.dut.close()

    def _run(self) -> None:
        # Every other cut lands on a flash operation (journal writes included), the rest right after an accepted
        # message (flows in flight); each within a share of the run that leaves the run longer than its cuts,
        # so that every cut wanted is given. QoS 0 accepts nothing it journals as a message: all its cuts go
        # into flash operations (its progress marks).
        share = max(6, self.messages // (self.cuts_wanted + 1))
        plan = CutPlan(
            self.cuts_wanted,
            inside_flash=0.5 if self.spec.qos else 1.0,
            flash_ops=(5, max(6, share)),
            accepted=(5, share),
        )

        def progress(_result: CycleResult, state: str) -> None:
            self.state = state
            if self.timeline is not None and state.startswith("power cut"):
                self.timeline.note("power-cut", self.spec.client_id)

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


def start_recorder(
    broker: str, out: Path, logs: Path, security: Security | None = None, confirm: bool = False
) -> ManagedProcess:
    """`host-bridge record` on a persistent session (client id demo-recorder), committing every second;
    confirming to the boards what it stores with `confirm`."""
    args = recorder_command(broker, out, "--client-id", "demo-recorder", "--flush-seconds", "1", "--stats-every", "5")
    args += ["--mqtt-version", "5"]  # which carries the boards' mark of a copy sent again (the store's `resent`)
    if confirm:
        args.append("--confirm")
    if security is not None:
        args += ["--tls", "--cafile", str(security.ca), "--username", "recorder"]
        args += ["--password-file", str(security.secrets_dir / "recorder.password")]
    recorder = ManagedProcess(args, logs / "recorder.log")
    recorder.wait_for("event=connected", timeout=30)
    return recorder


class Stack:
    """Broker, recorder, boards and bridge, in that order; `stop()` ends them in reverse. `broker`: made but not
    started (its persistence and security are the campaign's choice)."""

    def __init__(
        self,
        out: Path,
        broker: Mosquitto,
        specs: tuple[BoardSpec, ...],
        messages: int,
        cuts: int,
        rng: random.Random,
        security: Security | None = None,
        recorded: Path | None = None,
        confirm: bool = False,
        app: Path | None = None,
    ) -> None:
        """`confirm`: end-to-end confirmation, on the boards (QoS 1/2) and in the recorder. `app`: the boards'
        application folder, instead of the firmware's (a change under test, or a planted bug)."""
        self.out, self.broker, self.security, self.confirm, self.app = out, broker, security, confirm, app
        self.logs = out / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.recorded = recorded or out / "recorded"
        self.pids: list[int] = []
        self.recorder: ManagedProcess | None = None
        self.bridge: ManagedProcess | None = None
        self.runs: list[BoardRun] = []
        self.bridge_starts = 0
        # The broker's side: every delivery a subscriber of its own sees (as the HIL bench's does), to count what
        # the broker passed on twice whatever the recorder then kept; and when the broker went down (a kill or a
        # restart: time.time()), which may make it pass on a message again.
        self.deliveries: Subscriber | None = None
        self.broker_down: list[float] = []
        # What the campaign does to the system, for the report (dmqtt_telemetry.timeline).
        self.timeline = TimelineWriter(out / "timeline.jsonl")
        self._specs, self._messages, self._cuts, self._rng = specs, messages, cuts, rng

    def start(self, hold: EventSpec | None = None) -> list[Hold]:
        """Broker, its subscriber, recorder, the boards' serial lines, the bridge; then the boards' runs begin.
        `hold`: each board waits at that event of its own (AccessPoint.hold_at) until the hold returned for it is
        released, so that a scenario disturbs the system at a point of the boards' runs, not of the host's clock."""
        self.start_broker()
        self.deliveries = self.subscriber("campaign-deliveries")
        self.start_recorder()
        self.runs = [
            BoardRun(
                spec,
                self.out / "boards" / spec.client_id,
                self.broker.address,
                self._messages,
                self._cuts,
                random.Random(self._rng.random()),
                security=self.security,
                timeline=self.timeline,
                confirm=self.confirm,
                app=self.app,
            )
            for spec in self._specs
        ]
        holds = [run.dut.ap.hold_at(hold) for run in self.runs] if hold is not None else []
        if self.serial_ports:
            self.start_bridge()
        for run in self.runs:
            run.start()
        return holds

    @property
    def serial_ports(self) -> dict[str, str]:
        return {r.spec.client_id: str(r.serial_link) for r in self.runs if r.spec.transport == "serial"}

    def subscriber(self, client_id: str) -> Subscriber:
        """A subscriber to every board's telemetry, as the recorder is allowed it (its user, with security)."""
        if self.security is None:
            return Subscriber(self.broker.address, client_id, "sensors/#", mqtt5=True)
        return Subscriber(
            self.broker.address,
            client_id,
            "sensors/#",
            username="recorder",
            password=(self.security.secrets_dir / "recorder.password").read_text(),
            tls_ca=self.security.ca,
            mqtt5=True,
        )

    def broker_going_down(self) -> None:
        """The campaign is about to kill or stop the broker."""
        self.broker_down.append(time.time())

    def duplicates_at_the_broker(self) -> tuple[list[str], list[str], list[str]]:
        """QoS 2 messages the broker passed on twice as new messages (DUP 0: its own redelivery of an
        unacknowledged one sets DUP), counted where the broker's deliveries are seen, not from what the recorder
        kept: (duplicates, the broker's, resent). A copy its board marked as sent again on purpose (end-to-end
        confirmation's repair: the MQTT 5.0 User Property, docs/confirmation.md) is resent, counted apart; one
        whose two deliveries straddle a broker kill or restart is the broker's doing (it forgot what it had), said
        apart; any other fails a campaign."""
        if self.deliveries is None:
            return [], [], []
        qos2 = {r.spec.client_id for r in self.runs if r.spec.qos == 2}
        arrivals: dict[tuple[str, int, int], list[tuple[float, bool]]] = {}
        for record in list(self.deliveries.records):
            seen = record.telemetry
            if seen is not None and seen.dev in qos2 and not record.dup:
                arrivals.setdefault((seen.dev, seen.boot, seen.seq), []).append((record.arrived, record.resent))
        duplicates: list[str] = []
        brokers: list[str] = []
        resent: list[str] = []
        for (dev, boot, seq), copies in sorted(arrivals.items()):
            for (first, _), (again, marked) in zip(copies, copies[1:], strict=False):
                name = f"{dev} boot {boot} seq {seq}"
                if marked:
                    resent.append(name)
                elif any(first - 1.0 <= down <= again for down in self.broker_down):
                    brokers.append(name)
                else:
                    duplicates.append(name)
        return duplicates, brokers, resent

    def start_broker(self) -> None:
        self.broker.start()
        assert self.broker.process is not None
        self.pids.append(self.broker.process.pid)

    def start_recorder(self) -> None:
        self.recorder = start_recorder(self.broker.address, self.recorded, self.logs, self.security, self.confirm)
        self.pids.append(self.recorder.process.pid)

    def start_bridge(self) -> None:
        tls = ("--tls", "--cafile", str(self.security.ca)) if self.security else ()
        # JSON logs: its counters per board are read back for the timeline (link_counters).
        args = bridge_command(self.broker.address, BAUD, self.serial_ports, 10, *tls, "--log-format", "json")
        self.bridge_starts += 1
        self.bridge = ManagedProcess(args, self._bridge_log(self.bridge_starts))
        self.pids.append(self.bridge.process.pid)
        self.bridge.wait_for('"event": "start"')

    @property
    def boards_finished(self) -> bool:
        return all(r.finished for r in self.runs)

    def failures(self) -> list[str]:
        return [f"{r.spec.client_id}: {r.error}" for r in self.runs if r.error]

    def expected(self) -> dict[str, dict[str, int]]:
        """What each board's summary says it accepted (its run's total, its last boot and what that boot accepted):
        the audit's --expect, which catches a lost tail."""
        return {
            r.spec.client_id: {
                "messages": r.summary["total"],
                "qos": r.spec.qos,
                "boot": r.summary["boot"],
                "sent": r.summary["sent"],
            }
            for r in self.runs
            if r.summary
        }

    def acceptances(self) -> list[dict[str, Any]]:
        """The witness: every `accepted` line each board's console printed, over all its boots (the audit's
        --accepted): what the board said it accepted the moment publish() returned, whatever its journal kept."""
        rows = []
        for run in self.runs:
            for boot, seqs in sorted(run.dut.console.acceptances().items()):
                rows += [{"dev": run.spec.client_id, "boot": boot, "seq": seq} for seq in seqs]
        return rows

    def wake_unconfirmed(self, say: Say) -> None:
        """A board that ends its run with messages the recorder has not confirmed (it waits three confirmation
        timeouts without progress, and a campaign's faults can outlast that) keeps them in its journal for its
        next boot, as a device in the field does. Each such board boots once more, sends again what the store
        lacks and waits for its confirmations, before the audit judges the store (docs/confirmation.md)."""
        for run in self.runs:
            left = (run.summary or {}).get("confirm", {}).get("unconfirmed", 0)
            if not left:
                continue
            say(f"{run.spec.client_id}: {left} messages unconfirmed at the end of its run: its next boot")
            end = boot_once(run.dut, timeout=180)
            after = (end.summary or {}).get("confirm", {}).get("unconfirmed", "?")
            say(f"{run.spec.client_id}: {after} unconfirmed after its next boot")

    def drain(self, say: Say, timeout: float = 60) -> None:
        """Once the boards are done: until the recorder has committed every QoS 1/2 message each board accepted
        (QoS 0 may have lost some; a little longer for its stragglers), then the recorder stops cleanly."""
        expected = self.expected()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            have = distinct_messages(self.recorded)
            if all(have.get(dev, 0) >= e["messages"] for dev, e in expected.items() if e["qos"] > 0):
                break
            time.sleep(0.5)
        else:
            say(f"      still missing messages after {timeout:.0f} s; the audit will say which")
        time.sleep(1.5)
        assert self.recorder is not None
        code = self.recorder.stop()
        self.recorder = None
        if code != 0:
            raise HostBridgeError(f"the recorder exited {code}; see {self.logs / 'recorder.log'}")

    def stop(self) -> None:
        """Boards first (no more traffic), then the recorder (it commits what it holds), the bridge, the broker's
        subscriber, the broker."""
        for r in self.runs:
            r.stop()
        if self.recorder is not None:
            self.recorder.stop()
            self.recorder = None
        if self.bridge is not None:
            self.bridge.stop()
            self.bridge = None
        if self.deliveries is not None:
            self.deliveries.close()
        self.broker.stop()
        self.pids += [pid for r in self.runs for pid in r.pids]
        for dev, counters in self.link_counters().items():
            self.timeline.note("link-counters", dev, **counters)

    def _bridge_log(self, number: int) -> Path:
        """The log of the campaign's `number`th bridge process (1: bridge.log, then bridge-2.log...)."""
        return self.logs / ("bridge.log" if number == 1 else f"bridge-{number}.log")

    def link_counters(self) -> dict[str, dict[str, int]]:
        """Each serial board's link counters over the campaign: the last `counters` event each bridge process
        logged for it (every 10 s, and at a clean stop), summed over the bridges a campaign started."""
        total: dict[str, dict[str, int]] = {}
        for number in range(1, self.bridge_starts + 1):
            last: dict[str, dict[str, int]] = {}
            for line in self._bridge_log(number).read_text(errors="replace").splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a SIGKILL
                if isinstance(record, dict) and record.get("event") == "counters":
                    last[record["board"]] = {k: v for k, v in record.items() if type(v) is int}
            for dev, counters in last.items():
                mine = total.setdefault(dev, {})
                for key, value in counters.items():
                    mine[key] = mine.get(key, 0) + value
        return total

    def write_expected(self) -> tuple[Path, Path]:
        """expected.json (the summaries') and accepted.jsonl (the witness) in the campaign's folder, for the
        audit's --expect and --accepted (docs/pipeline.md)."""
        expected = self.out / "expected.json"
        expected.write_text(json.dumps(self.expected(), indent=2))
        accepted = self.out / "accepted.jsonl"
        accepted.write_text("".join(json.dumps(row) + "\n" for row in self.acceptances()))
        return expected, accepted


def pipeline_command(
    recorded: Path, results: Path, expectations: tuple[Path, Path], timeline: Path | None = None
) -> list[str]:
    """The Spark jobs as a user runs them (README, docs/pipeline.md), judged by the boards' summaries and their
    consoles' witness (`expectations`: write_expected()'s files); with the campaign's timeline for the report.
    Without a timeline, the audit alone (no rollup, no report)."""
    expect_file, accepted_file = expectations
    return [
        sys.executable,
        "-m",
        "host_bridge",
        "pipeline",
        "all" if timeline is not None else "audit",
        "--quick-jvm",  # a campaign's store is small and its audit lasts seconds
        "--input",
        str(recorded),
        "--out",
        str(results),
        "--expect",
        str(expect_file),
        "--accepted",
        str(accepted_file),
        *(("--timeline", str(timeline)) if timeline is not None else ()),
    ]


def run_pipeline(
    recorded: Path, results: Path, expectations: tuple[Path, Path], timeline: Path | None = None
) -> AuditSummary:
    """Audit, rollup and report in one Spark session (a process of its own, its output on ours), or the audit
    alone without a timeline; the audit's verdict as its summary.json has it. HostBridgeError when the jobs could
    not run."""
    done = subprocess.run(pipeline_command(recorded, results, expectations, timeline), check=False)
    if done.returncode not in (0, 1):  # 1: a broken promise, which the summary says
        raise HostBridgeError(f"the Spark jobs exited {done.returncode} (see their output above)")
    try:
        return AuditSummary.read(results)
    except ValueError as exc:
        raise HostBridgeError(f"the Spark jobs left no verdict: {exc}") from None
