"""The jobs on a real Spark standalone cluster (one master, two workers, all on loopback, from the pyspark
package), submitted as a Spark user submits them (`spark-submit --master spark://... dmqtt_pipeline/__main__.py
all ...`, the master then coming from spark-submit): the same audit, rollup and report as on local[2] (run through
`host-bridge pipeline`, whose exit code and quiet output it checks too), and nothing of the cluster left running
after it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from dmqtt_pipeline.cluster import LocalCluster
from dmqtt_pipeline.jvm import QUICK_JVM_OPTIONS
from tests.pipeline.datasets import Msg, write_dataset

REPO = Path(__file__).resolve().parents[2]


def rollup_rows(folder: Path) -> list[tuple[object, ...]]:
    table = pq.read_table(folder).to_pylist()
    return sorted(tuple(sorted(row.items())) for row in table)


def pipeline(rec: Path, out: Path, *command: str, master: str | None = None) -> subprocess.Popen[str]:
    """`command` (`host-bridge pipeline`, or spark-submit with its options and the jobs' script) running every
    job, on `master` (none: spark-submit's)."""
    return subprocess.Popen(
        [*command, "all", "--input", str(rec), "--out", str(out), "--quick-jvm",
         *(["--master", master] if master else [])],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"},
    )  # fmt: skip


def test_audit_rollup_and_report_on_a_two_worker_standalone_cluster(tmp_path: Path) -> None:
    msgs = [Msg(f"dev-{d}", 1, s, s * 1000, qos=1 + d % 2, reading=float(s % 7)) for d in range(4) for s in range(300)]
    msgs += [Msg("dev-0", 1, 17, 17500)]  # delivered twice: allowed at QoS 1
    msgs = [m for m in msgs if not (m.dev == "dev-1" and m.seq == 40)]  # lost at QoS 2: the audit fails
    write_dataset(tmp_path / "rec", msgs, commit_every=97)
    # The reference: the same jobs on local[2], in a process of their own while the cluster starts (not in the
    # tests' shared Spark session, whose worker would otherwise run this test after all the others), through the
    # CLI a bench runs: it exits 1 on the broken promise, with the summary written, and keeps the JVM's chatter
    # off its output.
    local = pipeline(tmp_path / "rec", tmp_path / "local", sys.executable, "-m", "host_bridge", "pipeline",
                     master="local[2]")  # fmt: skip

    cluster = LocalCluster(workers=2, cores=1, memory="1g", log_dir=tmp_path / "cluster", quick_jvm=True)
    try:
        cluster.start()
        assert cluster.registered() == 2
        spark_submit = Path(sys.executable).parent / "spark-submit"
        remote = pipeline(tmp_path / "rec", tmp_path / "remote", str(spark_submit), "--master", cluster.url,
                          "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1",
                          "--conf", "spark.driver.bindAddress=127.0.0.1", "--driver-java-options", QUICK_JVM_OPTIONS,
                          str(REPO / "dmqtt_pipeline" / "__main__.py"))  # fmt: skip
        out, _ = remote.communicate(timeout=600)
        run = subprocess.CompletedProcess(remote.args, remote.returncode, out, "")
        worker_logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "cluster").glob("worker-*.log"))
    finally:
        pids = cluster.pids()
        cluster.stop()
        local_out, _ = local.communicate(timeout=600)
    assert local.returncode == 1, local_out
    # Spark's JVM says "WARNING: Using incubator modules" at every start; the pipeline keeps it off the output.
    assert "incubator" not in local_out, local_out[-2000:]
    assert run.returncode == 1, run.stdout + run.stderr
    assert "starting Spark (from spark-submit)" in run.stdout, run.stdout[-2000:]
    # The work ran on the workers' executors, not in the driver.
    assert "Launching executor" in worker_logs or "Asked to launch executor" in worker_logs, worker_logs[-2000:]
    # Every JVM of the run was tuned for its short life: the workers' own, and the executors' (the application's
    # --quick-jvm reaches them through spark.executor.extraJavaOptions, in their launch command).
    launches = [line for line in worker_logs.splitlines() if "CoarseGrainedExecutorBackend" in line]
    options = [f'"{option}"' for option in QUICK_JVM_OPTIONS.split()]
    assert launches and all(o in line for line in launches for o in options), launches
    here = json.loads((tmp_path / "local" / "summary.json").read_text())
    there = json.loads((tmp_path / "remote" / "summary.json").read_text())
    for key in ("ok", "rows", "qos"):
        assert there[key] == here[key], key

    def counts(summary: dict[str, object]) -> list[tuple[object, ...]]:
        fields = ("dev", "boot", "received", "lost", "duplicates", "out_of_order")
        return sorted(tuple(b[f] for f in fields) for b in summary["boots"])  # type: ignore[attr-defined]

    assert counts(there) == counts(here) and ("dev-1", 1, 299, 1, 0, 0) in counts(here)
    for table in ("minute", "hour"):
        assert rollup_rows(tmp_path / "remote" / "rollup" / table) == rollup_rows(tmp_path / "local" / "rollup" / table)
    assert (tmp_path / "remote" / "report" / "index.html").exists()
    assert len(pids) >= 3, f"the check below needs the master and both workers: found {pids}"
    for pid in pids:  # master, workers and their executors: all gone
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2], pid


def test_a_worker_the_master_logs_twice_is_one_worker(tmp_path: Path) -> None:
    """A worker that started before its master listened retries, and the master can log its registration again
    (seen on a loaded machine): the count is of workers, not of lines."""
    cluster = LocalCluster(workers=2, log_dir=tmp_path)
    (tmp_path / "master.log").write_text(
        "INFO Master: Registering worker 127.0.0.1:44405 with 1 cores, 1024.0 MiB RAM\n"
        "INFO Master: Registering worker 127.0.0.1:41749 with 1 cores, 1024.0 MiB RAM\n"
        "INFO Master: Registering worker 127.0.0.1:44405 with 1 cores, 1024.0 MiB RAM\n"
    )
    assert cluster.registered() == 2
