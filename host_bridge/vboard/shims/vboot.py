# Boot of the virtual board, as the ESP32 port of MicroPython does it: find the "vfs" data partition, mount it
# as LittleFS v2 (formatting it on first use), mount a ROMFS partition when the image has one, then run boot.py
# and main.py from the filesystem and, when main.py ends or Ctrl-C stops it, the REPL on the console (a board
# given no console port ends there instead). Runs in the MicroPython Unix port with the shims' folder first on
# sys.path.
#
# Where the firmware's modules come from is the install path being emulated (VBOARD_INSTALL):
#   deployed  .mpy files on LittleFS, as `host-bridge deploy` (mpremote) leaves them: imported into the heap;
#   romfs     .mpy files in a ROMFS image in the "romfs" partition: executed in place, as from memory-mapped
#             flash (the image is read into the emulation's share of RAM, not the firmware's heap);
#   frozen    bytecode frozen into the MicroPython image: loaded before the firmware's heap is pinned.
# main.py and boot.py are files on LittleFS in every path, as on a chip.

import gc
import json
import os
import socket
import sys
import time

import esp32
import espnow  # noqa: F401  (ESP-NOW is C on a chip: its state and the radio's buffers made before the pin)
import machine
import network  # noqa: F401  (likewise, with the socket module a station's sockets go through)
import vboard_state
import vfs
import vrepl
import vromfs

ROOT = "/flash"
ROM = "/rom"
_WORD = 8 if sys.maxsize > 0xFFFFFFFF else 4  # bytes per object word: 8 on the PyPI port, 4 on a 32-bit build
# What the runner last installed on LittleFS: the staged tree's name and install path, then one file per line,
# so that the next install removes what it no longer ships (a deploy done with mpremote leaves no such file).
INSTALLED = ROOT + "/.vboard-installed"


def mount_flash():
    part = esp32.Partition.find(esp32.Partition.TYPE_DATA, label="vfs")[0]
    try:
        vfs.mount(vfs.VfsLfs2(part), ROOT)
    except OSError:
        sys.stderr.write("vboard: formatting %s (LittleFS v2)\n" % ROOT)
        vfs.VfsLfs2.mkfs(part)
        vfs.mount(vfs.VfsLfs2(part), ROOT)


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def install(data, target):
    """Write a file into the board's filesystem, as a deploy would; an unchanged file is not rewritten."""
    try:
        if read_file(target) == data:
            return  # unchanged: spare the flash a rewrite
    except OSError:
        pass
    make_dirs(target)
    with open(target, "wb") as f:
        f.write(data)


def make_dirs(target):
    path = ""
    for part in target.split("/")[1:-1]:
        path += "/" + part
        try:
            os.mkdir(path)
        except OSError:
            pass


def install_files():
    """--config becomes /flash/config.json; each --put FILE[:NAME] becomes /flash/NAME."""
    source = vboard_state.env("VBOARD_CONFIG")
    if source is not None:
        install(read_file(source), ROOT + "/config.json")
    for source, name in json.loads(vboard_state.env("VBOARD_PUT", "[]")):
        install(read_file(source), ROOT + "/" + name)


def walk(root, rel=""):
    for entry in os.ilistdir(root + "/" + rel if rel else root):
        name = entry[0]
        path = rel + "/" + name if rel else name
        if entry[1] == 0x4000:
            yield from walk(root, path)
        else:
            yield path


def module_name(rel):
    """The name a staged module is imported by: dmqtt/session.mpy and lib/dmqtt/session.mpy (the library where mip
    puts it, on sys.path) are dmqtt.session; a package's __init__.mpy is the package."""
    name = rel[:-4].replace("/", ".")
    if name.startswith("lib."):
        name = name[4:]
    return name[:-9] if name.endswith(".__init__") else name


