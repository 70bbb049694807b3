"""`host-bridge record` as a user runs it, for tests: started, stopped or killed by pid, and its Parquet
output read back with pyarrow."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from dmqtt_telemetry.format import read_committed
from host_bridge.processes import ManagedProcess
from host_bridge.recorder.record_command import command
from tests.conftest import REPO


class RecorderProcess(ManagedProcess):
    def __init__(
        self, out: Path, broker: str, *extra: str, log_dir: Path | None = None, env: dict[str, str] | None = None
    ) -> None:
        args = command(broker, out, "--flush-seconds", "0.3", "--stats-every", "1", *extra)
        self.out = out
        super().__init__(args, (log_dir or out.parent) / f"recorder-{time.monotonic_ns()}.log", cwd=REPO, env=env)

    def wait_connected(self) -> None:
        self.wait_for("event=connected")

    def wait_rows(self, count: int, timeout: float = 30) -> None:
        """Until `count` rows are committed to Parquet (the recorder commits every 0.3 s here)."""
        deadline = time.monotonic() + timeout
        while len(read_rows(self.out)) < count:
            assert time.monotonic() < deadline, f"fewer than {count} rows committed within {timeout:.0f} s"
            assert self.running, f"the recorder exited; see {self.log_path}"
            time.sleep(0.05)


def read_rows(out: Path) -> list[dict[str, Any]]:
    """Every committed row, in arrival order (Hive partition column `date` included)."""
    return read_committed(out)
