# What a boot runs once to make its board (board_app.Board) from its checked config (config_file.py), and no
# more: the boot counted, the client's modules loaded and its journal opened (from where the last wake left it, at a
# wake from deep sleep), the WiFi supervised, the client made. board_app.main() imports it, calls open_board() and
# drops it (errors.forget: docs/firmware-style.md, rule 6): on a deployed board its code is heap the run can use.

import gc
import sys
import time

import board_app

import dmqtt
from dboard import console
from dmqtt.errors import forget

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


_TLS_CONTEXT = const(2)  # board_app.heap's index (board_app._TLS_CONTEXT)
# RTC memory as dmqtt/wake.py lays it out (tests/unit/board/test_rtc_plan.py holds resume() to wake.point()): a
# byte (0xD0 | the client's flags), the hint's length (0x29: 41 bytes), the hint, whose first byte is its format
# (1); in it, the head sector (u16 at 1), the oldest live sector's sequence number (u32 at 21), and the head's
# 16-byte header at 25, whose bytes 8 to 11 are the head's sequence number.
_HINT_SECTOR = const(3 + 1)
_HINT_FIRST = const(3 + 21)
_HINT_HEAD_SEQ = const(3 + 25 + 8)
_HINT_END = const(3 + 41)


def load_modules(cfg, make, resume=None):
    """Import the client's modules one at a time, leaves first, with a collection after each: on a board whose
    code is loaded into the heap (.mpy files, as `host-bridge deploy` leaves them), each import's garbage (its
    module-level code, file buffers) is freed before the next one's code lands. Only what this config uses: the
    serial link or TCP (and TLS). Blocks of a few kilobytes are made before the code that follows, because each
    module's code leaves holes behind it and a heap that has taken all of it has no such block left
    (tests/hil/test_heap_budget.py boots every configuration 20 times): the TLS context first, the serial link's
    buffers (two blocks of 1,920 bytes) as soon as its modules are in. The journal is opened as soon as its module
    is in; the client is made over it last (`make(journal)`), its smaller pieces filling the holes the code left
    (made earlier, they cost an ESP-NOW node's wake the block its last import wants).
    `resume`: where the last wake left the ring journal (resume()). Returns the client and, with TLS, its
    context (the heap that holds goes to board_app.heap)."""
    names = ["dmqtt.journal_record", "dmqtt.session", "dmqtt.journal", "dmqtt.client"]
    if cfg["transport"] == "serial":
        names = ["dlink.frame", "dlink.control", "dlink.link", "dlink.transport"] + names
    elif cfg["transport"] == "espnow":
        names.append("dlink.now_transport")  # (and dlink.now, dlink.now_node: a node's link, docs/nodes.md)
    else:
        names.append("dmqtt.transport")  # with TLS, dmqtt.tls is loaded only to build the context (tls_context)
        if cfg["tls"]:
            names.append("tls_open")
        if cfg["wifi"]:
            names.append("dmqtt.wifi")
    if cfg["confirm"]:
        names.append("dmqtt.confirm")
    names.append("duty" if cfg["sleep"] else "continuous")  # the run: a wake's, or one of readings all along
    store = tls_ctx = None
    if cfg["tls"]:
        # With TLS, the context first, before any module's code: its certificates parsed, mbedTLS wants blocks of a
        # few KB, which only a whole heap is sure to have (a client certificate and its key need the most).
        free = board_app.collected()
        tls_ctx = tls_context(cfg)
        board_app.heap[_TLS_CONTEXT] = free - board_app.collected()
    for name in names:
        __import__(name)
        gc.collect()
        if name == "dmqtt.journal":
            # The journal's backend and its buffers, while the heap is in larger pieces (on a deployed board the
            # backend's code loads into the heap here); the client is made over it once every module is in.
            store = sys.modules[name].open_journal(resume=resume)
            forget(name)  # its open_journal() has done its work
            gc.collect()
        elif name == "dlink.transport":
            uart = cfg["uart"]
            sys.modules[name].LinkTransport.prepare(uart["id"], uart["baud"], **uart["pins"])
            gc.collect()
    return make(store), tls_ctx