def install_firmware(staged, mode, frozen):
    """The runner's deploy: the staged firmware's files that live on LittleFS in this install path (every
    file when deployed; what is not in the ROMFS image or frozen otherwise) written to /flash."""
    tag = staged.rsplit("/", 1)[-1] + " " + mode
    try:
        previous = read_file(INSTALLED).decode().split("\n")
    except OSError:
        previous = [""]
    if previous[0] == tag:
        return
    wanted = []
    for rel in walk(staged):
        if mode == "romfs" and rel.endswith(".mpy"):
            continue
        if mode == "frozen" and rel.endswith(".mpy") and module_name(rel) in frozen:
            continue
        wanted.append(rel)
        install(read_file(staged + "/" + rel), ROOT + "/" + rel)
    for rel in previous[1:]:
        if rel and rel not in wanted:
            try:
                os.remove(ROOT + "/" + rel)
            except OSError:
                pass
    install("\n".join([tag] + wanted).encode(), INSTALLED)


def mount_romfs():
    """An image with ROMFS support mounts the "romfs" partition at /rom and puts /rom and /rom/lib last on
    sys.path (MicroPython's vfs.c), so a module on LittleFS shadows the same one in ROMFS. The partition's bytes
    are memory-mapped flash on a chip; here they are read into the emulation's share of RAM, before the
    firmware's heap is pinned, and .mpy files in them execute in place all the same."""
    found = esp32.Partition.find(esp32.Partition.TYPE_DATA, label="romfs")
    if not found:
        return False
    part = found[0]
    image = vboard_state.rom_image = bytearray(part.info()[3])
    part.readblocks(0, image)
    try:
        vfs.mount(vfs.VfsRom(image), ROM)
    except OSError:
        return True  # no valid image (yet): `mpremote romfs deploy` can write one
    sys.path.append(ROM)
    sys.path.append(ROM + "/lib")
    return True


def load_frozen(staged, names):
    """The modules firmware/manifest.py freezes into a real board's image run from flash there and take no heap:
    here they are imported before the heap is pinned, so their code sits in the emulation's share of the heap,
    not the firmware's. Modules the staged tree does not have (test apps) are skipped. The staged tree then
    stands where the port's ".frozen" is on sys.path, for a frozen module the firmware unloads and imports
    again (dmqtt.codec_text): that one takes heap here, a little more than on a chip."""
    library = staged + "/lib"  # (the library of an application of its own is there)
    sys.path[0:0] = [staged, library]
    for name in names:
        try:
            __import__(name)
        except ImportError:
            continue
        frozen.append(sys.modules[name])  # held here, as flash holds frozen code: never freed into the heap
    del sys.path[0:2]
    sys.path.insert(1, staged)
    if any(name.startswith("dmqtt.") for name in names):
        # Last: a folder whose name ends in /lib before the board's own /lib is where mip would install.
        sys.path.append(library)


frozen = []


def alias_u_names():
    """MicroPython still imports a built-in module by its old u-prefixed name (`import usocket as socket`, as
    umqtt.simple does): on the Unix port that is the port's own module, which would bypass the shims (a socket off
    the WiFi, the host's clock). The names are the shims' here, as on a chip they are the chip's modules."""
    for name, module in (("usocket", socket), ("utime", time), ("umachine", machine), ("uos", os)):
        sys.modules[name] = module


class EspSys:
    """`sys` as the firmware sees it: the port's, but for `platform`, "esp32" as on a chip (libraries branch on
    it). Reads of anything else are the port's own (sys.implementation still names the Unix port's build, which
    is how the board application tells the virtual board: it ends a run with an exit status)."""

    platform = "esp32"

    def print_exception(self, exc, file=None):
        vboard_state.print_exception(exc, _PORT_SYS.stdout if file is None else file)

    def __getattr__(self, name):
        return getattr(_PORT_SYS, name)


_PORT_SYS = sys


class EspGc:
    """`gc` as the firmware sees it: the port's, but for `mem_alloc()`, which counts the firmware's heap alone (the
    port's counts the emulation's share and its ballast too), so that it adds up with `mem_free()` to the heap the
    board has, as on a chip. The port's own functions are its attributes: a call costs what it costs there."""

    def __init__(self):
        for name in ("collect", "mem_free", "enable", "disable", "isenabled", "threshold"):
            setattr(self, name, getattr(gc, name))

    def mem_alloc(self):
        return max(0, vboard_state.heap_size - gc.mem_free())

    def refilling_collect(self):
        """collect() once TLS has run (tls_outside_heap): what the collection freed of TLS's arena (a closed
        connection's objects) is taken back before the firmware allocates again."""
        gc.collect()
        vboard_state.tls_refill()

    def __getattr__(self, name):
        return getattr(gc, name)


