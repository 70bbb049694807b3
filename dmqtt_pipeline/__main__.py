"""`python -m dmqtt_pipeline JOB`: the telemetry jobs on Apache Spark (local[*] unless --master says otherwise).

    audit   per device and boot: received, gaps, duplicates, order, latency; a verdict per QoS.
            Exit 0 when every promise holds, 1 when one is broken, 2 when the job could not run.
    rollup  readings per device per minute and per hour, each message counted once.
    report  an HTML page with PNG plots.
    all     audit, rollup and report in one Spark session (what `make demo` runs).

Also runnable as `spark-submit path/to/pipeline/__main__.py JOB ...`: the master then comes from spark-submit."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # spark-submit runs this file as a script: make `dmqtt_pipeline` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dmqtt_pipeline.errors import PipelineError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dmqtt_pipeline", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_jobs(parser.add_subparsers(dest="job", required=True, metavar="JOB"))
    return parser


def add_jobs(sub: argparse._SubParsersAction[argparse.ArgumentParser], **parser_options: Any) -> None:
    """The jobs and their arguments, as subcommands of `sub` (this module's parser, or `host-bridge pipeline`)."""
    for name, help_text in JOBS.items():
        job = sub.add_parser(name, help=help_text, description=help_text, **parser_options)
        job.add_argument(
            "-i",
            "--input",
            required=True,
            metavar="PATH[,PATH...]",
            help="the recorder's --out folder (a Hadoop path); several recorders' folders separated by commas",
        )
        job.add_argument("-o", "--out", required=True, metavar="PATH", help="where results go (a Hadoop path)")
        job.add_argument("--master", help="Spark master URL (default local[*], or spark-submit's)")
        job.add_argument(
            "--quick-jvm",
            action="store_true",
            help="tune the JVM for a run of seconds on a small store (client compiler, serial GC): about half the "
            "CPU of a default start; leave it off for a large store",
        )
        job.add_argument(
            "--since", metavar="TIME", help="only rows received from TIME (UTC: 2026-11-21 or 2026-11-21T06:30)"
        )
        job.add_argument("--until", metavar="TIME", help="only rows received before TIME (UTC)")
        job.add_argument(
            "--boards", metavar="ID[,ID...]", help="only these boards (client ids; shell patterns: greenhouse-*)"
        )
        job.add_argument(
            "--quarantine-damaged",
            action="store_true",
            help="a data file that is no readable Parquet (empty, truncated, overwritten) is left out and listed "
            "apart from delivery, instead of ending the job with exit 2",
        )
        if name in ("audit", "all"):
            job.add_argument(
                "--state",
                metavar="FILE",
                help="carry each boot's high mark and open gaps from run to run (a daily audit reads its day and "
                "FILE, not the history); its range's end is the default --since (docs/pipeline.md)",
            )
        if name in ("audit", "report", "all"):
            job.add_argument(
                "--expect", metavar="FILE", help='JSON {"dev": messages accepted}: also catches a lost tail'
            )
            job.add_argument(
                "--accepted",
                metavar="FILE",
                help='JSON Lines {"dev", "boot", "seq"}: what each board\'s console said it accepted (the witness)',
            )
        if name in ("report", "all"):
            job.add_argument(
                "--timeline",
                metavar="FILE",
                help="a campaign's timeline (JSON Lines: power cuts, kills, link counters) drawn in the report",
            )
        if name == "audit":
            job.add_argument(
                "--stream", action="store_true", help="Structured Streaming: verdicts updated as files arrive"
            )
            job.add_argument(
                "--watermark", default="10 minutes", help="deduplication watermark on received_at (--stream)"
            )
            job.add_argument(
                "--interval", type=float, default=2.0, metavar="S", help="seconds between cycles (--stream)"
            )
            job.add_argument(
                "--until-idle", type=float, metavar="S", help="stop after S seconds without new rows (--stream)"
            )
            job.add_argument("--once", action="store_true", help="process what is there now, then stop (--stream)")


JOBS = {
    "audit": "check every QoS promise; exit 1 when one is broken",
    "rollup": "per device per 1-minute and 1-hour window: count, min, max, mean",
    "report": "an HTML page with PNG plots, readable without a server",
    "all": "audit, rollup and report in one Spark session",
}


def _master(requested: str | None) -> str | None:
    if requested:
        return requested
    # Under spark-submit the gateway is already up and spark-submit's --master applies.
    return None if "PYSPARK_GATEWAY_PORT" in os.environ else "local[*]"


def run(args: argparse.Namespace) -> int:
    from dmqtt_pipeline import audit, jobs, stream
    from dmqtt_pipeline.scope import Scope
    from dmqtt_pipeline.spark import check_storage, require_input, session
    from dmqtt_telemetry import timeline

    expect = None
    if getattr(args, "expect", None):
        try:
            with open(args.expect) as f:
                expect = audit.load_expectations(f.read())
        except OSError as exc:
            raise PipelineError(f"cannot read --expect {args.expect}: {exc.strerror}") from None
    if getattr(args, "accepted", None):
        try:
            with open(args.accepted) as f:
                expect = audit.load_acceptances(f.read(), expect)
        except OSError as exc:
            raise PipelineError(f"cannot read --accepted {args.accepted}: {exc.strerror}") from None
    events = None
    if getattr(args, "timeline", None):
        try:
            with open(args.timeline) as f:
                events = timeline.read(f.read(), args.timeline)
        except OSError as exc:
            raise PipelineError(f"cannot read --timeline {args.timeline}: {exc.strerror}") from None
        except timeline.TimelineError as exc:
            raise PipelineError(str(exc)) from None
    require_input(None, args.input)
    scope = Scope.parse(args.since, args.until, args.boards)
    ranged = scope.since or scope.until or getattr(args, "state", None)
    if ranged and (expect is not None or getattr(args, "stream", False)):
        # A board's expected total counts messages outside the range too; a stream has no end to range over.
        raise PipelineError("--since, --until and --state judge a range: not with --expect, --accepted or --stream")
    damaged = check_storage(args.input, args.quarantine_damaged)  # before a JVM starts: exit 2 in one line
    if damaged and getattr(args, "stream", False):
        raise PipelineError("--stream reads every file as it comes: move the damaged files out of the folder first")
    for path in damaged:
        print(f"[pipeline] quarantined: {path} is no readable Parquet (a storage fault, not a delivery loss)")
    started = time.monotonic()
    master = _master(args.master)
    print(f"[pipeline] starting Spark ({master or 'from spark-submit'})", flush=True)
    spark = session(master, quick_jvm=args.quick_jvm)
    try:
        if args.job == "audit" and args.stream:
            result = stream.stream_audit(
                spark, args.input, args.out, expect, args.watermark, args.interval, args.until_idle, args.once
            )
            return 0 if result.ok else 1
        state = Path(args.state) if getattr(args, "state", None) else None
        code = jobs.run_job(spark, args.job, args.input, args.out, expect, events, damaged, scope, state).exit_code
        print(f"[pipeline] {args.job} done in {time.monotonic() - started:.1f} s", flush=True)
        return code
    finally:
        spark.stop()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except PipelineError as exc:
        print(f"pipeline {args.job}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
