"""`host-bridge pipeline JOB`: the telemetry jobs (audit, rollup, report, all) and a local Spark cluster, under
the project's one entry point. The same jobs run as `python -m dmqtt_pipeline JOB` and under spark-submit."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dmqtt_pipeline.errors import PipelineError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from dmqtt_pipeline import cluster
    from dmqtt_pipeline.__main__ import add_jobs

    parser_options: dict[str, Any] = {"formatter_class": parser.formatter_class}  # the jobs' help as the parent's
    sub = parser.add_subparsers(dest="job", required=True, metavar="JOB")
    add_jobs(sub, **parser_options)
    what = "a standalone Spark cluster on loopback (master and workers) for --master, until Ctrl-C"
    cluster.add_arguments(sub.add_parser("cluster", help=what, description=what, **parser_options))


def run(args: argparse.Namespace) -> int:
    from dmqtt_pipeline import cluster
    from dmqtt_pipeline.__main__ import run as run_job

    try:
        return cluster.serve(args) if args.job == "cluster" else run_job(args)
    except PipelineError as exc:
        print(f"host-bridge pipeline {args.job}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
