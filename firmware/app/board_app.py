# Sensor-board application (started by main.py; compiled to .mpy like the rest). Reads config.json, counts boots
# in flash, opens the MQTT journal, supervises WiFi (a board on tcp with "wifi": supervise.py), connects, and
# hands the board to its run: continuous.py publishes `count` telemetry messages and resumes a run that a reset
# or a power cut interrupted; duty.py takes one reading a wake and deep-sleeps between wakes ("sleep"). When the
# run's every QoS 1/2 message is acknowledged it prints one JSON summary line; on the Unix port it then exits 0,
# a real board idles.
#
# Each message: dboard/console.py's payload().

import gc
import json
import sys
import time

import dmqtt
from dboard import console
from dmqtt.errors import DmqttError, JournalError, MQTTError, forget

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


if False:  # type checkers only: MicroPython has no typing module
    from typing import Any

    from dmqtt.client import Backoff

# The virtual board (the MicroPython Unix port) ends a run with an exit status, its verdict; a chip idles. Told by
# the interpreter's build, not sys.platform: the virtual board says "esp32" there, as libraries expect of a chip.
_UNIX = getattr(sys.implementation, "_machine", "").startswith("linux")
_MQTT5 = 5  # dmqtt.codec.V5


# How close the board comes to a MemoryError: the lowest free heap after a collection, measured at each connect,
# every few accepted messages and at the end of the run, and the largest free block at that low point (a
# fragmented heap fails an allocation that its total would allow). A collection costs about half a millisecond at
# 110 KB on the Unix port; the block search, a few more, only at a new low. Module state, not an object
# (docs/firmware-style.md, rule 1).
# One list of four, [low, block, TLS context, TLS session], not four globals (rules 3 and 7). What TLS holds: the
# context (certificates mbedTLS parsed) and an open connection.
# On an ESP32 mbedTLS allocates from ESP-IDF's heap, not MicroPython's; on the Unix port it takes MicroPython's,
# so the summary says how much, for the figure a chip would show.
heap = [0x7FFFFFFF, 0, 0, 0]
_LOW = const(0)
_BLOCK = const(1)
_TLS = const(2)
_TLS_SESSION = const(3)  # (tls_open.py sets it)


def load_modules(cfg):
    """Import the client's modules one at a time, leaves first, with a collection after each: on a board whose
    code is loaded into the heap (.mpy files, as `host-bridge deploy` leaves them), each import's garbage (its
    module-level code, file buffers) is freed before the next one's code lands, so the free heap stays in large
    blocks for the buffers that follow. Only what this config uses: the serial link or TCP (and TLS). The journal
    is opened as soon as its module is in (returned: open_board hands it to the client); the serial link makes its
    buffers last, once every module's code is in: code loading into a heap the link's 14 KB of buffers had cut
    up left a serial board with confirmation without a block for MicroPython's next pool of interned names
    (2.5 KB on the 64-bit virtual board) with 10 KB less heap than it has (tests/integration/test_boot_heap.py)."""
    names = ["dmqtt.journal_record", "dmqtt.session", "dmqtt.journal", "dmqtt.client"]
    if cfg["transport"] == "serial":
        names = ["dlink.frame", "dlink.control", "dlink.link", "dlink.transport"] + names
    else:
        names.append("dmqtt.transport")  # with TLS, dmqtt.tls is loaded only to build the context (tls_context)
        if cfg["tls"]:
            names.append("tls_open")
        if cfg["wifi"]:
            names.append("dmqtt.wifi")
    if cfg["confirm"]:
        names.append("dmqtt.confirm")
    names.append("duty" if cfg["sleep"] else "continuous")  # the run: a wake's, or one of readings all along
    store = None
    for name in names:
        __import__(name)
        gc.collect()
        if name == "dmqtt.journal":
            # With TLS, the context first (its certificates parsed: mbedTLS wants blocks of a few KB). Then the
            # journal's backend and its buffers, while the heap is in larger pieces (on a deployed board the
            # backend's code loads into the heap here); open_board() hands it to the client.
            if cfg["tls"]:
                global tls_ctx
                free = collected()
                tls_ctx = tls_context(cfg)
                heap[_TLS] = free - collected()
            store = sys.modules[name].open_journal()
            forget(name)  # its open_journal() has done its work
            gc.collect()
    if cfg["transport"] == "serial":
        uart = cfg["uart"]
        sys.modules["dlink.transport"].LinkTransport.prepare(uart["id"], uart["baud"], **uart["pins"])
    return store


