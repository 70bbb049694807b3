"""Figure 7 of BENCHMARKS.md: the Spark audit at 1M and 10M synthetic rows on local[2], its rows/s and growth
exponent, against the same per-boot counts computed by DuckDB on the same Parquet in the same run (the
single-machine baseline a data engineer would reach for); then the same audit on a Spark standalone cluster of two
one-core workers on this machine (dmqtt_pipeline.cluster: master and workers from the pyspark package, on loopback).

    python tools/bench_pipeline.py [--quick]          (part of make bench)

The rows are written as a recorder writes them (dmqtt_telemetry.format: schema and folder layout): 1,000
devices, one boot each, seq 0, 1, 2 ... with one message in 1,000 missing and one in 1,000 delivered twice, so
both engines must find the same losses and duplicates; the run checks that they do."""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from bench_report import Goal, Section, goal_table, table

from dmqtt_telemetry import format as telemetry

DEVICES = 1000
CHUNK = 1_000_000
T0_US = 1_795_000_000_000_000


def write_dataset(out: Path, rows: int, seed: int = 7) -> dict[str, int]:
    """About `rows` deliveries under out/date=.../part-*.parquet; returns the rows and the duplicates planted (a
    planted loss at a device's highest seq is invisible to any audit, so losses are compared between engines)."""
    rng = np.random.default_rng(seed)
    per_device = rows // DEVICES
    schema = telemetry.arrow_schema()
    payload = telemetry.payload("dev-0000", 1, 0, 0, 20.0)
    lost = duplicates = 0
    written = 0
    part = 0
    folder = telemetry.partition_dir(out, "2026-11-20")
    folder.mkdir(parents=True)
    devices_per_chunk = max(1, CHUNK // per_device)
    for first in range(0, DEVICES, devices_per_chunk):
        devs = np.arange(first, min(DEVICES, first + devices_per_chunk))
        seq = np.tile(np.arange(per_device, dtype=np.int64), len(devs))
        dev_index = np.repeat(devs, per_device)
        keep = rng.random(len(seq)) >= 0.001  # one in 1,000 lost
        lost += int((~keep).sum())
        seq, dev_index = seq[keep], dev_index[keep]
        again = rng.random(len(seq)) < 0.001  # one in 1,000 delivered twice
        duplicates += int(again.sum())
        seq = np.concatenate([seq, seq[again]])
        dev_index = np.concatenate([dev_index, dev_index[again]])
        n = len(seq)
        columns = {
            "received_at": pa.array(T0_US + seq * 10_000 + dev_index, pa.timestamp("us", tz="UTC")),
            "arrival": pa.array(np.arange(written, written + n, dtype=np.int64)),
            "topic": pa.array(np.char.add("sensors/dev-", np.char.zfill(dev_index.astype(str), 4)), pa.string()),
            "qos": pa.array(np.full(n, 1, dtype=np.int8)),
            "dup": pa.array(np.zeros(n, dtype=bool)),
            "retain": pa.array(np.zeros(n, dtype=bool)),
            "packet_id": pa.array((seq % 65535 + 1).astype(np.int32)),
            "recorder_dup": pa.array(np.zeros(n, dtype=bool)),
            "dev": pa.array(np.char.add("dev-", np.char.zfill(dev_index.astype(str), 4)), pa.string()),
            "boot": pa.array(np.ones(n, dtype=np.int64)),
            "seq": pa.array(seq),
            "t": pa.array(seq * 10_000),
            "reading": pa.array(20.0 + (seq % 20) * 0.25),
            "payload": pa.array([payload] * n, pa.binary()),
            "parse_error": pa.nulls(n, pa.string()),
        }
        # The format's other columns, all of them nullable (set only by features these rows do not use, as
        # `repaired` by the recorder's confirmation): null, as a recorder without them writes them.
        for field in schema:
            if field.name not in columns and field.nullable:
                columns[field.name] = pa.nulls(n, field.type)
        table = pa.table(columns, schema=schema)
        pq.write_table(table, telemetry.part_file(out, "2026-11-20", 1, part), compression="zstd")
        written += n
        part += 1
    return {"rows": written, "lost_planted": lost, "duplicates": duplicates}


DUCKDB_AUDIT = """
WITH usable AS (
    SELECT dev, boot, seq, arrival, qos, received_at, t FROM read_parquet('{path}/*/*.parquet', hive_partitioning = 1)
    WHERE parse_error IS NULL AND dev IS NOT NULL AND boot IS NOT NULL AND seq IS NOT NULL AND NOT recorder_dup
),
counts AS (
    SELECT dev, boot, count(*) AS received, max(seq) AS highest_seq, count(DISTINCT seq) AS distinct_seqs
    FROM usable GROUP BY dev, boot
),
firsts AS (
    SELECT dev, boot, seq, arrival, epoch_us(received_at) / 1000.0 - t AS offset_ms,
           seq < max(seq) OVER (
               PARTITION BY dev, boot ORDER BY arrival ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
           ) AS out_of_order
    FROM (SELECT *, row_number() OVER (PARTITION BY dev, boot, seq ORDER BY arrival) AS n FROM usable) WHERE n = 1
),
timing AS (
    SELECT dev, boot, sum(coalesce(out_of_order, false)::int) AS out_of_order,
           quantile_cont(offset_ms - min_offset, [0.5, 0.9, 0.99]) AS latency
    FROM (SELECT *, min(offset_ms) OVER (PARTITION BY dev, boot) AS min_offset FROM firsts) GROUP BY dev, boot
),
gaps AS (
    SELECT dev, boot, list([first, last] ORDER BY first)[1:10] AS missing_ranges FROM (
        SELECT dev, boot, coalesce(lag(seq) OVER (PARTITION BY dev, boot ORDER BY seq) + 1, 0) AS first, seq - 1 AS last
        FROM (SELECT DISTINCT dev, boot, seq FROM usable)
    ) WHERE first <= last GROUP BY dev, boot
)
SELECT c.dev, c.boot, received, highest_seq + 1 - distinct_seqs AS lost, received - distinct_seqs AS duplicates,
       out_of_order, latency, missing_ranges
FROM counts c JOIN timing USING (dev, boot) LEFT JOIN gaps USING (dev, boot)
"""


def duckdb_audit(path: Path) -> tuple[float, int, int]:
    import duckdb

    start = time.monotonic()
    con = duckdb.connect()
    con.execute("SET threads = 2")
    rows = con.execute(DUCKDB_AUDIT.format(path=path)).fetchall()
    seconds = time.monotonic() - start
    con.close()
    return seconds, sum(r[3] for r in rows), sum(r[4] for r in rows)


def spark_audit(path: Path, master: str) -> tuple[float, int, int]:
    """The audit on an already started session of `master` (the session start is not timed)."""
    from dmqtt_pipeline import audit
    from dmqtt_pipeline.spark import read_telemetry, session

    spark = session(master, "dmqtt-bench")
    start = time.monotonic()
    result, boots = audit.audit(read_telemetry(spark, str(path)))
    seconds = time.monotonic() - start
    # The audit caches its per-boot table, and Spark serves any later plan equal to a cached one from that cache:
    # without this, a second audit of the same folder (the warm-up's twin) would be timed as a cache read.
    boots.unpersist(blocking=True)
    return seconds, sum(b["lost"] for b in result.boots), sum(b["duplicates"] for b in result.boots)


def stop_session() -> None:
    """Stop this process's Spark session, if any: one SparkContext per process, so a new master needs it gone."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


def cluster_audits(folders: list[Path]) -> list[float]:
    """The audit of each folder on a two-worker standalone cluster; seconds each."""
    from dmqtt_pipeline.cluster import LocalCluster

    stop_session()  # local[2]'s
    with LocalCluster(workers=2, cores=1, memory="2g") as cluster:
        spark_audit(folders[0], cluster.url)  # warm-up: executors start, as local[2]'s session had started
        seconds = [spark_audit(folder, cluster.url)[0] for folder in folders]
        stop_session()  # before its cluster goes
    return seconds


def figure(quick: bool) -> dict[str, Any]:
    sizes = (100_000, 1_000_000) if quick else (1_000_000, 10_000_000)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for rows in sizes:
            folder = Path(tmp) / f"rows-{rows}"
            planted = write_dataset(folder, rows)
            if rows == sizes[0]:
                spark_audit(folder, "local[2]")  # warm-up (JIT, file cache), as the cluster gets one below
            spark_s, spark_lost, spark_dups = spark_audit(folder, "local[2]")
            duck_s, duck_lost, duck_dups = duckdb_audit(folder)
            run: dict[str, Any] = {
                "rows": planted["rows"],
                "spark_s": spark_s,
                "duckdb_s": duck_s,
                "spark_over_duckdb": spark_s / duck_s,
                "spark_rows_per_s": planted["rows"] / spark_s,
                "lost": [spark_lost, duck_lost],
                "duplicates": [spark_dups, duck_dups, planted["duplicates"]],
                "agree": spark_lost == duck_lost and spark_dups == duck_dups == planted["duplicates"],
            }
            runs.append(run)
            print(
                f"  {run['rows']:>10,} rows: Spark local[2] {spark_s:.1f} s, DuckDB {duck_s:.2f} s "
                f"({run['spark_over_duckdb']:.1f}x); lost {spark_lost}/{duck_lost}, duplicates "
                f"{spark_dups}/{duck_dups} (planted {planted['duplicates']})",
                flush=True,
            )
        on_cluster = cluster_audits([Path(tmp) / f"rows-{rows}" for rows in sizes])
    for run, seconds in zip(runs, on_cluster, strict=True):
        run["cluster_s"] = seconds
        run["cluster_over_local"] = seconds / run["spark_s"]
        print(f"  {run['rows']:>10,} rows: two-worker standalone cluster {seconds:.1f} s", flush=True)
    return {"runs": runs, **growth(runs), "goal_ratio": 5.0}


def growth(runs: list[dict[str, Any]]) -> dict[str, float]:
    """How time grows from the smaller run to the larger (1.0: linear), for Spark and for DuckDB."""
    small, large = runs
    scale = math.log(large["rows"] / small["rows"])
    return {
        "growth_exponent": math.log(large["spark_s"] / small["spark_s"]) / scale,
        "duckdb_growth_exponent": math.log(large["duckdb_s"] / small["duckdb_s"]) / scale,
    }


# -- the report (tools/bench_pipeline.md) -----------------------------------------------------------------------


def report(fig: dict[str, Any], figures: dict[str, Any]) -> Section:
    fig = fig | growth(fig["runs"])
    rows = [
        [f"{r['rows']:,}", f"{r['spark_s']:.1f}", f"{r['spark_rows_per_s']:,.0f}", f"{r['duckdb_s']:.2f}",
         f"{r['spark_over_duckdb']:.1f}x", f"{r['cluster_s']:.1f}" if "cluster_s" in r else "-",
         "yes" if r["agree"] else "**no**"]
        for r in fig["runs"]
    ]  # fmt: skip
    largest = fig["runs"][-1]
    goals = [
        Goal("7", f"Spark audit at {largest['rows']:,} rows against DuckDB", f"<= {fig['goal_ratio']:.0f}x",
             f"{largest['spark_over_duckdb']:.1f}x", largest["spark_over_duckdb"] <= fig["goal_ratio"]),
        Goal("7", "growth from the smaller to the larger run (1.0: linear; DuckDB's in brackets)", "<= 1.0",
             f"{fig['growth_exponent']:.2f} ({fig['duckdb_growth_exponent']:.2f})", fig["growth_exponent"] <= 1.0),
    ]  # fmt: skip
    if "cluster_s" in largest:
        ratio = largest["cluster_over_local"]
        goals.append(Goal("7", f"two-worker standalone cluster against local[2] at {largest['rows']:,} rows",
                          "< 1.0x", f"{ratio:.2f}x", ratio < 1.0))  # fmt: skip
    head = ["rows", "Spark local[2] s", "Spark rows/s", "DuckDB s", "Spark / DuckDB", "cluster s", "agree"]
    return Section({"table": table(head, rows), "goals_table": goal_table(goals)}, goals)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    result = figure(args.quick)
    print(f"Spark growth exponent from the smaller to the larger run: {result['growth_exponent']:.2f} (1.0 = linear)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
