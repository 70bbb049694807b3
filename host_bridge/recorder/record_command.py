"""`host-bridge record`: its arguments, its handler, and the command line a harness starts it with; the recorder
itself is host_bridge.recorder.recorder."""

from __future__ import annotations

import argparse
import copy
import hashlib
import os
import signal
import ssl
import sys
from logging import INFO, WARNING
from pathlib import Path
from types import FrameType

from dmqtt import codec
from dmqtt.errors import CodecError
from host_bridge.logs import add_log_format_argument, event, log_to_stdout
from host_bridge.metrics import MetricsServer, metrics_address
from host_bridge.net import AddressError, Destination, TLSConfig, add_wait_argument, await_broker, seconds
from host_bridge.recorder import config
from host_bridge.recorder.recorder import VERSIONS, BrokerLink, Recorder, log
from host_bridge.recorder.store import RecorderError, TelemetryStore


def command(broker: str, out: Path, *extra: str) -> list[str]:
    """The `host-bridge record` command line, as a harness starts it (the campaigns, the bench, the benchmarks)."""
    return [sys.executable, "-m", "host_bridge", "record", "--broker", broker, "--out", str(out), *extra]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Every option but --config and --check defaults to None: what the command line leaves unset comes from the
    # config file, then from host_bridge.recorder.config's defaults (config.apply), which the help quotes.
    d = config.DEFAULTS
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="a TOML file with any of these options (their names, _ for -; [tls]); the command line wins over it",
    )
    parser.add_argument("--broker", metavar="HOST:PORT", help="the broker to subscribe to (required, here or in FILE)")
    add_wait_argument(parser)
    add_log_format_argument(parser, default=None)
    parser.add_argument(
        "-t", "--topic", action="append", metavar="FILTER", help="topic filter, repeatable (default sensors/#)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="output folder (Parquet under date=YYYY-MM-DD/; required, here or in FILE)",
    )
    parser.add_argument(
        "-i", "--client-id", help="MQTT client id of the persistent session (default: kept in DIR/_recorder)"
    )
    parser.add_argument("--mqtt-version", choices=sorted(VERSIONS), help=f"default {d.mqtt_version}")
    parser.add_argument("--keepalive", type=int, metavar="S", help=f"default {d.keepalive}")
    parser.add_argument(
        "--flush-seconds",
        type=float,
        metavar="S",
        help=f"Parquet commit interval (default {d.flush_seconds:g}; deliveries are safe in the log before this, "
        "it only sets how fresh the Parquet is)",
    )
    parser.add_argument("--flush-rows", type=int, metavar="N", help=f"commit early at N rows (default {d.flush_rows})")
    parser.add_argument(
        "--stats-every",
        type=seconds,
        metavar="S",
        help=f"print progress every S seconds (default {d.stats_every:g}; 0: never)",
    )
    parser.add_argument(
        "--metrics", metavar="HOST:PORT", help="serve Prometheus metrics on /metrics and a health check on /healthz"
    )
    parser.add_argument(
        "--health-after",
        type=seconds,
        metavar="S",
        help=f"/healthz fails once the broker has been unreachable this long (default {d.health_after:g}), and "
        "while the store fails",
    )
    parser.add_argument(
        "--confirm",
        action="store_true",
        default=None,
        help="end-to-end confirmation: tell each board what is stored, so that it sends again what a broker lost "
        "(docs/confirmation.md); the store then holds each (dev, boot, seq) once",
    )
    parser.add_argument(
        "--confirm-topic",
        metavar="TEMPLATE",
        help=f"where a board's confirmations go ({{dev}}: its client id; default {d.confirm_topic})",
    )
    parser.add_argument(
        "--confirm-every",
        type=float,
        metavar="S",
        help=f"at most one confirmation per board per S seconds (default {d.confirm_every:g})",
    )
    parser.add_argument(
        "--compact",
        action=argparse.BooleanOptionalAction,
        help="compact each closed day's files (a million rows a file), a day at a time between commits (default: on; "
        "docs/telemetry-parquet.md)",
    )
    parser.add_argument(
        "--retain-days",
        type=int,
        metavar="N",
        help="drop the days more than N days before today (UTC; default: keep everything)",
    )
    parser.add_argument(
        "--retain-gb",
        type=float,
        metavar="GB",
        help="drop the oldest days while the days' files take more than GB gigabytes (10^9 bytes; today is never "
        "dropped; default: no limit)",
    )
    parser.add_argument("-u", "--username")
    parser.add_argument("--password-file", type=Path, help="file holding the password (kept out of ps and logs)")
    parser.add_argument("--tls", action="store_true", help="TLS to the broker, certificate verified")
    parser.add_argument("--cafile", help="CA bundle that signs the broker's certificate")
    parser.add_argument("--certfile", help="client certificate (mutual TLS)")
    parser.add_argument("--keyfile", help="client certificate's key")
    parser.add_argument(
        "--retire",
        action="store_true",
        help="end this recorder's persistent session at the broker (what it queued there is dropped) and exit: "
        "before taking a recorder out of service, so that its session does not queue for ever (docs/services.md)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the options and FILE (topics, addresses, the password file, the TLS files, the output folder) "
        "and exit 0, or 2 saying what is wrong, without connecting or writing: before a restart",
    )


