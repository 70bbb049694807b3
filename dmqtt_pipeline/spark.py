"""The Spark session and the I/O every job shares: reading the recorder's Parquet, writing results to Hadoop
paths (a local folder, or hdfs://, s3a:// ... on a cluster), and one error type for the whole pipeline."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import DataFrame, SparkSession

from dmqtt_pipeline.errors import PipelineError
from dmqtt_pipeline.jvm import QUICK_JVM_OPTIONS
from dmqtt_telemetry.format import (
    PARTITION_COLUMN,
    STATE_DIR,
    committed_files,
    damaged_files,
    log_state,
    spark_schema,
)  # fmt: skip

__all__ = ["PipelineError", "QUICK_JVM_OPTIONS"]  # (re-exported: the jobs' modules take them from here)

LOG4J = Path(__file__).with_name("log4j2.properties")


# Spark's launcher starts every JVM with --add-modules=jdk.incubator.vector (hard-coded in spark-launcher's
# JavaModuleOptions), and the JVM then prints this line on its stderr, which no option turns off.
INCUBATOR_WARNING = b"WARNING: Using incubator modules: "


@contextlib.contextmanager
def _jvm_stderr_without(noise: bytes) -> Iterator[None]:
    """While Spark starts its JVM, file descriptor 2 is a pipe: the JVM inherits it for its whole life, and a
    thread copies what it writes to the real stderr, less the lines that start with `noise`. Everything else
    (errors included) still reaches the user."""
    sys.stderr.flush()
    saved = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def forward() -> None:
        with os.fdopen(read_end, "rb") as lines:
            for line in lines:  # until the JVM (the last holder of the write end) exits
                if not line.startswith(noise):
                    os.write(saved, line)
        os.close(saved)

    threading.Thread(target=forward, name="jvm-stderr", daemon=True).start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)


def session(master: str | None = "local[*]", app: str = "dmqtt-pipeline", quick_jvm: bool = False) -> SparkSession:
    """A Spark session with the UI off and quiet logs; a local master binds to loopback only. master None
    keeps the one spark-submit configured. quick_jvm: QUICK_JVM_OPTIONS for the driver and the executors (for
    a driver that spark-submit started, its --driver-java-options decide)."""
    # Spark hands timestamps to Python as naive datetimes in the process's time zone: make that UTC, the
    # session's, so that every time the jobs print or write is UTC.
    os.environ["TZ"] = "UTC"
    time.tzset()
    # Executors run this very interpreter (the virtual environment's), not whatever python3 is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    local = master is not None and master.startswith("local")
    loopback = local or (master or "").startswith("spark://127.0.0.1:")  # e.g. dmqtt_pipeline.cluster's
    jvm_options = f" {QUICK_JVM_OPTIONS}" if quick_jvm else ""
    builder = SparkSession.builder.appName(app)
    if master is not None:
        builder = builder.master(master)
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{LOG4J}{jvm_options}")
    )
    if quick_jvm:
        builder = builder.config("spark.executor.extraJavaOptions", QUICK_JVM_OPTIONS)
    if loopback:
        # Nothing of a run on this machine listens beyond loopback.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    if local:
        builder = builder.config("spark.sql.shuffle.partitions", "4")  # a handful suits one machine
    try:
        with _jvm_stderr_without(INCUBATOR_WARNING):
            spark = builder.getOrCreate()
    except (PySparkException, OSError) as exc:
        raise PipelineError(
            f"Spark did not start ({exc}). It needs a Java runtime: `make system-deps` installs "
            "openjdk-17-jre-headless, or set JAVA_HOME."
        ) from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def hadoop_path(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """(Hadoop FileSystem, Hadoop Path) of a path: the same code for a local folder and a cluster file system."""
    jpath = _jvm(spark).org.apache.hadoop.fs.Path(path)
    jsc = spark.sparkContext._jsc
    assert jsc is not None
    return jpath.getFileSystem(jsc.hadoopConfiguration()), jpath


def _jvm(spark: SparkSession) -> Any:
    jvm = spark.sparkContext._jvm
    if jvm is None:
        raise PipelineError("the Spark session has no JVM (was it stopped?)")
    return jvm


def input_paths(path: str) -> list[str]:
    """--input: one recorder's folder, or several separated by commas (recorders sharing a subscription, each
    with its own folder), read as one dataset."""
    return [p for p in path.split(",") if p]


def require_input(spark: SparkSession | None, path: str) -> None:
    """PipelineError when an input folder does not exist. A local path is checked without Spark, so that a
    mistyped --input fails before a JVM starts; other paths only once there is a session (spark not None)."""
    for one in input_paths(path):
        if is_local(one):
            exists = local_path(one).exists()
        elif spark is not None:
            fs, jpath = hadoop_path(spark, one)
            exists = fs.exists(jpath)
        else:
            continue
        if not exists:
            raise PipelineError(
                f"input {one} does not exist; point --input at the recorder's --out folder (the recorder creates it)"
            )


def check_storage(path: str, quarantine: bool = False) -> list[str]:
    """The damaged data files of each local input folder (dmqtt_telemetry.format.damaged_files), found before
    Spark starts: a PipelineError naming the first and saying what to do, or with `quarantine` their paths, for
    the jobs to leave out and report apart from delivery. A folder that is not local is read by Spark alone."""
    damaged: list[tuple[Path, str]] = []
    for one in input_paths(path):
        if is_local(one):
            damaged += damaged_files(local_path(one))
    if damaged and not quarantine:
        first, why = damaged[0]
        more = f" (and {len(damaged) - 1} more)" if len(damaged) > 1 else ""
        raise PipelineError(
            f"storage fault, not a delivery loss: {first} is no readable Parquet ({why}){more}; restore it from a "
            "backup or move it out of the folder, or run with --quarantine-damaged to judge the rest and list it apart"
        )
    return [str(p) for p, _ in damaged]


def read_telemetry(spark: SparkSession, path: str, leave_out: frozenset[str] = frozenset()) -> DataFrame:
    """The recorder's rows under `path` (or under each of several comma-separated folders), without the files in
    `leave_out` (damaged: check_storage); PipelineError when one does not exist or there are no rows."""
    require_input(spark, path)
    try:
        # One read per folder, then a union: Spark's partition discovery refuses several roots in one read.
        frames = [_read_folder(spark, one, leave_out) for one in input_paths(path)]
        df = frames[0]
        for more in frames[1:]:
            df = df.unionByName(more)
    except AnalysisException as exc:
        raise PipelineError(f"cannot read {path} as the recorder's Parquet: {exc}") from None
    if df.isEmpty():
        raise PipelineError(f"input {path} holds no telemetry rows (has the recorder committed anything yet?)")
    return df


def _read_folder(spark: SparkSession, folder: str, leave_out: frozenset[str] = frozenset()) -> DataFrame:
    """One recorder's folder. A read whose listing of the files may have met a compaction between its rename and
    its removal of the files it replaced (docs/telemetry-parquet.md) holds those rows twice: it keeps each row once
    by `arrival` (unique in a folder). Whether it may have is the recorder's log's to say, read before and after
    the listing: a compaction record in it, or another generation (a step ended meanwhile). A folder that is not
    local is always read that way."""
    before = _log_state(folder)
    reader = spark.read.schema(spark_schema())
    if is_local(folder) and leave_out:
        # The folder's files but the damaged ones, the partition column still read from their folders' names.
        kept = [str(f) for f in committed_files(local_path(folder)) if str(f) not in leave_out]
        if not kept:
            raise PipelineError(f"input {folder}: every data file is damaged (--quarantine-damaged left none)")
        frame = reader.option("basePath", folder).parquet(*kept)
    else:
        frame = reader.parquet(folder)  # (the files are listed here)
    after = _log_state(folder)
    if before is None or after is None or before != after or before[1] or after[1]:
        frame = frame.dropDuplicates(["arrival"])
    return frame


def _log_state(folder: str) -> tuple[int, bool] | None:
    """dmqtt_telemetry.format.log_state of the recorder's folder that holds `folder` (the folder itself, or the
    one above a date's folder given as --input); None (cannot be told) for a folder that is not local, or a date's
    folder with no recorder's log above it."""
    if not is_local(folder):
        return None
    path = local_path(folder).resolve()
    for root in (path, *path.parents[:2]):
        if (root / STATE_DIR).is_dir():
            return log_state(root)
    return None if path.name.startswith(f"{PARTITION_COLUMN}=") else log_state(path)