def present_as_esp32():
    """From here on `import sys` (and usys) is EspSys, `import gc` EspGc and `import errno` (and uerrno) esp_errno:
    made before the heap is pinned, as the chip's modules are C."""
    import esp_errno

    sys.modules["sys"] = sys.modules["usys"] = EspSys()
    sys.modules["gc"] = sys.modules["ugc"] = EspGc()
    sys.modules["errno"] = sys.modules["uerrno"] = esp_errno


def load_stock(folder):
    """The stock image's frozen modules this project fetches (umqtt.simple, umqtt.robust: host_bridge.vboard.stock),
    imported before the heap is pinned by load_frozen(), as the firmware's are. `folder` then stands where the port's
    ".frozen" is on an ESP32's sys.path: after the current folder and before /lib, so that, as on a chip, a copy
    of the same module in /lib does not shadow the frozen one."""
    load_frozen(folder, [rel[:-4].replace("/", ".") for rel in walk(folder) if rel.endswith(".mpy")])


def tls_outside_heap():
    """TLS's heap kept apart from the firmware's (vboard_state.tls_call): every method of ssl.SSLContext that
    makes mbedTLS allocate (the context itself, its certificates, a connection and its handshake) runs with the
    arena free. ssl is frozen Python over the C module tls, on a chip as on the Unix port: it is imported here,
    before the heap is pinned, as frozen firmware is (load_frozen). Code that uses tls.SSLContext directly is
    not covered: its allocations fall to the firmware's heap."""
    import ssl

    def in_arena(method):
        def call(*args, **kwargs):
            return vboard_state.tls_call(method, *args, **kwargs)

        return call

    context = ssl.SSLContext
    for name in ("__init__", "load_cert_chain", "load_verify_locations", "wrap_socket"):
        setattr(context, name, in_arena(getattr(context, name)))


