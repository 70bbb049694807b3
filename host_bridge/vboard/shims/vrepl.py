# The virtual board's REPL on its console: what MicroPython's C REPL (its shared/runtime/pyexec.c) does on a
# real board's USB serial port, so that mpremote, a terminal or `host-bridge deploy` talk to a virtual board as they
# talk to a chip. Kept out of firmware/: on a real board this is C in the image.
#
# - Friendly REPL (">>> "): a line at a time, compound statements continued with "... ", the value of an
#   expression printed; Ctrl-A enters the raw REPL, Ctrl-B prints the banner, Ctrl-C drops the line, Ctrl-D on
#   an empty line is a soft reset, Ctrl-E paste mode.
# - Raw REPL ("raw REPL; CTRL-B to exit\r\n>"): code up to Ctrl-D, answered "OK", its output, "\x04", the
#   exception if any, "\x04"; Ctrl-D on an empty buffer is a soft reset; Ctrl-B back to the friendly REPL.
#   Raw-paste mode (Ctrl-E "A" Ctrl-A) with the port's flow control: the window size, then Ctrl-A for each
#   window taken.
# - Ctrl-C: the host side of the console turns it into SIGINT, as the chip's UART driver turns it into a
#   KeyboardInterrupt, so it interrupts a running program; while the REPL waits for input it arrives as
#   KeyboardInterrupt (in the read, or at the next instruction after it) and counts as the character: the
#   input so far is dropped and the prompt comes again.
# - A soft reset ends the process with SOFT_RESET_STATUS (RAW_SOFT_RESET_STATUS from the raw REPL) after
#   printing "MPY: soft reboot", and the runner boots the board again: boot.py, then main.py, or the raw REPL
#   again without main.py, as the ESP32 port does. machine.reset() inside the REPL still ends the process with
#   its own status (a hard reset).
# - End of input (no console attached) ends the process with the status the program before it left.

import sys

import vboard_state

SOFT_RESET_STATUS = 98
RAW_SOFT_RESET_STATUS = 97
HARD_RESET_STATUS = 99  # machine.reset()

_CTRL_A = 1
_CTRL_B = 2
_CTRL_C = 3
_CTRL_D = 4
_CTRL_E = 5
_EOF = -1
_PASTE_WINDOW = 128  # bytes the host may send before it waits for our Ctrl-A (raw-paste flow control)

_stdin = sys.stdin.buffer
_stdout = sys.stdout.buffer


def write(data):
    if isinstance(data, str):
        data = data.encode()
    _stdout.write(data)


def getc():
    """The next input byte (Ctrl-C arrives as KeyboardInterrupt instead: see run())."""
    b = _stdin.read(1)
    return b[0] if b else _EOF


def banner():
    impl = sys.implementation
    version = ".".join(str(v) for v in impl.version[:3])
    write("MicroPython v%s on the virtual ESP32 board (Unix port)\r\n" % version)
    write('Type "help()" for more information.\r\n')


def _print_exception(exc):
    vboard_state.print_exception(exc, sys.stdout)


def _execute(source, mode, scope):
    """Compile and run; SystemExit other than a hard reset is a soft reset, as on the chip."""
    try:
        exec(compile(vboard_state.unfolded(source), "<stdin>", mode), scope)
    except SystemExit as exc:
        code = exc.args[0] if exc.args else 0
        if code == HARD_RESET_STATUS:
            raise
        return SOFT_RESET_STATUS
    except BaseException as exc:  # noqa: BLE001 (KeyboardInterrupt included: a REPL reports it and carries on)
        _print_exception(exc)
    return 0


def _continues(text):
    """Whether a friendly-REPL line needs more lines (a compound statement, an open bracket or string)."""
    depth = 0
    quote = None
    for ch in text:
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
    last = text.rstrip().split("\n")[-1] if text.strip() else ""
    return depth > 0 or quote is not None or last.endswith(":") or last.endswith("\\")


