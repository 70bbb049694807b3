"""A Spark standalone cluster on this machine, from the pyspark package itself: one master and N workers, every
service on 127.0.0.1. For the cluster test and the benchmark, and for trying the jobs' cluster path without a
cluster:

    python -m dmqtt_pipeline.cluster --workers 2        (prints the master URL; Ctrl-C stops it)
    python -m dmqtt_pipeline all --master spark://127.0.0.1:PORT --input ... --out ...

Each process is started here and stopped by its pid (SIGTERM, then SIGKILL); a worker's executors are its
children and are stopped with it. Nothing here is needed on a real cluster, whose master URL --master takes."""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from dmqtt_pipeline.errors import PipelineError
from dmqtt_pipeline.jvm import QUICK_JVM_OPTIONS

LOOPBACK = "127.0.0.1"


def spark_home() -> Path:
    """The pyspark package's folder: Spark's jars and scripts (spark-class) are in it."""
    import pyspark

    return Path(pyspark.__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def _children(pid: int) -> list[int]:
    """Processes whose parent is pid (from /proc), e.g. a worker's executors."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry.name))
    return out


class LocalCluster:
    """Master and workers as child processes; `url` is the master's spark:// URL once started."""

    def __init__(
        self,
        workers: int = 2,
        cores: int = 1,
        memory: str = "2g",
        log_dir: Path | None = None,
        quick_jvm: bool = False,
    ) -> None:
        """quick_jvm: the master and the workers start with spark.QUICK_JVM_OPTIONS (the executors take the
        application's spark.executor.extraJavaOptions, which `session(quick_jvm=True)` sets)."""
        self.workers = workers
        self.quick_jvm = quick_jvm
        self.cores = cores
        self.memory = memory
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix="dmqtt-spark-cluster-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.url = f"spark://{LOOPBACK}:{self.port}"
        self.processes: list[subprocess.Popen[bytes]] = []

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "SPARK_HOME": str(spark_home()),
                # Every service (RPC, block manager, the web UIs) binds to loopback only.
                "SPARK_LOCAL_IP": LOOPBACK,
                "SPARK_LOCAL_HOSTNAME": LOOPBACK,
                "SPARK_LOG_DIR": str(self.log_dir),
                "SPARK_WORKER_DIR": str(self.log_dir / "work"),
                "PYSPARK_PYTHON": sys.executable,
            }
        )
        if self.quick_jvm:
            env["SPARK_DAEMON_JAVA_OPTS"] = QUICK_JVM_OPTIONS
        return env

    def _start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.log_dir / f"{name}.log", "ab")
        process = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args],
            env=self._env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.processes.append(process)
        return process

    def start(self, timeout: float = 90) -> LocalCluster:
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            LOOPBACK,
            "--port",
            str(self.port),
            "--webui-port",
            str(_free_port()),
        )
        for i in range(self.workers):
            self._start(
                f"worker-{i + 1}",
                "org.apache.spark.deploy.worker.Worker",
                self.url,
                "--host",
                LOOPBACK,
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--webui-port",
                str(_free_port()),
            )
        deadline = time.monotonic() + timeout
        while self.registered() < self.workers:
            for process in self.processes:
                if process.poll() is not None:
                    self.stop()
                    raise PipelineError(f"a Spark cluster process exited ({process.returncode}); see {self.log_dir}")
            if time.monotonic() > deadline:
                self.stop()
                raise PipelineError(
                    f"{self.workers} workers did not register within {timeout:.0f} s; see {self.log_dir}"
                )
            time.sleep(0.5)
        return self

    def registered(self) -> int:
        """Workers the master has registered (from its log), each once: a worker that started before the master
        listened retries, and the master can log the same worker twice."""
        log = self.log_dir / "master.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        return len(set(re.findall(r"Registering worker (\S+)", text)))

    def pids(self) -> list[int]:
        """The cluster's live processes: master, workers and the workers' executors."""
        out = []
        for process in self.processes:
            if process.poll() is None:
                out.append(process.pid)
                out += _children(process.pid)
        return out

    def stop(self, timeout: float = 20) -> None:
        """Workers first (each stops its executors), then the master; SIGKILL for what outlives the timeout."""
        executors = [pid for p in self.processes[1:] if p.poll() is None for pid in _children(p.pid)]
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for process in reversed(self.processes):
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for pid in executors:
            try:
                os.kill(pid, signal.SIGKILL)  # only if its worker did not stop it (it normally has)
            except ProcessLookupError:
                pass
        self.processes.clear()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def _exit(signum: int, frame: object) -> None:
    raise SystemExit(0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--memory", default="2g", help="memory per worker")
    parser.add_argument(
        "--quick-jvm",
        action="store_true",
        help="master and workers tuned for a short life (client compiler, serial GC)",
    )


def serve(args: argparse.Namespace) -> int:
    """Start the cluster, print its master URL, run until Ctrl-C or SIGTERM, then stop every process of it."""
    cluster = LocalCluster(args.workers, args.cores, args.memory, quick_jvm=args.quick_jvm).start()
    print(f"Spark master {cluster.url} with {args.workers} workers; logs in {cluster.log_dir}; Ctrl-C stops it")
    signal.signal(signal.SIGTERM, _exit)  # a SIGTERM stops the cluster too, not only this process
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    try:
        return serve(parser.parse_args())
    except PipelineError as exc:
        print(f"cluster: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
