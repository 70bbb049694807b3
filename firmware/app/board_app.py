# Sensor-board application (started by main.py; compiled to .mpy like the rest). Makes this boot's board
# (board_open.py: config.json read, the boot counted in flash, the MQTT journal opened, WiFi supervised), connects,
# and hands the board to its run: continuous.py publishes `count` telemetry messages and resumes a run that a reset
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

if False:  # type checkers only: MicroPython has no typing module
    from typing import Any

    from dmqtt.client import Backoff

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


# The virtual board (the MicroPython Unix port) ends a run with an exit status, its verdict; a chip idles. Told by
# the interpreter's build, not sys.platform: the virtual board says "esp32" there, as libraries expect of a chip.
_UNIX = getattr(sys.implementation, "_machine", "").startswith("linux")
_MQTT5 = 5  # dmqtt.codec.V5


# How close the board comes to a MemoryError: the lowest free heap after a collection, measured at each connect,
# every few accepted messages and at the end of the run, and the largest free block at that low point (a
# fragmented heap fails an allocation that its total would allow). A collection costs about half a millisecond at
# 110 KB on the Unix port; the block search, a few more, only at a new low. Then what TLS holds of the heap: the
# context's (board_open.py), and an open connection's at its largest (tls_open.py), the summary's heap_tls. On an
# ESP32 mbedTLS allocates its own buffers from ESP-IDF's heap, not MicroPython's (the virtual board gives them an
# arena of their own): what is left is the Python objects of the connection. One list, not four globals or attributes
# (docs/firmware-style.md, rules 3 and 7): the modules that write it name its indexes with const()s of their own
# (names each module interns would cost a serial board with confirmation a pool of names it cannot spare).
heap = [0x7FFFFFFF, 0, 0, 0]
_LOW = const(0)
_BLOCK = const(1)
_TLS_CONTEXT = const(2)  # (board_open.py's _TLS_CONTEXT)
_TLS_SESSION = const(3)  # (tls_open.py's _TLS_SESSION)


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


class Board:
    """The board of this boot: its config, boot number, client and link, the hooks its client calls that need
    the board, and what its run (continuous.py's or duty.py's) asks of it, a connection. One object a reader and
    mypy can follow, where a module of state would save a few hundred bytes (docs/firmware-style.md, rule 1).
    board_open.open_board sets its attributes and hooks: a constructor's code would stay in the heap for the
    whole run (rule 6)."""

    # (Annotations cost a board nothing: the compiler drops them. A value here is a default an instance reads until
    # the run sets its own: an attribute left at its default takes no room in the instance. A class's names cost
    # room in its dictionary: the defaults are those an instance keeps for most of its run, or until its heap low.)
    cfg: "dict[str, Any]"  # config.json, checked (config.check)
    boot: "int"  # this boot's number (boot.txt)
    client: "Any"  # dmqtt.client.MQTTClient, or dmqtt.confirm.ConfirmingClient with confirm
    backoff: "Backoff"  # between connection attempts: when the next may start
    tls_ctx: "Any"  # with TLS: the context (board_open.tls_context)
    wifi: "Any" = None  # dmqtt.wifi, supervising the link; None without WiFi (the serial link, or no "wifi")
    dropped = 0  # QoS 0 readings dropped while the WiFi was down
    subscribed = False  # this boot has made its subscriptions

    def on_message(self, topic, payload, qos, retain, dup):
        print(console.MESSAGE % (topic, qos, payload, self.client.message_number()))

    def on_late(self, count):
        print(console.UNCONFIRMED % (count, self.cfg["confirm"]["timeout_s"]))

    def try_connect(self):
        """One connection attempt when the backoff allows it; True when connected."""
        client = self.client
        if client.connected:
            return True
        if self.wifi is not None and not self.wifi.check():
            return False  # no MQTT attempt without a link: the WiFi supervision rejoins, with its own backoff
        backoff = self.backoff
        if backoff.due():
            return False
        try:
            cfg = self.cfg
            # (board_open.py loaded the transport's module, only the one in use: importing it here finds it.)
            if cfg["transport"] == "serial":
                from dlink.transport import LinkTransport

                uart = cfg["uart"]
                transport = LinkTransport(cfg["host"], cfg["port"], uart["id"], uart["baud"], **uart["pins"])
            elif cfg["connect"] is None:
                from dmqtt.transport import TCPTransport

                transport = TCPTransport(cfg["host"], cfg["port"])  # type: ignore[assignment]
            else:
                # TLS (tls_open.py), or a node's link to its gateway (dlink/now_transport.py): config.py names it.
                transport = sys.modules[cfg["connect"]].connect(self)
            present = client.connect(transport)
            print(console.CONNECTED % (present, client.outstanding()))
            # The session keeps its subscriptions: made again at a boot's first connection (the config may have
            # changed; a retained confirmation comes at once), when the broker has lost the session, and on MQTT
            # 5 at every connection: Mosquitto restarted from its snapshot after a SIGKILL can report an MQTT 5
            # session present that no longer delivers to its subscription (the chaos campaign's boards then
            # heard only the retained confirmations of their subscriptions). Not at every reconnect on 3.1: a
            # SUBSCRIBE written behind a resent PUBLISH that the broker refuses and closes on (Mosquitto on
            # 3.1.1, outside the ACL) draws a reset that discards its unread acknowledgement; MQTT 5 refuses with
            # a reason code instead (PUBACK 0x87, Not authorized).
            if not (present and self.subscribed) or client.version == _MQTT5:
                for topic, qos in cfg["subscribe"]:
                    client.subscribe(topic, qos)
                self.subscribed = True
            backoff.reset()
            heap_check()
            return True
        except (OSError, MQTTError) as exc:
            client.close()
            delay = backoff.next_ms()  # capped exponential with jitter
            if isinstance(exc, OSError):
                client.connect_failures += 1  # the network's: the client counts its own (refused, no CONNACK)
            # Failures since the last connection: the 1st, 2nd, 4th, 8th... are said, so a board that cannot
            # reach its broker says so at once, then ever more quietly.
            if not backoff.attempt & (backoff.attempt - 1):
                print(console.CONNECT_FAILED % (exc, delay))
            return False


