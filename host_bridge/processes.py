"""Child processes the host tools start (recorder, bridge, broker, boards): each registered here when it starts,
so that a harness can prove that nothing it started outlives it (`still_running`), and stopped by its own pid,
never by name. ManagedProcess: a host tool with its output in a log file."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from host_bridge.errors import HostBridgeError


def dies_with_parent(signal_name: str = "TERM") -> list[str]:
    """The command prefix `setpriv --pdeathsig SIG --` (util-linux, on every Debian and Ubuntu): it execs the
    command with Linux's parent-death signal set, so the kernel sends SIG when the thread that started it ends,
    whatever ends it (SIGKILL included). Used for boards (KILL: a power cut), which are always booted from the
    thread that then waits for them; not for processes a harness may restart from a short-lived thread."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise HostBridgeError("setpriv is missing (util-linux): it ties started processes' lives to their owner's")
    return [setpriv, "--pdeathsig", signal_name, "--"]


def sigterm_as_ctrl_c() -> None:
    """From now on SIGTERM (a harness, systemd, `kill`) unwinds this program as Ctrl-C does, so that what it
    started is stopped by the code that started it (context managers, fixtures). Main thread only, as Python
    allows; elsewhere nothing changes."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupted)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@dataclass(frozen=True)
class Started:
    pid: int
    what: str
    kind: str  # "board", "broker", "bridge", "recorder", ...
    process: subprocess.Popen[bytes]


_started: list[Started] = []
_lock = threading.Lock()


def register(process: subprocess.Popen[bytes], what: str, kind: str) -> None:
    """Note a child process this program started (and is responsible for stopping)."""
    with _lock:
        _started[:] = [s for s in _started if s.process.poll() is None]
        _started.append(Started(process.pid, what, kind, process))


def still_running() -> list[Started]:
    """Every registered child that has not ended (and been reaped) yet."""
    with _lock:
        _started[:] = [s for s in _started if s.process.poll() is None]
        return list(_started)


class ManagedProcess:
    def __init__(
        self, args: list[str], log_path: Path, cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> None:
        """`env`: variables added to this process's environment for it."""
        self.args = args
        self.log_path = log_path
        self.log = open(log_path, "ab")
        # No parent-death signal here: a harness restarts bridges and recorders from helper threads (a timer
        # that disturbs a run), and the signal follows the starting thread, not the process. Their owner stops
        # them; the bench's plugin checks that it did.
        self.process = subprocess.Popen(
            args, stdout=self.log, stderr=subprocess.STDOUT, cwd=cwd, env={**os.environ, **env} if env else None
        )
        command = args[3] if len(args) > 3 and args[1:3] == ["-m", "host_bridge"] else ""
        register(
            self.process, " ".join(args[1:4]), kind={"run": "bridge", "record": "recorder"}.get(command, "process")
        )

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
                raise HostBridgeError(
                    f"no {marker!r} from {self.args[2:4]} within {timeout:.0f} s; see {self.log_path}"
                )
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