def friendly(scope, fresh):
    """Returns "raw" (Ctrl-A), a soft reset status, or _EOF."""
    if fresh:
        banner()
    line = bytearray()
    lines = []
    write(">>> " if fresh else "\r\n>>> ")
    while True:
        c = getc()
        if c == _EOF:
            return _EOF
        if c == _CTRL_A and not line and not lines:
            write("\r\n")
            return "raw"
        if c == _CTRL_B and not line and not lines:
            write("\r\n")
            banner()
            write(">>> ")
        elif c == _CTRL_C:
            write("\r\n>>> ")
            line = bytearray()
            lines = []
        elif c == _CTRL_D and not line:
            if not lines:
                write("\r\n")
                return SOFT_RESET_STATUS
            status = _run_lines(lines, scope)
            if status:
                return status
            lines = []
            write(">>> ")
        elif c == _CTRL_E and not line and not lines:
            status = _paste(scope)
            if status:
                return status
            write(">>> ")
        elif c == 13 or c == 10:
            write("\r\n")
            text = line.decode()
            line = bytearray()
            if not lines and not text.strip():
                write(">>> ")
                continue
            lines.append(text)
            if (len(lines) > 1 and text.strip()) or _continues("\n".join(lines)):
                write("... ")
                continue
            status = _run_lines(lines, scope)
            if status:
                return status
            lines = []
            write(">>> ")
        elif c == 8 or c == 127:
            if line:
                line.pop()
                write("\b \b")
        elif c >= 32:
            line.append(c)
            _stdout.write(bytes((c,)))


def _run_lines(lines, scope):
    source = "\n".join(lines)
    return _execute(source, "single" if len(lines) == 1 else "exec", scope)


def _paste(scope):
    write("\r\npaste mode; Ctrl-C to cancel, Ctrl-D to finish\r\n=== ")
    text = bytearray()
    while True:
        c = getc()
        if c == _EOF:
            return _EOF
        if c == _CTRL_C:
            write("\r\n")
            return 0
        if c == _CTRL_D:
            write("\r\n")
            return _execute(text.decode(), "exec", scope)
        text.append(c)
        write("\r\n=== " if c == 13 else bytes((c,)))


def raw(scope, fresh):
    """Returns "friendly" (Ctrl-B), a soft reset status, or _EOF."""
    if fresh:
        write("raw REPL; CTRL-B to exit\r\n>")
    buf = bytearray()
    while True:
        c = getc()
        if c == _EOF:
            return _EOF
        if c == _CTRL_A:
            if buf == b"\x05A":
                status = _raw_paste(scope)
                if status:
                    return status
                buf = bytearray()
                write(">")
                continue
            buf = bytearray()
            write("raw REPL; CTRL-B to exit\r\n>")
        elif c == _CTRL_B:
            write("\r\n")
            return "friendly"
        elif c == _CTRL_C:
            buf = bytearray()
        elif c == _CTRL_D:
            write("OK")
            if not buf:
                write("\r\n")
                return RAW_SOFT_RESET_STATUS
            status = _raw_execute(bytes(buf), scope)
            if status:
                return status
            buf = bytearray()
            write(">")
        else:
            buf.append(c)


def _raw_execute(source, scope):
    """Output, Ctrl-D, the exception's traceback if any, Ctrl-D: what mpremote reads back."""
    try:
        exec(compile(vboard_state.unfolded(source), "<stdin>", "exec"), scope)
    except SystemExit as exc:
        code = exc.args[0] if exc.args else 0
        if code == HARD_RESET_STATUS:
            raise
        write("\x04\x04")
        return RAW_SOFT_RESET_STATUS
    except BaseException as exc:  # noqa: BLE001 (KeyboardInterrupt included: reported after the output)
        write("\x04")
        _print_exception(exc)
        write("\x04")
        return 0
    write("\x04\x04")
    return 0


def _raw_paste(scope):
    """Raw-paste mode: two windows free at the start, Ctrl-A each time another one is."""
    window = _PASTE_WINDOW
    write(b"R\x01" + bytes((window & 0xFF, window >> 8)) + b"\x01")
    source = bytearray()
    remain = window
    while True:
        c = getc()
        if c == _EOF:
            return _EOF
        if c == _CTRL_C or c == _CTRL_D:
            write("\x04")  # end of data, seen
            if c == _CTRL_C:
                write("\x04")
                _print_exception(KeyboardInterrupt())
                write("\x04")
                return 0
            break
        source.append(c)
        remain -= 1
        if not remain:
            write("\x01")
            remain = window
    return _raw_execute(bytes(source), scope)


def run(start_raw, status):
    """The REPL until a soft reset or the end of input; `status`: how the program before it ended, the exit
    status when the input ends."""
    scope = {"__name__": "__main__"}
    mode = "raw" if start_raw else "friendly"
    fresh = True
    while True:
        try:
            result = raw(scope, fresh) if mode == "raw" else friendly(scope, fresh)
        except KeyboardInterrupt:  # Ctrl-C between two reads: the input so far is dropped, as at the prompt
            fresh = False
            continue
        fresh = True
        if result == _EOF:
            return status
        if result in ("raw", "friendly"):
            mode = result
            continue
        write("MPY: soft reboot\r\n")
        return result
