"""Child processes the host tools start (recorder, bridge) with their output in a log file; stopped by their
own pid, never by name."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from host_bridge.errors import HostBridgeError


class ManagedProcess:
    def __init__(self, args: list[str], log_path: Path, cwd: Path | None = None) -> None:
        self.args = args
        self.log_path = log_path
        self.log = open(log_path, "ab")
        self.process = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, cwd=cwd)

    def text(self) -> str:
        return self.log_path.read_text(errors="replace")

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def wait_for(self, marker: str, timeout: float = 20) -> None:
        """Until `marker` appears in the log; HostBridgeError when the process ends or time runs out first."""
        deadline = time.monotonic() + timeout
        while marker not in self.text():
            if not self.running:
                raise HostBridgeError(f"{self.args[2:4]} exited ({self.process.returncode}); see {self.log_path}")
            if time.monotonic() > deadline:
                raise HostBridgeError(f"no {marker!r} from {self.args[2:4]} within {timeout:.0f} s; see {self.log_path}")
            time.sleep(0.05)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM (a clean shutdown), then wait; returns the exit status."""
        if self.running:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        finally:
            self.log.close()

    def kill(self) -> None:
        """SIGKILL: no clean-up at all, as a crash or a power cut of the host."""
        self.process.kill()
        self.process.wait(15)
        self.log.close()