def make_client(cfg, boot, store):
    """The client of this boot over its open journal (`boot`: the confirmation's epoch)."""
    from dmqtt.client import MQTTClient

    client_class = MQTTClient
    options = dict(cfg["confirm"] or {})  # {confirm_topic, timeout_s, hold}: ConfirmingClient's own options
    if options:
        from dmqtt.confirm import ConfirmingClient as client_class  # type: ignore[assignment]

        options["epoch"] = boot  # the telemetry's boot and seq are the confirmation's epoch and number
    sleep = cfg["sleep"]
    if sleep and (sleep["readings_per_send"] > 1 or cfg["espnow"]):
        options["max_messages"] = sleep["queue_limit"]  # the journal's slots hold the readings of sampling wakes
    return client_class(  # (a ConfirmingClient's session is a ConfirmingSession: open_board sets on_late)
        cfg["client_id"],
        store,
        version=cfg["version"],
        keepalive=cfg["keepalive"],
        clean=False,
        session_expiry=cfg["session_expiry"],
        window=cfg["window"],
        username=cfg["username"],
        password=cfg["password"],
        will=cfg["will"],
        group_commit=cfg["group_commit"],
        **options,
    )


def tls_context(cfg):
    """The TLS context, built once per boot (the certificates are parsed here); then dmqtt.tls is unloaded: the
    context is all the connections need, and the module's code is heap on a deployed board."""
    from dmqtt import tls

    try:
        return tls.context(cfg["tls"], cfg["root"])  # TLSConfigError for a certificate or key it cannot use
    finally:
        forget("dmqtt.tls")


def next_boot(root):
    """The boot counter, kept in flash (one small LittleFS write per boot)."""
    path = root + "/boot.txt"
    try:
        with open(path) as f:
            boot = int(f.read()) + 1
    except (OSError, ValueError):
        boot = 1
    with open(path, "w") as f:
        f.write(str(boot))
    return boot


def resume():
    """At a wake from deep sleep, where the last wake left the ring journal, or None: (the head sector, its
    sequence number, the oldest live sector's), for its open to replay from the oldest sector holding a live
    record, not the whole ring (dmqtt.journal.replay_from). Read from the library's hint in RTC memory
    (dmqtt/wake.py's layout, what wake.point() reads), here and first, while the heap is whole, without loading
    dmqtt.wake: what a module interns, a board keeps for good, and a sending wake loads it at its end, past its
    heap low."""
    import machine

    if machine.reset_cause() != machine.DEEPSLEEP_RESET:
        return None
    memory = machine.RTC().memory()
    if len(memory) < _HINT_END or memory[0] & 0xF0 != 0xD0 or memory[1:4] != b"\x00\x29\x01":
        return None  # no hint, or one of another layout: the whole ring is replayed
    return (
        (memory[_HINT_SECTOR] << 8) | memory[_HINT_SECTOR + 1],
        int.from_bytes(memory[_HINT_HEAD_SEQ : _HINT_HEAD_SEQ + 4], "big"),
        int.from_bytes(memory[_HINT_FIRST : _HINT_FIRST + 4], "big"),
    )


def open_board(cfg):
    """The board of this boot, its journal open (what a power cut interrupted resumed), its WiFi supervised and
    its client made."""
    if "gateway" in cfg:
        __import__("gateway").run(cfg)  # a gateway board (docs/nodes.md): its run, for good (JournalError ends it)
    # First what allocates and lets go (RTC memory, the boot counter's file), while the heap is whole.
    point = resume() if cfg["sleep"] else None
    boot = next_boot(cfg["root"])
    client, tls_ctx = load_modules(cfg, lambda store: make_client(cfg, boot, store), point)
    wifi = None
    if cfg["wifi"] and cfg["transport"] == "tcp":
        # dmqtt.wifi supervises the link from here on (its check() makes the first attempt); supervise.py says it.
        import supervise

        from dmqtt import wifi as station

        w = cfg["wifi"]
        station.start(w["ssid"], w["password"], w["ip"], w["bssid"])
        station.on_up = station.on_down = supervise.say
        supervise.began = time.ticks_ms()
        wifi = station
    board = board_app.Board()
    board.cfg = cfg
    board.boot = boot
    board.client = client
    if wifi is not None:
        board.wifi = wifi
    if tls_ctx is not None:
        board.tls_ctx = tls_ctx
    from dmqtt.client import Backoff  # (loaded by now: after the TLS context, which wants the heap in one piece)

    board.backoff = Backoff()
    client.on_message = board.on_message
    client.on_published = board_app.on_published
    client.on_disconnect = board_app.on_disconnect
    if cfg["confirm"]:
        client.session.on_late = board.on_late  # a ConfirmingSession (config.py subscribes to its topic)
    if cfg["transport"] == "serial" and cfg["uart"]["pause"]:
        # A sector erase stalls the chip's UART: the bridge pauses meanwhile (docs/link-protocol.md).
        from dlink.transport import LinkTransport

        client.session.journal.hush = LinkTransport.hush
    for note in client.open():
        print(note)
    print(console.BOOT % (boot, client.outstanding(), dmqtt.__version__))
    return board
