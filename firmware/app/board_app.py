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

from dmqtt.client import Backoff, MQTTClient
from dmqtt.errors import JournalError, MQTTError, PublishRefused, QueueFull
from dmqtt.journal import open_journal

_UNIX = sys.platform == "linux"


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


def ensure_clock():
    """Certificate validity is checked against the board's clock. An ESP32 without a set RTC starts in
    2000-01-01, where every certificate is "not yet valid": on WiFi boards the clock is set by NTP before the
    first TLS connect; a board whose clock cannot be set refuses to connect, saying why, and retries with the
    connection's backoff. (The Unix port of the virtual board has the host's clock.)"""
    if time.gmtime()[0] >= CLOCK_VALID_FROM:
        return
    try:
        import ntptime

        ntptime.settime()
    except (ImportError, OSError, OverflowError):
        pass
    year = time.gmtime()[0]
    if year < CLOCK_VALID_FROM:
        raise OSError("tls: the clock says %d and NTP could not set it: certificate validity cannot be checked" % year)
    print("tls: clock set by NTP")


def reading(seq):
    # Stand-in sensor: a slow deterministic wave, so the rollups have something to show.
    return 20.0 + (seq % 20) * 0.25


def join_wifi(wifi):
    """A real board on TCP joins WiFi first, with retries; the Unix port has no network module."""
    try:
        import network
    except ImportError:
        return
    sta = network.WLAN(network.STA_IF)
    sta.active(True)
    for attempt in range(10):
        if sta.isconnected():
            return
        sta.connect(wifi["ssid"], wifi.get("password", ""))
        for _ in range(100):
            if sta.isconnected():
                print("wifi: connected", sta.ifconfig()[0])
                return
            time.sleep_ms(100)
        print("wifi: attempt %d failed" % (attempt + 1))
    raise OSError("wifi: could not join %s" % wifi["ssid"])


class Board:
    def __init__(self, cfg, boot):
        self.cfg = cfg
        self.boot = boot
        self.backoff = Backoff()
        self.retry_at = time.ticks_ms()
        self.connect_failures = 0  # attempts that failed, the client's (refused, no CONNACK) and the network's
        self.heap_at_boot = 0
        self.finished = False  # every message acknowledged: the DISCONNECT that follows is ours
        # The transport's code loads before the client's buffers, and only the one in use.
        if cfg["transport"] == "serial":
            from dlink.transport import LinkTransport

            # The link's buffers are allocated now, while the heap is still in one piece.
            uart = cfg["uart"]
            LinkTransport.prepare(uart["id"], uart["baud"], **uart["pins"])
            self.transport_class = LinkTransport
        else:
            from dmqtt.transport import TCPTransport

            self.transport_class = TCPTransport  # type: ignore[assignment]
        self.tls_ctx = None
        if cfg["tls"]:
            from dmqtt.tls import TLSConfigError, context  # loaded only by boards that speak TLS

            try:
                self.tls_ctx = context(cfg["tls"], cfg["root"])  # once per boot: the certificates are parsed here
            except TLSConfigError as exc:
                raise BadConfig(str(exc))
        self.client = MQTTClient(
            cfg["client_id"],
            open_journal(),
            cfg["version"],
            cfg["keepalive"],
            clean=False,
            session_expiry=cfg["session_expiry"],
            window=cfg["window"],
            username=cfg["username"],
            password=cfg["password"],
            will=cfg["will"],
            group_commit=cfg["group_commit"],
        )
        self.client.on_message = self.on_message
        self.client.on_published = self.on_published
        self.client.on_disconnect = self.on_disconnect
        for note in self.client.open():
            print(note)

    def on_message(self, topic, payload, qos, retain, dup):
        print("message", topic, qos, payload)

    def on_disconnect(self, code, reason):
        # Every lost connection is said here, also those the client meets inside publish() (the message is
        # journaled all the same); the summary counts the reconnects. Not our own DISCONNECT at the end.
        if not self.finished:
            print("connection lost (%s)" % reason)

    def on_published(self, pid, code):
        if code >= 0x80:  # counted by the client (client.refused)
            print("publish refused: packet id %d reason 0x%02x" % (pid, code))

    def try_connect(self):
        """One connection attempt when the backoff allows it; True when connected."""
        client = self.client
        if client.connected:
            return True
        if time.ticks_diff(time.ticks_ms(), self.retry_at) < 0:
            return False
        try:
            if self.cfg["wifi"] and self.cfg["transport"] == "tcp":
                join_wifi(self.cfg["wifi"])
            present = client.connect(self.open_transport())
            print("connected session_present=%d inflight=%d" % (present, client.outstanding()))
            for topic, qos in self.cfg["subscribe"]:
                client.subscribe(topic, qos)
            self.backoff.reset()
            return True
        except (OSError, MQTTError) as exc:
            client.close()
            delay = self.backoff.next_ms()  # capped exponential with jitter
            self.retry_at = time.ticks_add(time.ticks_ms(), delay)
            self.connect_failures += 1
            print("connect failed (%s); retrying in %d ms" % (exc, delay))
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
        else:
            ensure_clock()
        return self.transport_class(cfg["host"], cfg["port"], tls=self.tls_ctx, server_hostname=tls["server_hostname"])

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
                print("offline queue full (%d messages): waiting for the broker" % client.outstanding())
                self.ensure_connected()
                continue
            except PublishRefused as exc:
                skipped += 1  # counted by the client (client.refused)
                print("publish refused: %s" % exc)
                continue
            except (OSError, MQTTError):
                client.close()  # said by on_disconnect
                continue
            seq += 1  # counted when publish() has accepted it
            group = cfg["group_commit"]
            if not group or seq % group == 0 or seq == todo:
                client.flush()  # with group commit: the group is made durable here
                self.idle(cfg["interval_ms"])
        while client.outstanding():
            self.ensure_connected()
            try:
                client.wait_idle(60000)
            except (OSError, MQTTError):
                client.close()  # said by on_disconnect
        gc.collect()
        summary = {
            "dev": cfg["client_id"],
            "boot": self.boot,
            "qos": cfg["qos"],
            "sent": seq,
            "total": done_before + seq,
            "count": cfg["count"],
            "refused": client.refused,
            "reconnects": client.reconnects,
            "connect_failures": self.connect_failures,
            "ms": time.ticks_diff(time.ticks_ms(), start),
            "heap_at_boot": self.heap_at_boot,
            "heap_free": gc.mem_free(),
        }
        if cfg["transport"] == "serial":
            summary["link"] = self.transport_class.stats()
        self.finished = True
        client.disconnect()
        print(json.dumps(summary))


