"""The virtual board's console, as a real board's USB serial port: what the board prints (stdout and stderr,
one stream, as a chip's UART0 carries both) goes to the console's sink (a log file, the vboard command's own
output) and to a pseudo-terminal whose host end mpremote, `host-bridge deploy` or a terminal opens; what is
written there is the board's input (its REPL's, vboot's vrepl shim).

A Ctrl-C byte is not passed on as a byte: it becomes SIGINT to the board process, which the MicroPython Unix
port turns into KeyboardInterrupt, as the ESP32 port's UART driver raises KeyboardInterrupt when it sees
Ctrl-C. Back-to-back Ctrl-C bytes are one interrupt: the Unix port exits outright on a second SIGINT that
arrives before the first one is handled. A board ignores Ctrl-C until its boot has set itself up (the `ready`
file, which vboot makes just before boot.py), as a chip does during its ROM boot and MicroPython's start, when
its interrupt character is off.

The pty outlives boots, as the USB port outlives resets of a board behind a USB-UART bridge: each boot's
process is attached with boot() and its output drained before the next one's."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import threading
import time
import tty
from pathlib import Path
from typing import IO, Any

CTRL_C = 3
_INTERRUPT_GAP_S = 0.1  # Ctrl-C bytes closer than this make one interrupt


class Console:
    def __init__(self, ready: Path, link: Path | None = None) -> None:
        """`ready`: the file a boot makes once Ctrl-C may interrupt it (removed at each boot()); `link`: a fixed
        path for the host end, as /dev/serial/by-id is for a real adapter."""
        self.ready = ready
        self.link = link
        self._master, self._slave = pty.openpty()
        tty.setraw(self._slave)
        os.set_blocking(self._master, False)
        self.host_path = os.ttyname(self._slave)
        if link is not None:
            tmp = link.with_name(link.name + ".new")
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(self.host_path)
            tmp.replace(link)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._stdin: int = -1
        self._last_interrupt = 0.0
        self._output: threading.Thread | None = None
        self._input = threading.Thread(target=self._relay_input, name="vboard-console-in", daemon=True)
        self._input.start()

    @property
    def path(self) -> str:
        """The host end: the fixed link when there is one, else the pty itself."""
        return str(self.link) if self.link is not None else self.host_path

    def boot(self, process: subprocess.Popen[bytes], sink: IO[Any] | int | None) -> None:
        """Attach a new boot's process (started with stdin and stdout as pipes). `sink`: where its output also
        goes: a file object or descriptor (duplicated here, so the caller may close its own), or None for this
        program's standard output."""
        if self._output is not None:
            self._output.join(5)  # the previous boot's last words come first
        self.ready.unlink(missing_ok=True)
        assert process.stdin is not None and process.stdout is not None
        if sink is None:
            target = os.dup(1)
        elif isinstance(sink, int):
            target = os.dup(sink)
        else:
            target = os.dup(sink.fileno())
        source = os.dup(process.stdout.fileno())
        process.stdout.close()
        with self._lock:
            if self._stdin >= 0:
                os.close(self._stdin)
            self._stdin = os.dup(process.stdin.fileno())
            process.stdin.close()
            self._process = process
        self._output = threading.Thread(
            target=self._relay_output, args=(source, target), name="vboard-console-out", daemon=True
        )
        self._output.start()

    def _relay_output(self, source: int, target: int) -> None:
        try:
            while True:
                data = os.read(source, 4096)
                if not data:
                    return
                _write_all(target, data)
                try:
                    os.write(self._master, data)
                except OSError:
                    pass  # nobody reads the port and its buffer is full: bytes are lost, as on a real port
        except OSError:
            return
        finally:
            os.close(source)
            os.close(target)

    def _relay_input(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self._master], [], [], 0.1)
                if not ready:
                    continue
                data = os.read(self._master, 4096)
            except OSError:
                if self._stop.is_set():
                    return
                time.sleep(0.05)
                continue
            with self._lock:
                self._deliver(data)

    def _deliver(self, data: bytes) -> None:
        """Bytes to the running board (none running: lost, as input to a board that is off)."""
        process = self._process
        if process is None or process.poll() is not None or self._stdin < 0:
            return
        for i, piece in enumerate(data.split(bytes((CTRL_C,)))):
            if i and self.ready.exists():
                now = time.monotonic()
                if now - self._last_interrupt > _INTERRUPT_GAP_S:
                    self._last_interrupt = now
                    try:
                        os.kill(process.pid, signal.SIGINT)
                    except ProcessLookupError:
                        return
            if piece:
                try:
                    _write_all(self._stdin, piece)
                except OSError:
                    return  # the board went down meanwhile

    def close(self) -> None:
        self._stop.set()
        self._input.join(1)
        if self._output is not None:
            self._output.join(2)
        with self._lock:
            for fd in (self._master, self._slave, self._stdin):
                if fd >= 0:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            self._stdin = -1
        if self.link is not None:
            self.link.unlink(missing_ok=True)
        self.ready.unlink(missing_ok=True)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
