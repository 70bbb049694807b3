# State of the virtual board shared by the shims: the emulated flash, configured from the environment that the
# host-side runner (host_bridge.vboard.runner) sets. Not part of the firmware.

import gc
import json
import os
import random
import sys  # (the port's: imported before vboot presents EspSys as `sys`)
import time

started_ms = time.ticks_ms()  # this boot's start (the process's): a deep sleep says how long the wake took
firmware_us = None  # (ticks_us) when vboot handed the board to its boot.py (the emulation's own start done)
# Microseconds this boot has spent in the emulation's stand-ins for the chip's hardware (the flash's operations,
# esp32.Partition; RTC memory, machine.RTC; ESP-NOW's sends and receives and the radio's tuning, espnow and vair):
# Python here, C and silicon on a board.
emulated_us = 0
slept_us = 0  # this boot's light sleeps (machine.lightsleep): on the board's ticks, in no host time
# Microseconds this boot's ESP-NOW waited on the air (vair.py: a sync send's acknowledgement, a frame awaited):
# part of emulated_us, told apart for figure 14, which charges a node's wait for its gateway's answer.
air_us = 0
firmware_emulated_us = 0  # emulated_us when boot.py began
script = None  # the script running: "boot.py" or "main.py"
# Every module this boot has imported, with VBOARD_IMPORTS set (trace_imports()): what a deep sleep reports as
# loaded, also the modules the firmware has dropped from sys.modules since (a config checker, a journal's opener).
imported = None

_flash = None
rom_image = None  # the "romfs" partition as mapped at boot (vboot), for vromfs


def env(name, default=None):
    value = os.getenv(name)
    return default if value is None or value == "" else value


def flash():
    global _flash
    if _flash is None:
        from nor_flash import NorFlash

        seed = int(env("VBOARD_SEED", "0"))
        random.seed(seed)
        layout = json.loads(env("VBOARD_LAYOUT"))
        _flash = NorFlash(
            env("VBOARD_FLASH"),
            env("VBOARD_STATS"),
            [tuple(p) for p in layout],
            cut_at_op=int(env("VBOARD_CUT_OP", "0")),
            rng=random,
            fail=_fault(env("VBOARD_FAIL")),
            timing=env("VBOARD_FLASH_TIMING") == "1",
        )
        _flash.journal_events = watches("journal")
    return _flash


# What the bench drives (VirtualBoard.drive()): a small JSON file, {"pins": {"4": 1}, "adc": {"34": 1200000},
# "temperature_c": 41.5}, read at each look (a pin's value, an ADC reading), its own time the emulation's.
_inputs_path = env("VBOARD_INPUTS")


def output(kind, key, value):
    """The board's outputs file (VBOARD_OUTPUTS, read by VirtualBoard.outputs()): {kind: {key: value}}, written
    whole for a host reading it. The emulation's time."""
    global emulated_us
    path = env("VBOARD_OUTPUTS")
    if not path:
        return
    begun = time.ticks_us()
    try:
        with open(path) as f:
            values = json.load(f)
    except (OSError, ValueError):
        values = {}
    values.setdefault(kind, {})[key] = value
    with open(path + ".tmp", "w") as f:
        json.dump(values, f)
    os.rename(path + ".tmp", path)
    emulated_us += time.ticks_diff(time.ticks_us(), begun)


