"""`python -m dmqtt_pipeline audit --stream`: the audit's verdicts kept up to date while the recorder writes.

Structured Streaming over the recorder's folder, two queries on the same file source:
- deliveries: every usable row, counted per device and boot (received, highest seq, QoS);
- messages: the same rows deduplicated by (dev, boot, seq) within a watermark on received_at
  (dropDuplicatesWithinWatermark), counted per device and boot.
lost = highest seq + 1 - messages and duplicates = deliveries - messages give the same verdicts as the batch
audit. The queries run in cycles (Trigger.AvailableNow, resuming from their checkpoints), one after the other,
and the table is printed after each cycle that saw new rows: a file that lands between the two queries of a
cycle is counted by the second only until the next cycle. A duplicate arriving later than the watermark
escapes deduplication and is missed here; the batch audit, which keeps no watermark, still finds it.
Out-of-order arrivals and latency are the batch audit's."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dmqtt_pipeline.audit import AuditResult, Expectation, format_table, judge, usable
from dmqtt_pipeline.spark import PipelineError, input_paths, publish_files, require_input
from dmqtt_telemetry.format import spark_schema
from dmqtt_telemetry.promises import duplicates, lost


class StreamState:
    """What the two queries have counted so far, per (dev, boot)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.deliveries: dict[tuple[str, int], dict[str, int]] = {}
        self.messages: dict[tuple[str, int], int] = {}
        self.rows = 0
        self.parse_errors = 0
        self.recorder_dups = 0

    def on_deliveries(self, batch: DataFrame, _batch_id: int) -> None:
        """Every row of the batch: counted as a row, an unparsable payload, a recorder re-store, or a delivery."""
        totals = batch.agg(
            F.count(F.lit(1)).alias("rows"),
            F.sum(F.col("parse_error").isNotNull().cast("int")).alias("parse_errors"),
            F.sum(F.col("recorder_dup").cast("int")).alias("recorder_dups"),
        ).first()
        counts = (
            usable(batch)
            .groupBy("dev", "boot")
            .agg(
                F.count(F.lit(1)).alias("n"),
                F.max("seq").alias("highest"),
                F.max("qos").alias("qos"),
                F.min("qos").alias("qos_min"),
                F.sum(F.coalesce(F.col("repaired"), F.lit(False)).cast("int")).alias("repaired"),
            )
        )
        with self.lock:
            if totals is not None and totals["rows"]:
                self.rows += totals["rows"]
                self.parse_errors += totals["parse_errors"]
                self.recorder_dups += totals["recorder_dups"]
            for row in counts.collect():
                entry = self.deliveries.setdefault(
                    (row["dev"], row["boot"]), {"n": 0, "highest": -1, "qos": 0, "qos_min": 2, "repaired": 0}
                )
                entry["n"] += row["n"]
                entry["repaired"] += row["repaired"]
                entry["highest"] = max(entry["highest"], row["highest"])
                entry["qos"] = max(entry["qos"], row["qos"])
                entry["qos_min"] = min(entry["qos_min"], row["qos_min"])

    def on_messages(self, batch: DataFrame, _batch_id: int) -> None:
        counts = batch.groupBy("dev", "boot").agg(F.count(F.lit(1)).alias("n"))
        with self.lock:
            for row in counts.collect():
                key = (row["dev"], row["boot"])
                self.messages[key] = self.messages.get(key, 0) + row["n"]

    def result(self, expect: dict[str, Expectation] | None) -> AuditResult:
        with self.lock:
            boots = []
            for (dev, boot), d in sorted(self.deliveries.items()):
                distinct = self.messages.get((dev, boot), 0)
                boots.append(
                    {
                        "dev": dev,
                        "boot": boot,
                        "qos": d["qos"],
                        "received": d["n"],
                        "distinct": distinct,
                        "highest_seq": d["highest"],
                        "lost": max(lost(d["highest"], distinct), 0),
                        "duplicates": max(duplicates(d["n"], distinct), 0),
                        "out_of_order": 0,
                        "repaired": d["repaired"],
                        "latency_p50_ms": None,
                        "latency_p99_ms": None,
                        "missing_ranges": [],
                        "mixed_qos": d["qos"] != d["qos_min"],
                    }
                )
            rows, parse_errors, recorder_dups = self.rows, self.parse_errors, self.recorder_dups
        verdicts, checks = judge(boots, expect)
        return AuditResult(boots, verdicts, rows, parse_errors, recorder_dups, checks, streaming=True)


def stream_audit(
    spark: SparkSession,
    input_path: str,
    out: str,
    expect: dict[str, Expectation] | None = None,
    watermark: str = "10 minutes",
    interval: float = 2.0,
    until_idle: float | None = None,
    once: bool = False,
    on_update: Callable[[AuditResult], None] | None = None,
    stop: threading.Event | None = None,
) -> AuditResult:
    """Run cycles until `once` is done, nothing new arrived for `until_idle` seconds, or `stop` is set.
    Each cycle that saw new rows prints the verdict table, rewrites OUT/stream-summary.json and calls on_update."""
    if len(input_paths(input_path)) > 1:
        raise PipelineError("--stream reads one recorder's folder (Structured Streaming has one file source path)")
    require_input(spark, input_path)
    checkpoints = tempfile.mkdtemp(prefix="dmqtt-stream-audit-")
    state = StreamState()
    source = spark.readStream.schema(spark_schema()).parquet(input_path)
    writers = [
        source.writeStream.foreachBatch(state.on_deliveries).option("checkpointLocation", f"{checkpoints}/deliveries"),
        usable(source)
        .withWatermark("received_at", watermark)
        .dropDuplicatesWithinWatermark(["dev", "boot", "seq"])
        .writeStream.foreachBatch(state.on_messages)
        .option("checkpointLocation", f"{checkpoints}/messages"),
    ]
    seen = -1
    last_change = time.monotonic()
    result = state.result(expect)
    try:
        while True:
            for writer in writers:
                query = writer.trigger(availableNow=True).start()
                query.awaitTermination()
                if query.exception() is not None:
                    raise PipelineError(f"the streaming audit failed: {query.exception()}")
            if state.rows != seen:
                seen = state.rows
                last_change = time.monotonic()
                result = state.result(expect)
                print(f"--- stream audit, {state.rows} rows so far ---\n{format_table(result)}", flush=True)
                summary = result.summary_json(input_path, mode=f"stream (watermark {watermark})")
                publish_files(spark, {"stream-summary.json": summary}, out)
                if on_update is not None:
                    on_update(result)
            if once or (stop is not None and stop.is_set()):
                break
            if until_idle is not None and time.monotonic() - last_change >= until_idle:
                break
            time.sleep(interval)
    finally:
        shutil.rmtree(checkpoints, ignore_errors=True)
    return result