def _client_id(store: TelemetryStore, requested: str | None) -> str:
    """The persistent session's client id is kept with the output, so a restart resumes the same session."""
    path = store.state / "client_id"
    kept = path.read_text().strip() if path.exists() else None
    if requested and kept and requested != kept:
        # The old session's queued messages stay with the old id.
        event(log, WARNING, "client_id_changed", old=kept, new=requested)
    client_id = requested or kept or "recorder-" + hashlib.sha1(str(store.out.resolve()).encode()).hexdigest()[:10]
    if client_id != kept:
        try:
            path.write_text(client_id)
        except OSError as exc:
            # Without it a restart would open another session and leave this one's messages behind.
            raise RecorderError(
                f"cannot keep the session's client id in {path}: {exc.strerror}; free space there"
            ) from None
    return client_id


def check(args: argparse.Namespace) -> str:
    """What `record --check` tries beyond the checks every run makes: the TLS files loaded into a context, the
    metrics address as the server takes it, and an output folder the recorder can write (or make). RecorderError
    or MetricsError when one fails."""
    if args.tls:
        try:
            TLSConfig(args.cafile, args.certfile, args.keyfile).context()
        except (OSError, ssl.SSLError) as exc:
            raise RecorderError(f"--tls: {exc}") from None
    if args.metrics:
        metrics_address(args.metrics)
    folder = args.out if args.out.exists() else next((p for p in args.out.parents if p.exists()), Path("/"))
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise RecorderError(f"--out {args.out}: {folder} is not a folder this user can write")
    topics = ",".join(args.topic or ["sensors/#"])
    source = f" (from {args.config} and the command line)" if args.config else ""
    return (
        f"configuration OK{source}: broker {args.broker}; topics {topics}; out {args.out}; "
        f"tls {'yes' if args.tls else 'no'}"
    )


def retire(args: argparse.Namespace, broker: Destination, password: bytes | None) -> str:
    """`record --retire`: the store opened (so no recorder runs on it, and what its log holds is committed), its
    session ended at the broker, the subscriptions it kept forgotten. -> what was done."""
    store = TelemetryStore(args.out, confirm=args.confirm)  # (its log keeps the confirmation ledger as it was)
    try:
        kept = store.state / "client_id"
        if not kept.exists():
            raise RecorderError(f"{args.out} holds no recorder session (no {kept}): nothing to retire")
        client_id = kept.read_text().strip()
        tls = TLSConfig(args.cafile, args.certfile, args.keyfile) if args.tls else None
        try:
            link, _ = BrokerLink.open(broker, tls, client_id, VERSIONS[args.mqtt_version], args.keepalive,
                                      args.username, password, retire=True)  # fmt: skip
        except (OSError, CodecError) as exc:
            raise RecorderError(f"cannot reach {broker} to end the session: {exc}") from None
        link.close(polite=True)
        (store.state / "subscriptions").unlink(missing_ok=True)
    finally:
        store.close()
    return (
        f"session {client_id} ended at {broker}: the broker dropped what it held for it; {args.out} keeps every "
        "row stored (a recorder started on it later opens a new session)"
    )


