"""`host-bridge record` as a user runs it, for tests and the demo's checks: started, stopped or killed by pid,
and its Parquet output read back with pyarrow."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds

from tests.conftest import REPO


class RecorderProcess:
    def __init__(self, out: Path, broker: str, *extra: str, log: Path | None = None) -> None:
        self.out = out
        self.log_path = log or out.parent / f"recorder-{time.monotonic_ns()}.log"
        self.log = open(self.log_path, "ab")
        args = [sys.executable, "-m", "host_bridge", "record", "--broker", broker, "--out", str(out), "--flush-seconds", "0.3", "--stats-every", "1", *extra]
        self.process = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, cwd=REPO)

    def wait_connected(self, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while "event=connected" not in self.text():
            assert self.process.poll() is None, self.text()
            assert time.monotonic() < deadline, self.text()
            time.sleep(0.05)

    def text(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(30)
        self.log.close()
        return code

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(15)
        self.log.close()


def read_rows(out: Path) -> list[dict[str, Any]]:
    """Every committed row, in arrival order (Hive partition column `date` included)."""
    if not any(out.glob("date=*/*.parquet")):
        return []
    table = ds.dataset(str(out), format="parquet", partitioning="hive").to_table()
    return sorted(table.to_pylist(), key=lambda r: r["arrival"])