def is_local(path: str) -> bool:
    return urlparse(path).scheme in ("", "file")


def local_path(path: str) -> Path:
    return Path(urlparse(path).path if path.startswith("file:") else path)


def publish_files(spark: SparkSession, files: dict[str, bytes], dest: str) -> None:
    """Small result files (JSON summary, HTML, PNG) into the folder `dest`, local or on a Hadoop file system."""
    if is_local(dest):
        folder = local_path(dest)
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            temp = folder / f".{name}.tmp"
            temp.write_bytes(data)
            os.replace(temp, folder / name)  # a reader never sees half a file
    else:
        copy_to_hadoop(spark, files, dest)


def copy_to_hadoop(spark: SparkSession, files: dict[str, bytes], dest: str) -> None:
    """The same through the Hadoop FileSystem API (hdfs://, s3a://, any scheme the cluster knows)."""
    staging = Path(tempfile.mkdtemp(prefix="dmqtt-pipeline-"))
    try:
        fs, _ = hadoop_path(spark, dest)
        jvm = _jvm(spark)
        for name, data in files.items():
            (staging / name).write_bytes(data)
            target = jvm.org.apache.hadoop.fs.Path(f"{dest.rstrip('/')}/{name}")
            fs.copyFromLocalFile(False, True, jvm.org.apache.hadoop.fs.Path(str(staging / name)), target)
    finally:
        shutil.rmtree(staging)