def settle(args: argparse.Namespace) -> Destination:
    """The command line over --config over the defaults, into args, each setting checked (RecorderError saying
    what is wrong): at start, and again at a reload (SIGHUP). -> the broker."""
    config.apply(args)
    try:
        broker = Destination.parse(args.broker)
    except AddressError as exc:
        raise RecorderError(str(exc)) from None
    for topic in args.topic or []:
        try:
            codec.check_filter(topic.encode())  # before any connection: a broker would only close on it
        except CodecError as exc:
            raise RecorderError(f"--topic {topic}: {exc.reason}") from None
    if args.confirm and any(t.startswith("$share/") for t in args.topic or []):
        # Each member of the group sees a share of a board's messages, and would report the rest missing.
        raise RecorderError("--confirm needs every message of a board in one recorder: not with a $share/ topic")
    try:
        codec.check_topic(args.confirm_topic.replace("{dev}", "dev").encode())
    except CodecError as exc:
        raise RecorderError(f"--confirm-topic {args.confirm_topic}: {exc.reason}") from None
    return broker


def run(args: argparse.Namespace) -> int:
    # pyarrow's default allocator (mimalloc) keeps what a compaction freed, and the next batch takes more: the
    # system's reuses it, which keeps the recorder's peak while compacting a day under its goal (BENCHMARKS.md,
    # figure 18). Read when pyarrow makes its first buffer, so set before the store loads it; an operator's own
    # choice stands.
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    command_line = copy.deepcopy(args)  # what a reload reads the config file under again
    broker = settle(args)
    log_to_stdout("host_bridge.recorder.recorder", args.log_format)
    password = None
    if args.password_file is not None:
        try:
            password = args.password_file.read_bytes().rstrip(b"\r\n")
        except OSError as exc:
            raise RecorderError(f"cannot read --password-file {args.password_file}: {exc.strerror}") from None
    if args.check:
        print(check(args))
        return 0
    if args.retire:
        print(retire(args, broker, password))
        return 0
    await_broker(
        broker,
        args.wait,
        lambda text: event(log, WARNING, "broker_unreachable", why=text),
        "is it running (host-bridge broker starts one), and is --broker right? Ctrl-C stops",
    )
    store = TelemetryStore(args.out, confirm=args.confirm)
    try:
        if store.recovered:
            event(log, INFO, "recovered", rows=store.recovered)  # logged by the previous run, now in Parquet
        for step in store.resumed:
            event(log, WARNING, "maintenance_resumed", step=step)  # interrupted by the last run's end, now done
        recorder = Recorder(args, broker, store, _client_id(store, args.client_id), password)

        def reread() -> argparse.Namespace:
            again = copy.deepcopy(command_line)
            settle(again)
            return again

        recorder.reread = reread
        server = None
        if args.metrics:
            from host_bridge.recorder import metrics as recorder_metrics

            server = MetricsServer(
                args.metrics,
                lambda: recorder_metrics.families(recorder),
                lambda: recorder_metrics.health(recorder, args.health_after),
            )

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            recorder.signals.append(signum)

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):
            signal.signal(sig, on_signal)
        event(
            log, INFO, "start", broker=args.broker, topics=",".join(recorder.topics), out=args.out,
            metrics=server.address if server else "-",
        )  # fmt: skip
        if server is not None:
            server.start()
        try:
            recorder.run()
        finally:
            if server is not None:
                server.stop()
    finally:
        store.close()
    return 0