def tls_context(cfg):
    """The TLS context, built once per boot (the certificates are parsed here); then dmqtt.tls is unloaded: the
    context is all the connections need, and the module's code is 2 KB of heap on a deployed board."""
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


def collected():
    gc.collect()
    return gc.mem_free()


def heap_check():
    """The free heap now, after a collection; a new low is kept, with its largest free block."""
    free = collected()
    if free < heap[_LOW]:
        heap[_LOW] = free
        heap[_BLOCK] = largest_block(free)
    return free


def largest_block(limit):
    """The largest allocation that succeeds now, to 64 bytes (a failed one collects first, so garbage does not
    count); MicroPython has no call that says it."""
    low, high = 0, limit
    while high - low > 64:
        mid = (low + high) // 2
        try:
            bytearray(mid)
            low = mid
        except MemoryError:
            high = mid
    gc.collect()
    return low


# The board of this boot: this module's state, set by open_board() (annotated here for the type checker:
# annotations cost a board nothing), and the hooks its client calls. Module state, not an instance of a class
# (docs/firmware-style.md, rule 1). Its run (continuous.py's or duty.py's) is
# given this module as `board`.
cfg: dict[str, Any]
boot: int
client: Any  # dmqtt.client.MQTTClient, or dmqtt.confirm.ConfirmingClient with confirm
backoff: Backoff
retry_at: Any  # ticks: the next connection attempt, not before
heap_at_boot = 0
finished = False  # every message acknowledged: the DISCONNECT that follows is ours
subscribed = False  # this boot has made its subscriptions
wifi: Any = None  # dmqtt.wifi, supervising the link; None without WiFi (the serial link, or no "wifi")
transport_class: Any = None
tls_ctx: Any = None
dropped = 0  # QoS 0 readings dropped while the WiFi was down


