# Boot of the virtual board, as the ESP32 port of MicroPython does it: find the "vfs" data partition, mount it
# as LittleFS v2 (formatting it on first use), then run boot.py and main.py of the application. Runs in the
# MicroPython Unix port with the shims' folder first on sys.path.

import gc
import json
import os
import sys

import esp32
import machine  # noqa: F401  (C on a real board: loaded here, before the firmware's heap is pinned)
import vboard_state
import vfs

ROOT = "/flash"


def mount_flash():
    part = esp32.Partition.find(esp32.Partition.TYPE_DATA, label="vfs")[0]
    try:
        vfs.mount(vfs.VfsLfs2(part), ROOT)
    except OSError:
        sys.stderr.write("vboard: formatting %s (LittleFS v2)\n" % ROOT)
        vfs.VfsLfs2.mkfs(part)
        vfs.mount(vfs.VfsLfs2(part), ROOT)


def install(source, name):
    """Copy a host file into the board's filesystem root, as a deploy would; unchanged files are not rewritten."""
    with open(source, "rb") as f:
        wanted = f.read()
    target = ROOT + "/" + name
    try:
        with open(target, "rb") as f:
            if f.read() == wanted:
                return  # unchanged: spare the flash a rewrite
    except OSError:
        pass
    with open(target, "wb") as f:
        f.write(wanted)


def install_files():
    """--config becomes /flash/config.json; each --put FILE[:NAME] becomes /flash/NAME."""
    source = vboard_state.env("VBOARD_CONFIG")
    if source is not None:
        install(source, "config.json")
    for source, name in json.loads(vboard_state.env("VBOARD_PUT", "[]")):
        install(source, name)


def run(path):
    with open(path) as f:
        source = f.read()
    exec(compile(source, path, "exec"), {"__name__": "__main__", "__file__": path})


def pin_heap():
    """Leave the firmware exactly the heap asked for (--heap): the shims are C code on a real board, so the
    runner starts MicroPython with room to spare, and the spare is taken here by a ballast block."""
    global ballast
    want = int(vboard_state.env("VBOARD_HEAP", "0"))
    gc.collect()
    spare = gc.mem_free() - want
    if spare > 256:
        ballast = bytearray(spare - 128)  # the block's own header and alignment take the rest
    elif spare < 0:
        sys.stderr.write("vboard: only %d bytes of heap for the firmware, %d asked\n" % (gc.mem_free(), want))
    gc.collect()


ballast = None


def load_frozen():
    """The modules firmware/manifest.py freezes into a real board's image run from flash there and take no heap:
    here they are imported before the heap is pinned, so their code sits in the emulation's share of the heap,
    not the firmware's. Modules the application folder does not have (test apps) are skipped."""
    for name in json.loads(vboard_state.env("VBOARD_FROZEN", "[]")):
        try:
            __import__(name)
        except ImportError:
            continue
        frozen.append(sys.modules[name])  # held here, as flash holds frozen code: never freed into the heap


frozen = []


def main():
    mount_flash()
    install_files()
    # The staged filesystem root of the application: dmqtt/*.mpy, app modules as .mpy, boot.py, main.py.
    app = vboard_state.env("VBOARD_APP")
    sys.path.append(app)
    load_frozen()
    pin_heap()
    for name in ("boot.py", "main.py"):
        path = app + "/" + name
        try:
            os.stat(path)
        except OSError:
            continue
        run(path)


main()