# The client's hooks that need no board are functions, not Board methods: a bound method is an object the board
# would hold for the whole run.


def on_published(pid, code):
    """A QoS 1/2 flow ended."""
    if code >= 0x80:  # counted by the client (client.refused)
        print(console.PUBLISH_NACKED % (pid, code))


def on_disconnect(code, reason):
    """A connection ended. Every lost connection is said here, also those the client meets inside publish() (the
    message is journaled all the same); the summary counts the reconnects. Our own DISCONNECTs are not lost
    connections: finish() and duty.py unset this hook around them."""
    print(console.CONNECTION_LOST % reason)


def finish(board, seq, total, start, heap_at_boot):
    """The run of `board` is complete: the summary line (its keys in the order dboard/console.py defines them),
    after a clean DISCONNECT: this boot's published messages, the run's, when this boot's run began (ticks_ms())
    and the free heap main.py measured before the application loaded."""
    cfg = board.cfg
    client = board.client
    wifi = board.wifi
    heap_check()
    values = (
        cfg["client_id"],
        board.boot,
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
        heap[_TLS_CONTEXT] + heap[_TLS_SESSION],
        dmqtt.__version__,
    )
    summary = dict(zip(console.SUMMARY_KEYS, values))
    if cfg["transport"] == "serial":
        from dlink.transport import LinkTransport

        summary["link"] = LinkTransport.stats()
    if cfg["confirm"]:
        summary["confirm"] = client.session.stats()
    if wifi is not None:
        # dmqtt.wifi's counters: joins, outages, milliseconds offline (the outage under way included), and
        # the QoS 0 readings dropped while offline.
        summary["wifi"] = {
            "joins": wifi.joins,
            "outages": wifi.outages,
            "offline_ms": wifi.offline_ms + wifi.offline_now(),
            "dropped": board.dropped,
        }
    client.on_disconnect = None  # (ours, not a lost connection)
    client.disconnect()
    print(json.dumps(summary))


def main(heap_at_boot):
    # The config first, into a heap still whole: what reading it leaves (the check kept, parsed) lies below every
    # module's code. The boot's own code (config_file, board_open) is dropped once it has run (rule 6).
    import config_file

    try:
        cfg = config_file.read()
    except Exception as exc:  # noqa: BLE001 (ConfigError or a file system error: reported, never a crash loop)
        print(console.CONFIG_ERROR % exc)
        print("fix config.json (or the files it names) and reset the board")
        return 3  # console_host.CONFIG_ERROR_STATUS
    finally:
        del config_file  # (a name bound here keeps a module's code for as long as main() runs: the whole run)
        forget("config_file")
    __import__("dmqtt.codec")
    gc.collect()
    import board_open

    try:
        board = board_open.open_board(cfg)
    except JournalError as exc:
        print(console.JOURNAL_ERROR % exc)
        return JOURNAL_FAILED
    except DmqttError as exc:  # dmqtt.tls.TLSConfigError: a certificate or key the config names is unusable
        print(console.CONFIG_ERROR % exc)  # names the field and the problem, never key material
        print("fix config.json (or the files it names) and reset the board")
        return 3  # console_host.CONFIG_ERROR_STATUS
    finally:
        del board_open
        forget("board_open")
    # A board that sleeps between readings wakes to one; any other runs until every reading is published.
    if cfg["sleep"]:
        from duty import run
    else:
        from continuous import run
    try:
        run(board, heap_at_boot)
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