def pin_out(pin, level):
    """An output pin's new level: in the outputs ("pins") and appended to their trace (VBOARD_OUTPUTS + ".trace":
    a line "microseconds pin level" each, on the board's clock, which goes on through resets and deep sleeps)."""
    global emulated_us
    path = env("VBOARD_OUTPUTS")
    if not path:
        return
    output("pins", str(pin), level)
    begun = time.ticks_us()
    with open(path + ".trace", "a") as f:
        f.write("%d %s %d\n" % (time.time_ns() // 1000, pin, level))
    emulated_us += time.ticks_diff(time.ticks_us(), begun)


def driven(kind, key=None):
    """The bench's value for `kind` ("pins", "adc": of pin `key`; "temperature_c"), or None when it drives none."""
    global emulated_us
    if _inputs_path is None:
        return None
    begun = time.ticks_us()
    try:
        with open(_inputs_path) as f:
            values = json.load(f)
    except (OSError, ValueError):
        values = {}  # none yet, or the host replacing it this instant
    found = values.get(kind)
    if key is not None:
        found = found.get(str(key)) if isinstance(found, dict) else None
    emulated_us += time.ticks_diff(time.ticks_us(), begun)
    return found


def part_fault(key, wired):
    """The fault the wired part `wired` (the bench's dict for it) shows in this transaction: its "fault" from its
    "fault_at" on ("read#N": its Nth transaction, a DHT's read, a 1-Wire reset, an I2C transfer, counted over the
    board's life from the first that saw the schedule; "wake#N": the board's Nth wake from deep sleep), at once
    without one; None without a fault. `key` names the part among the counts (VBOARD_OUTPUTS + ".reads")."""
    fault = wired.get("fault")
    at = wired.get("fault_at")
    if not fault or not at:
        return fault or None
    global emulated_us
    begun = time.ticks_us()
    event, _, n = at.partition("#")
    if event == "wake":
        come = rtc()["deep"] >= int(n or 1)
    else:
        path = env("VBOARD_OUTPUTS") + ".reads"
        try:
            with open(path) as f:
                counts = json.load(f)
        except (OSError, ValueError):
            counts = {}
        counts[key] = count = counts.get(key, 0) + 1
        with open(path + ".tmp", "w") as f:
            json.dump(counts, f)
        os.rename(path + ".tmp", path)
        come = count >= int(n or 1)
    emulated_us += time.ticks_diff(time.ticks_us(), begun)
    return fault if come else None


_wdt_written = [0, 0]  # host ns when the watchdog's deadline was last written, and the timeout it had


def wdt_fed(timeout_ms):
    """The task watchdog fed: its deadline, in host nanoseconds, for the host to enforce where the shims do not
    look (runner.VirtualBoard._watchdog). Written at most every 0.1 s for one timeout (a new timeout at once): a
    board that feeds in a tight loop pays one file write a tenth of a second, the emulation's time."""
    global emulated_us
    path = env("VBOARD_WDT")
    now = getattr(time, "_port", time).time_ns()  # (the host's clock: the time shim's counts the board's sleeps)
    if not path or (now - _wdt_written[0] < 100_000_000 and timeout_ms == _wdt_written[1]):
        return
    begun = time.ticks_us()
    _wdt_written[0], _wdt_written[1] = now, timeout_ms
    with open(path + ".tmp", "w") as f:
        f.write(str(now + timeout_ms * 1_000_000))
    os.rename(path + ".tmp", path)
    emulated_us += time.ticks_diff(time.ticks_us(), begun)


def _fault(spec):
    """VBOARD_FAIL="LABEL:N": flash operations on partition LABEL fail from the Nth on."""
    if not spec:
        return None
    label, _, n = spec.rpartition(":")
    return label, int(n)


# What survives a deep sleep: the RTC's clock and its slow memory (machine.RTC().memory()), and the emulation's
# sleep counters. Kept in a small JSON file beside the flash (VBOARD_RTC), written whole through a rename so
# that a power cut in the middle of a write leaves the last one; the slow memory's bytes as they are in a file
# beside it (VBOARD_RTC + ".mem"), written at each RTC().memory(data) (a copy into RTC RAM on a chip: here one
# file write, so that the emulation charges the firmware's heap no more than the chip's copy does). The runner
# removes the memory at every power-on (a power cut, a new board), as RTC slow memory loses it; the clock and the
# counters stay.
#   clock_ms   how far the board's clock is ahead of the host's: the time it slept, and RTC.datetime() settings
#   deep, deep_ms, light, light_ms   deep and light sleeps since the board was made, and the time slept in each
#   sleep_ms   the deep sleep this boot ended with (0: none, -1: without a timer), read by the runner
#   awake_ms, firmware_us, emulated_us, slept_us, script, loaded   that boot's time to the deep sleep (host
#              milliseconds from its process's start, microseconds from its boot.py's, and of those the emulated
#              hardware's own and its light sleeps'), the
#              script it slept from, and the modules it had loaded then (sys.modules: the firmware's and the
#              emulation's; with VBOARD_IMPORTS also those imported since boot.py began and dropped since), read by
#              the runner
_rtc = None


def rtc():
    global _rtc
    if _rtc is None:
        _rtc = {"clock_ms": 0, "deep": 0, "deep_ms": 0, "light": 0, "light_ms": 0, "sleep_ms": 0}
        path = env("VBOARD_RTC")
        if path is not None:
            try:
                with open(path) as f:
                    _rtc.update(json.loads(f.read()))
            except (OSError, ValueError):
                pass  # none yet (a new board), or a file the host is about to replace
        _rtc["sleep_ms"] = 0
    return _rtc


def rtc_memory(data=None):
    """RTC slow memory: a copy of its bytes (as a chip's RTC().memory() makes one), or (data) these written over
    them (a chip copies them into RTC RAM: nothing of them stays in the heap, nor here)."""
    path = env("VBOARD_RTC") + ".mem"
    if data is None:
        try:
            size = os.stat(path)[6]
            with open(path, "rb") as f:
                return f.read(size)  # (exactly its bytes: a read to the end grows its buffer past them)
        except OSError:
            return b""  # lost with the power, or never written
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.rename(path + ".tmp", path)  # whole or not at all, as the runner reads it
    return None


# What the emulation keeps of the heap, so that the firmware has exactly its own (vboot.pin_heap).
ballast = None
heap_size = 0  # the firmware's heap, in bytes, as pin_heap left it (gc.mem_alloc() counts within it)


# TLS's heap. On a chip mbedTLS allocates from ESP-IDF's heap, not MicroPython's: a TLS context and connection take
# none of the firmware's. The Unix port's mbedTLS allocates from its one GC heap, so vboot.pin_heap claims an arena
# of it below the firmware's run, and each call into TLS (vboot.tls_outside_heap wraps ssl.SSLContext's) frees the
# arena first: it is then the lowest free memory, where the allocator puts what mbedTLS asks for. After the call,
# and after anything that may have freed some of TLS's blocks (a socket's close, a collection), tls_refill() takes
# back what is free in the arena, so that the firmware never allocates there. What TLS does not find room for in
# the arena falls to the firmware's heap.
tls_arena = None  # the ballast that keeps the arena's free blocks between calls
tls_end = 0  # the address just past the arena's run (0: no arena)
tls_used = False  # a TLS call has run: closes and collections take back what TLS lets go of
_tls_depth = 0  # (ssl.wrap_socket() makes a context inside its own call)


def tls_call(fn, *args, **kwargs):
    """fn(*args, **kwargs) with the arena free for what mbedTLS allocates in it."""
    global tls_arena, tls_used, _tls_depth
    if not tls_end:
        return fn(*args, **kwargs)
    _tls_depth += 1
    if _tls_depth == 1:
        if not tls_used:
            tls_used = True
            esp_gc = sys.modules.get("gc")  # (vboot's EspGc, as the firmware imports it)
            if hasattr(esp_gc, "refilling_collect"):
                esp_gc.collect = esp_gc.refilling_collect
        tls_arena = None
        gc.collect()  # (a collection the chip does not make here: it frees only what is garbage anyway)
    try:
        return fn(*args, **kwargs)
    finally:
        _tls_depth -= 1
        if _tls_depth == 0:
            tls_refill()


def tls_refill():
    """Take the arena's free blocks back: one block at a time, lowest first as the allocator hands them out (the
    arena lies below the firmware's run), until one lands past the arena; that one is left as garbage, a block of
    the firmware's heap that its next collection frees. The time is the emulation's."""
    global tls_arena, emulated_us
    if not tls_used or _tls_depth:
        return
    began = time.ticks_us()
    chain = tls_arena
    while True:
        link = (chain,)
        if id(link) >= tls_end:
            break
        chain = link
    tls_arena = chain
    emulated_us += time.ticks_diff(time.ticks_us(), began)


def ending():
    """The boot ends here (a deep sleep): the emulation takes back the heap it kept, so that what it writes of the
    board's state needs none of the firmware's (a chip's deep sleep allocates nothing)."""
    global ballast, tls_arena, tls_end
    ballast = tls_arena = None
    tls_end = 0
    gc.collect()


def save_rtc():
    path = env("VBOARD_RTC")
    if path is None:
        return
    with open(path + ".tmp", "w") as f:
        f.write(json.dumps(rtc()))
    os.rename(path + ".tmp", path)


# Disturbances scheduled on the board's own events (docs/virtual-board.md, "Disturbances on the board's events"),
# so that a test's power cut or access point outage lands where it says whatever the host's load: the board itself
# acts at the event, where a host reading its console would act some time after it.
#   VBOARD_CUT_ON  "EVENT:N": the power is cut at the Nth EVENT of the board's life (counted in VBOARD_EVENTS, a file
#                  beside the flash, one line per event, so that the count goes on over its wakes and resets)
#   VBOARD_AP      its "events": the events the access point wants to hear of, to start an outage at one (its
#                  "control" port takes each, and answers once the outage has begun)
#   VBOARD_AIR     its "events": likewise for the ESP-NOW air (a link lost, a board held while another is cut)
# The events: accepted (the board printed an `accepted` line: right after it), journal (a program of the journal's
# partition completed), wake (a wake from deep sleep begins, before boot.py), join (the station starts a join:
# inside it), joined (the station has associated), connect (a station socket's connect begins: inside it), send
# (an ESP-NOW frame is about to go on the air).
# None of this runs unless asked for: a board without these settings does exactly what it did.
_cut = env("VBOARD_CUT_ON")
cut_event, _, _target = (_cut or "").partition(":")
cut_target = int(_target) if _target else 0
_ap_model = json.loads(env("VBOARD_AP", "{}"))
ap_events = _ap_model.get("events") or ()
_air_model = json.loads(env("VBOARD_AIR", "{}"))  # the ESP-NOW air (vair.py): the events it wants to hear of
air_events = _air_model.get("events") or ()
_seen = None  # cut_event's count so far over the board's life (read from VBOARD_EVENTS at its first event)


def watches(name):
    """Whether anything is scheduled on event `name`: only then do the shims look for it."""
    return name == cut_event or name in ap_events or name in air_events


def event(name):
    """The board has reached event `name`: tell the access point when it asked, then cut the power when this is
    the scheduled one."""
    global _seen
    if name in ap_events:
        _tell(_ap_model["control"], "%s %s" % (name, env("VBOARD_FLASH")))
    if name in air_events:
        _tell(_air_model["control"], "%s %s" % (name, env("VBOARD_UID", "24d7eb000001")))
    if name != cut_event or not cut_target:
        return
    path = env("VBOARD_EVENTS")
    if _seen is None:
        _seen = 0
        try:
            with open(path) as f:
                _seen = len(f.read().split())
        except OSError:
            pass  # no event counted yet
    _seen += 1
    with open(path, "a") as f:
        f.write(name + "\n")
    if _seen == cut_target:
        from nor_flash import power_cut

        power_cut("%s event %d (scheduled on the board's events)" % (name, _seen))


def _tell(control, report):
    """Report an event to a control port (b"VBEV", then "EVENT BOARD": the access point's names the board by its
    flash path, the ESP-NOW air's by its MAC address) and wait for its answer: an outage or a link's loss
    scheduled on it has begun before the board goes on."""
    import socket

    port = socket._port
    s = port.socket()
    try:
        s.connect(port.getaddrinfo("127.0.0.1", control)[0][-1])
        body = report.encode()
        s.write(b"VBEV" + bytes((len(body),)) + body)
        s.read(1)
    finally:
        s.close()


_print = print


def printing(*args, **kwargs):
    """print() while an `accepted` event is watched (vboot installs it as the builtin): the line goes out first, so
    that a cut right after it leaves the witness on the console, as a cut after publish() returned does."""
    _print(*args, **kwargs)
    if args and isinstance(args[0], str) and args[0].startswith("accepted "):
        event("accepted")


def chip_imports(frozen):
    """A module frozen into the image costs its first import what a chip's does: MicroPython looks for it in the
    filesystem's root first (a folder, a .py, a .mpy), as "" comes before ".frozen" on an ESP32's sys.path, and the
    emulation loaded it before the board started. `frozen`: their names (a frozen package's own modules are found
    in it, not searched). The searches are the firmware's time; this hook's own is the emulation's. (An extensible
    built-in's import, `import machine` or `import time`, searches the filesystem on a chip at every import; the
    shims that stand for those sit in sys.modules here, which spares it: docs/virtual-board.md says so.) Called
    before the heap is pinned: the hook allocates nothing in the firmware's (a chip's import builds its paths on
    the stack), so that it leaves the heap as a chip's import would."""
    global emulated_us
    import builtins
    import os

    load = __import__  # (the one in force, an earlier hook's: builtins.__import__ reads the port's own)
    first = {}
    for name in frozen:
        top = name.split(".")[0]
        first[top] = (top, top + ".py", top + ".mpy")

    def chip_import(name, globals=None, locals=None, fromlist=(), level=0):
        global emulated_us
        begun = time.ticks_us()
        searched = 0
        if level == 0 and first:
            dot = name.find(".")
            for top in first:
                if len(top) == (len(name) if dot < 0 else dot) and name.startswith(top):
                    started = time.ticks_us()
                    for path in first.pop(top):
                        try:
                            os.stat(path)
                        except OSError:
                            pass
                    searched = time.ticks_diff(time.ticks_us(), started)
                    break
        loading = time.ticks_us()
        try:
            return load(name, globals, locals, fromlist, level)
        finally:
            done = time.ticks_us()
            emulated_us += time.ticks_diff(loading, begun) - searched  # (the load itself: the firmware's)
            emulated_us += time.ticks_diff(time.ticks_us(), done)

    if first:
        builtins.__import__ = chip_import


# Room for this many distinct imports (a module's name and the names its `from` asks for) in a boot's record.
_TRACED = 256


def trace_imports():
    """Record every module an import brings in (imports()), from boot.py on: the record's own time counts as the
    emulation's, so that a wake's measured interpreter time is what it was without it. Called before the heap is
    pinned: the record is made there, and an import adds to it without allocating in the firmware's heap (a
    name and its `from` names are objects the import already has), so that it leaves the heap as a chip's."""
    global imported
    import builtins

    imported = [None] * (2 * _TRACED + 1)  # name, fromlist, name, fromlist, ...; the last slot: how many in use
    imported[-1] = 0
    load = __import__  # (the one in force, an earlier hook's: builtins.__import__ reads the port's own)

    def traced(name, globals=None, locals=None, fromlist=(), level=0):
        global emulated_us
        try:
            return load(name, globals, locals, fromlist, level)
        finally:
            done = time.ticks_us()
            if level == 0 and script is not None:  # (from boot.py on: the emulation's own imports are not)
                used = imported[-1]
                at = 0
                while at < used and (imported[at] != name or imported[at + 1] != fromlist):
                    at += 2
                if at == used:
                    if used == 2 * _TRACED:
                        raise RuntimeError("vboard: more than %d distinct imports to record" % _TRACED)
                    imported[at] = name
                    imported[at + 1] = fromlist
                    imported[-1] = used + 2
            emulated_us += time.ticks_diff(time.ticks_us(), done)

    builtins.__import__ = traced


def imports(modules):
    """With VBOARD_IMPORTS, every module this boot imported from boot.py on (a set), those it dropped from
    `modules` (sys.modules) since included; else an empty set. Called once the boot ends (the heap is the
    emulation's again)."""
    found = set()
    if imported is not None:
        for at in range(0, imported[-1], 2):
            name, fromlist = imported[at], imported[at + 1]
            found.add(name)
            for part in fromlist if isinstance(fromlist, tuple) else ():  # (`from x import *` passes True)
                if name + "." + part in modules:
                    found.add(name + "." + part)
    return found


# The errno numbers the board raises are an ESP32's on lwIP (newlib's): its `errno` is esp_errno, which vboot
# installs before the heap is pinned, and its sockets (socket.py) and parts (vparts.py) raise them.


def unfolded(source):
    """`source` as the board compiles it. MicroPython's compiler replaces `errno.NAME` (and `uerrno.NAME`) by the
    number its own errno module gives NAME, which is Linux's on the Unix port: here the name is read at run time
    instead, from esp_errno, as a chip's compiler would have put newlib's number there. (mpy-cross folds nothing,
    so compiled modules need none of this.)"""
    if isinstance(source, str):
        source = source.encode()
    if b"errno." not in source:
        return source
    import re

    return re.sub(b"(^|[^A-Za-z0-9_.])(u?errno)\\.([A-Z][A-Z0-9_]*)", _unfold, source)


def _unfold(match):
    return match.group(1) + b"getattr(" + match.group(2) + b', "' + match.group(3) + b'")'


def print_exception(exc, file):
    """sys.print_exception as a chip prints: an OSError's last line names newlib's number ("[Errno 116]
    ETIMEDOUT"), where the port's table would name Linux's (113 as EHOSTUNREACH) or none (116)."""
    number = exc.args[0] if isinstance(exc, OSError) and len(exc.args) == 1 else None
    if not isinstance(number, int):
        sys.print_exception(exc, file)
        return
    import io

    import esp_errno

    text = io.StringIO()
    sys.print_exception(exc, text)
    lines = text.getvalue().rstrip("\n").split("\n")
    name = esp_errno.errorcode.get(number)
    lines[-1] = "OSError: " + ("[Errno %d] %s" % (number, name) if name else str(number))
    file.write("\n".join(lines) + "\n")
