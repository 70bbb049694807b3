"""`python -m dmqtt_pipeline rollup`: readings per device per 1-minute and 1-hour window.

Each message counts once, however often it was delivered: rows are deduplicated by (dev, boot, seq), keeping
the first arrival. A message's window is the time the recorder first received it (the board's own `t` counts
from its boot and is not wall time). Written per date (date=YYYY-MM-DD, the window's start, UTC): a run replaces
the dates it holds and keeps the others, so a daily run with --since and --until adds its day."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dmqtt_pipeline.audit import messages

WINDOWS = {"minute": "1 minute", "hour": "1 hour"}


def rollup(df: DataFrame) -> dict[str, DataFrame]:
    """{"minute": ..., "hour": ...}: dev, window_start, window_end, count, min, max, mean of reading, and the
    window's date (UTC: the session's time zone)."""
    readings = messages(df).filter(F.col("reading").isNotNull())
    tables = {}
    for name, duration in WINDOWS.items():
        tables[name] = (
            readings.groupBy("dev", F.window("received_at", duration).alias("w"))
            .agg(
                F.count(F.lit(1)).alias("count"),
                F.min("reading").alias("min"),
                F.max("reading").alias("max"),
                F.avg("reading").alias("mean"),
            )
            .select(
                "dev",
                F.col("w.start").alias("window_start"),
                F.col("w.end").alias("window_end"),
                "count",
                "min",
                "max",
                "mean",
                F.to_date(F.col("w.start")).alias("date"),
            )
        )
    return tables


def write(tables: dict[str, DataFrame], out: str) -> dict[str, int]:
    """OUT/minute and OUT/hour as Parquet, a folder per date (date=YYYY-MM-DD), a file a date sorted by device and
    window; the dates these tables hold are replaced, the others kept (dynamic partition overwrite). Returns the
    row count of each."""
    counts = {}
    for name, table in tables.items():
        table = table.cache()
        (
            table.repartition("date")
            .sortWithinPartitions("dev", "window_start")
            .write.mode("overwrite")
            .option("partitionOverwriteMode", "dynamic")
            .partitionBy("date")
            .parquet(f"{out.rstrip('/')}/{name}")
        )
        counts[name] = table.count()
        table.unpersist()
    return counts
