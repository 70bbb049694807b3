# Sensor-board application (started by main.py; compiled to .mpy like the rest). Reads config.json, counts boots
# in flash, opens the MQTT journal, connects (WiFi first on a real board) and publishes `count` telemetry
# messages, resuming a run that a reset or a power cut interrupted: the number of messages accepted so far is
# journaled with each message. When every QoS 1/2 message is acknowledged it prints one JSON summary line; on
# the Unix port it then exits 0, a real board idles.
#
# With group_commit N, up to N messages are staged in RAM and programmed together: a power cut loses the
# staged ones, and the journaled mark with them, so the run republishes them (under the new boot).
#
# Each message: {"dev", "boot", "seq" (0, 1, 2 ... within this boot, counted when publish() accepts it), "t"
# (ms since boot), "reading", "pad"} padded to payload_bytes.

import gc
import json
import sys
import time

import dmqtt
from dboard import console
from dmqtt.errors import JournalError, MQTTError, PublishRefused, QueueFull, forget

_UNIX = sys.platform == "linux"
_MQTT5 = 5  # dmqtt.codec.V5


def load_modules(cfg):
    """Import the client's modules one at a time, leaves first, with a collection after each: on a board whose
    code is loaded into the heap (.mpy files, as `host-bridge deploy` leaves them), each import's garbage (its
    module-level code, file buffers) is freed before the next one's code lands, so the free heap stays in large
    blocks for the buffers that follow. Only what this config uses: the serial link or TCP (and TLS). The link
    goes first and makes its buffers at once, while the heap is in one piece."""
    names = ["dmqtt.journal_record", "dmqtt.session", "dmqtt.journal", "dmqtt.client"]
    if cfg["transport"] == "serial":
        names = ["dlink.frame", "dlink.control", "dlink.link", "dlink.transport"] + names
    else:
        names.append("dmqtt.transport")  # with TLS, dmqtt.tls is loaded only to build the context (tls_context)
    if cfg["confirm"]:
        names.append("dmqtt.confirm")
    for name in names:
        __import__(name)
        gc.collect()
        if name == "dlink.transport":
            uart = cfg["uart"]
            sys.modules[name].LinkTransport.prepare(uart["id"], uart["baud"], **uart["pins"])


def tls_context(cfg):
    """The TLS context, built once per boot (the certificates are parsed here); then dmqtt.tls is unloaded: the
    context is all the connections need, and the module's code is 2 KB of heap on a deployed board."""
    from dmqtt import tls

    try:
        return tls.context(cfg["tls"], cfg["root"])
    except tls.TLSConfigError as exc:
        raise BadConfig(str(exc))
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


class BadConfig(Exception):
    """The config passed its checks but a file it names cannot be used (a certificate, a key)."""


CLOCK_VALID_FROM = 2024  # a year before which the clock cannot be right: certificates are newer than that


class HeapWatch:
    """How close the board comes to a MemoryError: the lowest free heap after a collection, measured at each
    connect, every _HEAP_EVERY accepted messages and at the end of the run, and the largest free block at that
    low point (a fragmented heap fails an allocation that its total would allow). A collection costs about half
    a millisecond at 110 KB on the Unix port; the block search, a few more, only at a new low."""

    def __init__(self):
        self.low = 0x7FFFFFFF
        self.block = 0
        # What TLS holds: the context (certificates mbedTLS parsed) and an open connection. On an ESP32 mbedTLS
        # allocates from ESP-IDF's heap, not MicroPython's; on the Unix port it takes MicroPython's, so the
        # summary says how much, for the figure a chip would show.
        self.tls = 0
        self.tls_session = 0

    def collected(self):
        gc.collect()
        return gc.mem_free()

    def check(self):
        free = self.collected()
        if free < self.low:
            self.low = free
            self.block = largest_block(free)
        return free


_HEAP_EVERY = 32


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


def reading(seq):
    # Stand-in sensor: a slow deterministic wave, so the rollups have something to show.
    return 20.0 + (seq % 20) * 0.25