def read_config():
    """Load and check config.json, then unload the checker: its code is needed once per boot, and its few
    kilobytes of heap are worth more to the buffers."""
    import config

    try:
        cfg = config.load()
        cfg["root"] = config.root()
    finally:
        del sys.modules["config"]
    return cfg


def main(heap_at_boot):
    try:
        cfg = read_config()
    except Exception as exc:  # noqa: BLE001 (ConfigError or a file system error: reported, never a crash loop)
        print("config error:", exc)
        print("fix config.json and reset the board")
        return 3
    try:
        board = Board(cfg, next_boot(cfg["root"]))
        board.heap_at_boot = heap_at_boot
        board.run()
    except BadConfig as exc:
        print("config error:", exc)  # names the field and the problem, never key material
        print("fix config.json (or the files it names) and reset the board")
        return 3
    except JournalError as exc:
        # The flash under the journal failed (or is full of live records): retrying the same program would
        # only spin. Say where, and stop; start() decides whether a reset may help.
        print("journal error:", exc)
        return JOURNAL_FAILED
    return 0


JOURNAL_FAILED = 5
JOURNAL_RESETS = 3  # a real board resets this many times in a row on journal errors, then stays stopped


def journal_failures(failed):
    """Consecutive boots that ended in a journal error, counted in a file on the filesystem (the journal's own
    partition is the thing that failed); a boot that completes its run clears the count. Real boards only: their
    filesystem is mounted at /."""
    path = "/journal_failures.txt"
    try:
        with open(path) as f:
            count = int(f.read())
    except (OSError, ValueError):
        count = 0
    count = count + 1 if failed else 0
    try:
        with open(path, "w") as f:
            f.write(str(count))
    except OSError:
        pass
    return count


def start(heap_at_boot=0):
    status = main(heap_at_boot)
    if _UNIX:
        sys.exit(status)  # the virtual board: the exit status is the verdict, the runner decides what follows
    failures = journal_failures(status == JOURNAL_FAILED)
    if status == JOURNAL_FAILED:
        if failures <= JOURNAL_RESETS:
            import machine

            print("journal error: resetting the board (%d of %d)" % (failures, JOURNAL_RESETS))
            time.sleep(1)
            machine.reset()
        print("journal error: %d resets did not help; stopped. Erase the mqttlog partition or reflash" % JOURNAL_RESETS)
    while True:  # a real board idles after its run (or after giving up); the REPL stays reachable
        time.sleep(1)