def _claim(nbytes):
    """A tuple of `nbytes` (a word's multiple): one block run, a 2-word header and a word per item."""
    return (None,) * (nbytes // _WORD - 2)


def _claimed(nbytes):
    """The bytes _claim(nbytes) holds: whole blocks of 4 words."""
    return -(-(nbytes // _WORD) // 4) * 4 * _WORD


def pin_heap(charge=0, tls_arena=0):
    """Leave the firmware exactly the heap asked for (--heap), in one piece, as a chip's heap is at boot: the
    shims are C code on a real board, so the runner starts MicroPython with room to spare, and the emulation's
    own objects lie scattered over it. A block of the firmware's size is claimed where the allocator puts it (the
    first run of free memory that long); every free byte around it is then taken by ballast (the holes below it
    one block at a time, lowest first, as the allocator hands them out; the rest in halving chunks); releasing
    the claim leaves the firmware that one run. `charge`: bytes of it the firmware gives up besides (what a chip
    spends that the emulation does not). `tls_arena`: bytes claimed first, below the firmware's run, for TLS's
    own heap (vboard_state.tls_call)."""
    want = int(vboard_state.env("VBOARD_HEAP", "0")) - charge
    vboard_state.heap_size = want
    gc.collect()
    arena = None
    try:
        claim = _claim(want + tls_arena)
    except MemoryError:
        # The runner gives the emulation too little room (runner.SHIM_HEAP): a board must never run with a heap
        # other than the one asked for.
        sys.stderr.write("vboard: no %d bytes of heap in one piece for the firmware\n" % (want + tls_arena))
        sys.exit(4)
    if tls_arena:
        # The run found split in two: the arena from its start (or from a run of its size lower down), then the
        # firmware's from what is left, above it.
        claim = None
        gc.collect()
        arena = _claim(tls_arena)
        claim = _claim(want)
    start = id(claim)
    if arena is not None:
        if id(arena) > start:
            sys.stderr.write("vboard: the TLS arena does not lie below the firmware's heap\n")
            sys.exit(4)
        vboard_state.tls_arena = arena
        vboard_state.tls_end = id(arena) + _claimed(tls_arena)
        arena = None
    chain = None
    while True:
        chain = (chain,)
        if id(chain) > start:  # the holes below the claim are filled
            break
    # The rest in halving chunks, chained (a list that grows would itself need a free block of its size). A size
    # that failed is not tried again: a failed allocation collects first, so what is left is in runs shorter than
    # it. That makes it a collection per halving, not one per halving per hole (a 32-bit build's emulation leaves
    # thousands of holes).
    size = gc.mem_free()
    while size >= 4 * _WORD:
        try:
            chain = (_claim(size), chain)
            size = min(size, gc.mem_free())
        except MemoryError:
            size //= 2
    # Then every block still free outside the claim, one at a time: what the halving leaves (a chunk that found
    # room where its link did not), and what a collection frees later that was garbage all along but seen as live
    # (MicroPython's collector is conservative: a stale word on the C stack keeps an object). Left free, those
    # holes would be the firmware's besides its run, and how many there are depends on what the emulation made
    # before the pin (its folder names' lengths among it): the firmware's heap would be laid out differently from
    # one checkout to the next. Until releasing the claim frees exactly the claim (a few rounds at most).
    for _ in range(8):
        try:
            while True:
                chain = (chain,)
        except MemoryError:
            pass
        claim = None
        gc.collect()
        if gc.mem_free() <= _claimed(want):
            break
        claim = _claim(want)  # the run again, whole: the only one that long
    vboard_state.ballast = chain


class _Names:
    pass


def reserve_qstr_pool(first):
    """Give the firmware's interned names (qstrs) the pool a chip gives them: `first` entries, at the cost of one
    such pool in its heap.

    MicroPython grows its pool of interned names by doubling: a new pool is twice the last one. On an ESP32 the
    last pool at boot is the image's frozen one, so the first name the firmware interns allocates one pool of
    twice that (about 800 entries for ESP32_GENERIC, see runner.FIRST_QSTR_POOL) while the heap is still in one
    piece, and all of the firmware's names fit in it. The Unix port's own pools are small: left alone, the
    firmware's names would grow them step by step in the middle of its imports, wanting several KB in one block
    when the heap may no longer have it. So throwaway names are interned here, in the emulation's share, until
    a pool of at least `first` entries has been allocated, and into it until `first` of its slots are left: the
    firmware's names take those, and a name beyond them starts a pool in the firmware's heap, as on a chip.
    Returns the bytes a chip's pool of `first` entries costs, which the firmware's heap gives up instead."""
    if not first:
        return 0
    entry = _WORD + 3  # a pool's entry: the name's pointer, its 2-byte hash and 1-byte length (py/qstr.h)
    header = 6 * _WORD
    # Which name starts that pool, and its size, are the same at every boot of a board with the same emulation (it
    # interns the same names before it): the last boot's answer (VBOARD_QSTR_CACHE) is checked at that name alone,
    # which saves a boot the 50 ms of watching every name (gc.mem_free() after each). An answer is kept with the
    # emulation's key (VBOARD_QSTR_KEY: its shims, its MicroPython, the install path); another key's is not used. A
    # wrong answer for this key falls back to watching from that name on, which can only find a later pool.
    cache = vboard_state.env("VBOARD_QSTR_CACHE")
    key = vboard_state.env("VBOARD_QSTR_KEY", "")
    try:
        with open(cache) as f:
            kept_key, known, known_size = f.read().split()
        known, known_size = int(known), int(known_size)
        if kept_key != key:
            raise ValueError(kept_key)
    except (OSError, TypeError, ValueError):
        known = known_size = -1
    names = _Names()
    gc.collect()
    gc.disable()  # a collection inside the loop would hide the allocation it watches for
    try:
        i = 0
        size = 0
        while True:
            watch = known < 0 or i >= known - 1
            if watch:
                before = gc.mem_free()
            getattr(names, "vboard_qstr_%d" % i, None)
            i += 1
            if not watch:
                continue
            grown = before - gc.mem_free()
            if grown > 1024:  # that name started a pool (a name's own bytes come in chunks of about 128)
                # Pools hold 10 x 2^k names (MICROPY_ALLOC_QSTR_ENTRIES_INIT on the Unix port): the largest that
                # fits what grew, which may include a new chunk of the name's own bytes.
                size = 10
                while header + 2 * size * entry <= grown:
                    size *= 2
                if size >= first:
                    break
        for j in range(size - first - 1):
            getattr(names, "vboard_qstr_%d" % (i + j), None)
    finally:
        gc.enable()
    if cache is not None and (i, size) != (known, known_size):
        with open(cache, "w") as f:
            f.write("%s %d %d" % (key, i, size))
    return header + first * entry


def run_file(name):
    """Run boot.py or main.py from the filesystem if it is there, as the port's pyexec_file_if_exists."""
    vboard_state.script = name
    try:
        source = read_file(name)
    except OSError:
        return
    exec(compile(vboard_state.unfolded(source), name, "exec"), {"__name__": "__main__", "__file__": name})


def main():
    mount_flash()
    mode = vboard_state.env("VBOARD_INSTALL", "deployed")
    staged = vboard_state.env("VBOARD_APP")
    frozen_names = json.loads(vboard_state.env("VBOARD_FROZEN", "[]")) if mode == "frozen" else []
    if staged is not None:
        vboard_state.flash().host_write(True)
        install_firmware(staged, mode, frozen_names)
        vboard_state.flash().host_write(False)
    install_files()  # (after the application's files: a file put in place of one of them is the one the board gets)
    # The ESP32 port's sys.path, with LittleFS at /flash instead of /: the current folder, then /lib; the shims
    # (C modules on a chip) last, and only for what was not loaded before the firmware's heap is pinned.
    shims = sys.path[:]
    sys.path[:] = ["", ROOT + "/lib"]
    has_romfs = mount_romfs()
    sys.path.extend(shims)
    if has_romfs:
        vromfs.enable()
    os.chdir(ROOT)
    alias_u_names()
    if frozen_names and staged is not None:
        load_frozen(staged, frozen_names)
    stock = vboard_state.env("VBOARD_STOCK")
    if stock is not None:
        load_stock(stock)
    vboard_state.chip_imports([module.__name__ for module in frozen])
    if vboard_state.env("VBOARD_IMPORTS"):
        vboard_state.trace_imports()
    # The RTC's state (its clock, its slow memory) read now, into the emulation's part of the heap: a chip keeps
    # it outside the heap, and a plan in RTC memory read first at a wake would otherwise charge the firmware's.
    vboard_state.rtc()
    present_as_esp32()
    # What the emulation reads of its settings, read before the heap is pinned: a path kept in a variable of this
    # function for the whole run would otherwise lie in the firmware's heap, as long as the host's folder names.
    raw_repl = vboard_state.env("VBOARD_BOOT_MODE") == "raw"
    ready = vboard_state.env("VBOARD_READY")
    tls_arena = int(vboard_state.env("VBOARD_TLS_ARENA", "0"))
    if tls_arena:
        tls_outside_heap()
    pin_heap(reserve_qstr_pool(int(vboard_state.env("VBOARD_QSTR_POOL", "0"))), tls_arena)
    status = 0
    if ready is not None:
        # From here on Ctrl-C interrupts, as a chip's does once MicroPython runs boot.py (during its own start the
        # interrupt character is off): the console delivers it only once this file exists.
        open(ready, "w").close()
    if vboard_state.watches("accepted"):
        import builtins

        builtins.print = vboard_state.printing
    if vboard_state.watches("wake") and machine.reset_cause() == machine.DEEPSLEEP_RESET:
        vboard_state.event("wake")
    try:
        vboard_state.firmware_us = time.ticks_us()  # the emulation's own start ends here: boot.py is the board's
        vboard_state.firmware_emulated_us = vboard_state.emulated_us
        run_file("boot.py")
        if not raw_repl:
            run_file("main.py")
    except KeyboardInterrupt as exc:
        vboard_state.print_exception(exc, sys.stdout)
    except SystemExit:
        raise  # the application ended the board (the Unix port's way to report its verdict)
    except BaseException as exc:  # noqa: BLE001 (a real board prints the traceback and goes to the REPL)
        vboard_state.print_exception(exc, sys.stdout)
        status = 1
    if vboard_state.env("VBOARD_CONSOLE") is None:
        sys.exit(status)  # no console port: the REPL would have no one to talk to, and the boot ends here
    sys.exit(vrepl.run(raw_repl, status))


main()