class Board:
    def __init__(self, cfg, boot):
        from dmqtt.client import Backoff, MQTTClient
        from dmqtt.journal import open_journal

        self.cfg = cfg
        self.boot = boot
        self.backoff = Backoff()
        self.retry_at = time.ticks_ms()
        self.heap_at_boot = 0
        self.heap = HeapWatch()
        self.finished = False  # every message acknowledged: the DISCONNECT that follows is ours
        self.subscribed = False  # this boot has made its subscriptions
        # The transport's code (loaded by load_modules), only the one in use.
        if cfg["transport"] == "serial":
            from dlink.transport import LinkTransport

            self.transport_class = LinkTransport
        else:
            from dmqtt.transport import TCPTransport

            self.transport_class = TCPTransport  # type: ignore[assignment]
        self.tls_ctx = None
        if cfg["tls"]:
            free = self.heap.collected()
            self.tls_ctx = tls_context(cfg)
            self.heap.tls = free - self.heap.collected()
        # The journal first, and its backend's import garbage collected (on a deployed board the backend's code
        # loads into the heap here): the client's buffers then find the free heap in larger blocks.
        store = open_journal()
        gc.collect()
        client_class = MQTTClient
        options = cfg["confirm"] or {}  # {confirm_topic, timeout_s, hold}: ConfirmingClient's own options
        if options:
            from dmqtt.confirm import ConfirmingClient as client_class  # type: ignore[assignment]

            options["epoch"] = boot  # the telemetry's boot and seq are the confirmation's epoch and number
        self.client = client_class(
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
        self.client.on_message = self.on_message
        self.client.on_published = self.on_published
        self.client.on_disconnect = self.on_disconnect
        if options:
            self.client.session.on_late = self.on_late  # type: ignore[attr-defined]  # a ConfirmingSession
            # (config.py subscribes to its topic with the others)
        if cfg["transport"] == "serial" and cfg["uart"]["pause"]:
            # A sector erase stalls the chip's UART: the bridge pauses meanwhile (docs/link-protocol.md).
            self.client.session.journal.quiet = self.transport_class.hush
        forget("dmqtt.journal")  # its open_journal() has done its work: the backend is the client's now
        for note in self.client.open():
            print(note)
        print(console.BOOT % (boot, self.client.outstanding(), dmqtt.__version__))

    def on_message(self, topic, payload, qos, retain, dup):
        print(console.MESSAGE % (topic, qos, payload))

    def on_disconnect(self, code, reason):
        # Every lost connection is said here, also those the client meets inside publish() (the message is
        # journaled all the same); the summary counts the reconnects. Not our own DISCONNECT at the end.
        if not self.finished:
            print(console.CONNECTION_LOST % reason)

    def on_late(self, count):
        print(console.UNCONFIRMED % (count, self.cfg["confirm"]["timeout_s"]))

    def on_published(self, pid, code):
        if code >= 0x80:  # counted by the client (client.refused)
            print(console.PUBLISH_NACKED % (pid, code))

    def try_connect(self):
        """One connection attempt when the backoff allows it; True when connected."""
        client = self.client
        if client.connected:
            return True
        if time.ticks_diff(time.ticks_ms(), self.retry_at) < 0:
            return False
        try:
            if self.cfg["wifi"] and self.cfg["transport"] == "tcp":
                import realboard

                realboard.join_wifi(self.cfg["wifi"])
            present = client.connect(self.open_transport())
            print(console.CONNECTED % (present, client.outstanding()))
            # The session keeps its subscriptions: made again at a boot's first connection (the config may have
            # changed; a retained confirmation comes at once), when the broker has lost the session, and on MQTT 5
            # at every connection: Mosquitto restarted from its snapshot after a SIGKILL was seen to report an MQTT
            # 5 session present that no longer delivered to its subscription (make soak's chaos campaign: the
            # boards heard only the retained confirmations of their subscriptions). Not at every reconnect on 3.1:
            # a SUBSCRIBE written behind a resent PUBLISH that the broker refuses and closes on (Mosquitto on
            # 3.1.1, outside the ACL) draws a reset that discards its unread acknowledgement; MQTT 5 refuses with a
            # reason code instead (PUBACK 0x87, Not authorized).
            if not (present and self.subscribed) or client.version == _MQTT5:
                for topic, qos in self.cfg["subscribe"]:
                    client.subscribe(topic, qos)
                self.subscribed = True
            self.backoff.reset()
            self.heap.check()
            return True
        except (OSError, MQTTError) as exc:
            client.close()
            delay = self.backoff.next_ms()  # capped exponential with jitter
            self.retry_at = time.ticks_add(time.ticks_ms(), delay)
            if isinstance(exc, OSError):
                client.connect_failures += 1  # the network's: the client counts its own (refused, no CONNACK)
            # Failures since the last connection: the 1st, 2nd, 4th, 8th... are said, so a board that cannot
            # reach its broker says so at once, then ever more quietly.
            if not self.backoff.attempt & (self.backoff.attempt - 1):
                print(console.CONNECT_FAILED % (exc, delay))
            return False

    def open_transport(self):
        cfg = self.cfg
        if cfg["transport"] == "serial":
            uart = cfg["uart"]
            return self.transport_class(cfg["host"], cfg["port"], uart["id"], uart["baud"], **uart["pins"])
        tls = cfg["tls"]
        if tls is None:
            return self.transport_class(cfg["host"], cfg["port"])
        if tls["insecure"]:
            print(
                "tls: WARNING: certificate verification is off (tls.insecure):"
                " anyone on the path can pose as the broker"
            )
        elif time.gmtime()[0] < CLOCK_VALID_FROM:
            # Certificate validity is checked against the board's clock: an ESP32 without a set RTC starts in
            # 2000. (The virtual board has the host's clock.)
            import realboard

            realboard.set_clock(CLOCK_VALID_FROM)
        free = self.heap.collected()
        transport = self.transport_class(
            cfg["host"], cfg["port"], tls=self.tls_ctx, server_hostname=tls["server_hostname"]
        )
        self.heap.tls_session = max(self.heap.tls_session, free - self.heap.collected())
        return transport

    def ensure_connected(self):
        while not self.try_connect():
            time.sleep_ms(max(1, time.ticks_diff(self.retry_at, time.ticks_ms())))

    def idle(self, ms):
        """Serve the connection (acks, keep-alive, reconnects) for ms milliseconds."""
        deadline = time.ticks_add(time.ticks_ms(), ms)
        while True:
            left = time.ticks_diff(deadline, time.ticks_ms())
            if self.try_connect():
                try:
                    self.client.poll(max(0, min(100, left)))
                except (OSError, MQTTError):
                    self.client.close()  # said by on_disconnect
            elif left > 0:
                time.sleep_ms(min(left, 50))
            if time.ticks_diff(deadline, time.ticks_ms()) <= 0:
                return

    def heap_checkpoint(self, seq):
        """Every _HEAP_EVERY accepted messages, and with heap_log_every N a line every N (so that a long run
        shows whether the heap holds: no leak, no fragmentation that grows)."""
        every = self.cfg["heap_log_every"]
        logged = every and seq % every == 0
        if logged or seq % _HEAP_EVERY == 0:
            free = self.heap.check()
            if logged:
                print(console.HEAP % (seq, free, largest_block(free)))

    def run(self):
        cfg = self.cfg
        client = self.client
        done_before = client.mark  # accepted in earlier boots of this run
        todo = max(0, cfg["count"] - done_before)
        topic = cfg["topic"].encode()
        start = time.ticks_ms()
        seq = 0
        skipped = 0  # messages publish() refused outright (too large for this broker): not accepted, not retried
        self.try_connect()
        while seq + skipped < todo:
            if cfg["qos"] == 0:
                self.ensure_connected()  # QoS 0 is not queued: it needs the connection
            body = {
                "dev": cfg["client_id"],
                "boot": self.boot,
                "seq": seq,
                "t": time.ticks_ms(),
                "reading": reading(seq),
            }
            if cfg["payload_bytes"]:
                body["pad"] = ""
                body["pad"] = "x" * max(0, cfg["payload_bytes"] - len(json.dumps(body)))
            try:
                # QoS 1/2 while disconnected: accepted into the journal (the offline queue) and sent on reconnect.
                wait = 30000 if client.connected else 0
                client.publish(
                    topic, json.dumps(body).encode(), cfg["qos"], mark=done_before + seq + 1, timeout_ms=wait
                )
            except QueueFull:
                print(console.QUEUE_FULL % client.outstanding())
                self.ensure_connected()
                continue
            except PublishRefused as exc:
                skipped += 1  # counted by the client (client.refused)
                print(console.PUBLISH_REFUSED % exc)
                continue
            except (OSError, MQTTError):
                client.close()  # said by on_disconnect
                continue
            seq += 1  # counted when publish() has accepted it
            group = cfg["group_commit"]
            if cfg["qos"] and not group:
                print(console.ACCEPTED % (self.boot, seq - 1))  # the witness: on the console before any cut
            self.heap_checkpoint(seq)
            if not group or seq % group == 0 or seq == todo:
                client.flush()  # with group commit: the group is made durable here
                if cfg["qos"] and group:
                    print(console.ACCEPTED % (self.boot, seq - 1))
                self.idle(cfg["interval_ms"])
        if cfg["qos"] and cfg["group_commit"] and seq % cfg["group_commit"] and seq != todo:
            client.flush()  # a last group cut short by refused messages
            print(console.ACCEPTED % (self.boot, seq - 1))
        while client.outstanding():
            self.ensure_connected()
            try:
                client.wait_idle(60000)
            except (OSError, MQTTError):
                client.close()  # said by on_disconnect
        if cfg["confirm"]:
            # Until the recorder has stored every message (sending again what it lacks), while it makes progress:
            # three timeouts without a confirmation moving the floor end the wait (a recorder down or catching up
            # on a backlog takes longer than that to come back). What is still unconfirmed then is counted in the
            # summary and stays in the journal, for the next boot.
            patience = 3000 * cfg["confirm"]["timeout_s"]
            left = client.unconfirmed()  # type: ignore[attr-defined]
            until = time.ticks_add(time.ticks_ms(), patience)
            while (left or client.outstanding()) and time.ticks_diff(until, time.ticks_ms()) > 0:
                self.idle(100)
                now_left = client.unconfirmed()  # type: ignore[attr-defined]
                if now_left < left:
                    left = now_left
                    until = time.ticks_add(time.ticks_ms(), patience)
        self.heap.check()
        # The summary line: its keys in the order dboard/console.py defines them.
        values = (
            cfg["client_id"],
            self.boot,
            cfg["qos"],
            seq,
            done_before + seq,
            cfg["count"],
            client.refused,
            client.reconnects,
            client.connect_failures,
            time.ticks_diff(time.ticks_ms(), start),
            self.heap_at_boot,
            gc.mem_free(),
            self.heap.low,
            self.heap.block,
            self.heap.tls + self.heap.tls_session,
            dmqtt.__version__,
        )
        summary = dict(zip(console.SUMMARY_KEYS, values))
        if cfg["transport"] == "serial":
            summary["link"] = self.transport_class.stats()
        if cfg["confirm"]:
            summary["confirm"] = client.session.stats()  # type: ignore[attr-defined]
        self.finished = True
        client.disconnect()
        print(json.dumps(summary))


def forget_boot_code():
    """Drop the functions only a boot runs, once it has: on a deployed board a function's bytecode is in the
    heap for as long as the function is, and these are a kilobyte the run can use (the config checker and the
    journal's opener go the same way, as whole modules)."""
    g = globals()
    for name in ("load_modules", "next_boot", "read_config", "tls_context", "forget_boot_code"):
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
    load_modules(cfg)
    try:
        board = Board(cfg, next_boot(cfg["root"]))
        forget_boot_code()
        board.heap_at_boot = heap_at_boot
        board.run()
    except BadConfig as exc:
        print(console.CONFIG_ERROR % exc)  # names the field and the problem, never key material
        print("fix config.json (or the files it names) and reset the board")
        return 3  # console_host.CONFIG_ERROR_STATUS
    except JournalError as exc:
        # The flash under the journal failed (or is full of live records): retrying the same program would
        # only spin. Say where, and stop; start() decides whether a reset may help.
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