def open_board(config, store):
    """The board of this boot (this module), its journal open (what a power cut interrupted resumed), its WiFi
    supervised and its client made. Boot code: forgotten once it has run (forget_boot_code)."""
    global cfg, boot, backoff, retry_at, wifi, transport_class, client
    from dmqtt.client import Backoff, MQTTClient

    cfg = config
    boot = next_boot(cfg["root"])
    backoff = Backoff()
    retry_at = time.ticks_ms()
    if cfg["wifi"] and cfg["transport"] == "tcp":
        # dmqtt.wifi supervises the link from here on (its check() makes the first attempt); supervise.py says it.
        import supervise

        from dmqtt import wifi as station

        w = cfg["wifi"]
        station.start(w["ssid"], w["password"], w["ip"], w["bssid"])
        station.on_up = station.on_down = supervise.say
        supervise.began = time.ticks_ms()
        wifi = station
    # The transport's code (loaded by load_modules), only the one in use.
    if cfg["transport"] == "serial":
        from dlink.transport import LinkTransport

        transport_class = LinkTransport
    else:
        from dmqtt.transport import TCPTransport

        transport_class = TCPTransport
    client_class = MQTTClient
    options = dict(cfg["confirm"] or {})  # {confirm_topic, timeout_s, hold}: ConfirmingClient's own options
    if options:
        from dmqtt.confirm import ConfirmingClient as client_class  # type: ignore[assignment]

        options["epoch"] = boot  # the telemetry's boot and seq are the confirmation's epoch and number
    sleep = cfg["sleep"]
    if sleep and sleep["readings_per_send"] > 1:
        options["max_messages"] = sleep["queue_limit"]  # the journal's slots hold the readings of sampling wakes
    client = client_class(
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
    client.on_message = on_message
    client.on_published = on_published
    client.on_disconnect = on_disconnect
    if cfg["confirm"]:
        client.session.on_late = on_late  # a ConfirmingSession
        # (config.py subscribes to its topic with the others)
    if cfg["transport"] == "serial" and cfg["uart"]["pause"]:
        # A sector erase stalls the chip's UART: the bridge pauses meanwhile (docs/link-protocol.md).
        client.session.journal.hush = transport_class.hush
    for note in client.open():
        print(note)
    print(console.BOOT % (boot, client.outstanding(), dmqtt.__version__))
    return sys.modules[__name__]


def on_message(topic, payload, qos, retain, dup):
    print(console.MESSAGE % (topic, qos, payload, client.message_number()))


def on_disconnect(code, reason):
    # Every lost connection is said here, also those the client meets inside publish() (the message is
    # journaled all the same); the summary counts the reconnects. Not our own DISCONNECT at the end.
    if not finished:
        print(console.CONNECTION_LOST % reason)


def on_late(count):
    print(console.UNCONFIRMED % (count, cfg["confirm"]["timeout_s"]))


def on_published(pid, code):
    if code >= 0x80:  # counted by the client (client.refused)
        print(console.PUBLISH_NACKED % (pid, code))


def try_connect():
    """One connection attempt when the backoff allows it; True when connected."""
    global retry_at, subscribed
    if client.connected:
        return True
    if wifi is not None and not wifi.check():
        return False  # no MQTT attempt without a link: the WiFi supervision rejoins, with its own backoff
    if time.ticks_diff(time.ticks_ms(), retry_at) < 0:
        return False
    try:
        present = client.connect(open_transport())
        print(console.CONNECTED % (present, client.outstanding()))
        # The session keeps its subscriptions: made again at a boot's first connection (the config may have
        # changed; a retained confirmation comes at once), when the broker has lost the session, and on MQTT 5
        # at every connection: Mosquitto restarted from its snapshot after a SIGKILL can report an MQTT 5
        # session present that no longer delivers to its subscription (the chaos campaign's boards then heard
        # only the retained confirmations of their subscriptions). Not at every reconnect on 3.1:
        # a SUBSCRIBE written behind a resent PUBLISH that the broker refuses and closes on (Mosquitto on
        # 3.1.1, outside the ACL) draws a reset that discards its unread acknowledgement; MQTT 5 refuses with a
        # reason code instead (PUBACK 0x87, Not authorized).
        if not (present and subscribed) or client.version == _MQTT5:
            for topic, qos in cfg["subscribe"]:
                client.subscribe(topic, qos)
            subscribed = True
        backoff.reset()
        heap_check()
        return True
    except (OSError, MQTTError) as exc:
        client.close()
        delay = backoff.next_ms()  # capped exponential with jitter
        retry_at = time.ticks_add(time.ticks_ms(), delay)
        if isinstance(exc, OSError):
            client.connect_failures += 1  # the network's: the client counts its own (refused, no CONNACK)
        # Failures since the last connection: the 1st, 2nd, 4th, 8th... are said, so a board that cannot
        # reach its broker says so at once, then ever more quietly.
        if not backoff.attempt & (backoff.attempt - 1):
            print(console.CONNECT_FAILED % (exc, delay))
        return False


def open_transport():
    if cfg["transport"] == "serial":
        uart = cfg["uart"]
        return transport_class(cfg["host"], cfg["port"], uart["id"], uart["baud"], **uart["pins"])
    if cfg["tls"] is None:
        return transport_class(cfg["host"], cfg["port"])
    return sys.modules["tls_open"].connect(sys.modules[__name__])


def ensure_connected(qos0=False, deadline=None):
    """Until connected (True). For a QoS 0 message (`qos0`: it is not queued), not through a WiFi outage, nor
    past `deadline` (ticks): False then, and the reading is dropped (counted)."""
    while not try_connect():
        if qos0 and ((wifi and not wifi.up) or (deadline and time.ticks_diff(deadline, time.ticks_ms()) <= 0)):
            return False
        time.sleep_ms(max(1, min(50, time.ticks_diff(retry_at, time.ticks_ms()))))
    return True


def payload(seq):
    return console.payload(cfg["client_id"], boot, seq, cfg["payload_bytes"])


def finish(seq, total, start):
    """The run is complete: the summary line (its keys in the order dboard/console.py defines them), after a clean
    DISCONNECT."""
    global finished
    heap_check()
    values = (
        cfg["client_id"],
        boot,
        cfg["qos"],
        seq,
        total,
        cfg["count"],
        client.refused,
        client.reconnects,
        client.connect_failures,
        time.ticks_diff(time.ticks_ms(), start),
        heap_at_boot,
        gc.mem_free(),
        heap[_LOW],
        heap[_BLOCK],
        heap[_TLS] + heap[_TLS_SESSION],
        dmqtt.__version__,
    )
    summary = dict(zip(console.SUMMARY_KEYS, values))
    if cfg["transport"] == "serial":
        summary["link"] = transport_class.stats()
    if cfg["confirm"]:
        summary["confirm"] = client.session.stats()
    if wifi is not None:
        # dmqtt.wifi's counters: joins, outages, milliseconds offline (the outage under way included), and the
        # QoS 0 readings dropped while offline.
        summary["wifi"] = {
            "joins": wifi.joins,
            "outages": wifi.outages,
            "offline_ms": wifi.offline_ms + wifi.offline_now(),
            "dropped": dropped,
        }
    finished = True
    client.disconnect()
    print(json.dumps(summary))


def forget_boot_code():
    """Drop the functions only a boot runs, once it has: on a deployed board a function's bytecode is in the
    heap for as long as the function is, and these are a kilobyte the run can use (the config checker and the
    journal's opener go the same way, as whole modules)."""
    g = globals()
    for name in ("load_modules", "next_boot", "read_config", "tls_context", "open_board", "forget_boot_code"):
        del g[name]


def read_config():
    """Load and check config.json, then unload the checker: its code is needed once per boot, and its few
    kilobytes of heap are worth more to the buffers."""
    import config

    try:
        cfg = config.load()
        cfg["root"] = config.root()
    finally:
        forget("config")
    return cfg


def main(heap_at_boot):
    # The codec first: the config checker uses it, and the checker's garbage then lies above the codec's code
    # rather than between its pieces.
    __import__("dmqtt.codec")
    gc.collect()
    try:
        cfg = read_config()
    except Exception as exc:  # noqa: BLE001 (ConfigError or a file system error: reported, never a crash loop)
        print(console.CONFIG_ERROR % exc)
        print("fix config.json (or the files it names) and reset the board")
        return 3  # console_host.CONFIG_ERROR_STATUS
    gc.collect()
    try:
        board = open_board(cfg, load_modules(cfg))
        forget_boot_code()
        board.heap_at_boot = heap_at_boot
        # A board that sleeps between readings wakes to one; any other runs until every reading is published.
        if cfg["sleep"]:
            from duty import run
        else:
            from continuous import run
    except JournalError as exc:
        print(console.JOURNAL_ERROR % exc)
        return JOURNAL_FAILED
    except DmqttError as exc:  # dmqtt.tls.TLSConfigError: a certificate or key the config names is unusable
        print(console.CONFIG_ERROR % exc)  # names the field and the problem, never key material
        print("fix config.json (or the files it names) and reset the board")
        return 3  # console_host.CONFIG_ERROR_STATUS
    try:
        run(board)
    except JournalError as exc:
        # The flash under the journal failed (or is full of live records): retrying the same program would only
        # spin. Say where, and stop; start() decides whether a reset may help.
        print(console.JOURNAL_ERROR % exc)
        return JOURNAL_FAILED
    return 0


JOURNAL_FAILED = 5
JOURNAL_RESETS = 3  # a real board resets this many times in a row on journal errors, then stays stopped


def start(heap_at_boot=0):
    status = main(heap_at_boot)
    if _UNIX:
        sys.exit(status)  # the virtual board: the exit status is the verdict, the runner decides what follows
    import realboard

    realboard.finish(status == JOURNAL_FAILED, JOURNAL_RESETS)
