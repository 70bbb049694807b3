# The board application's console protocol, defined once: every line the application prints that a host reads
# (the bench, the demo, the tools), as a format string, and the summary line's fields. The firmware prints
# through these formats (firmware/app/board_app.py); the host reads through its twin, dboard/console_host.py,
# which parses with the same formats. docs/console-protocol.md specifies the lines;
# tests/vectors/console_lines.json holds a vector for each, run on MicroPython and CPython.
#
# Kept to string constants (they cost the board a few hundred bytes of heap, where functions would cost more), and
# the one function every wake that takes a reading needs: the telemetry message (payload()), whose boot and seq are
# the ACCEPTED line's (a module of its own would cost a deployed board a module's heap besides).
#
# ACCEPTED is the bench's witness of what the board promised (docs/console-protocol.md): printed the moment
# publish() returns a QoS 1/2 message (with group commit, when flush() has made its group durable), so that what
# a power cut takes with it from the journal is still on the console. Within a boot the board numbers the
# messages it accepts 0, 1, 2 ..., so the last seq of each boot says which it accepted.

# The u-name: MicroPython looks for `json` on the filesystem before it takes the built-in (an extensible module), a
# search `ujson` skips (a sampling wake's tenth: dmqtt/wake.py says what such searches cost).
try:
    import ujson as json
except ImportError:  # CPython (the host's tests and tools)
    import json  # type: ignore[no-redef]

BOOT = "boot %d: %d in flight, dmqtt %s"  # after the journal is open: boot number, QoS 1/2 messages resumed, version
ACCEPTED = "accepted %d %d"  # boot, seq: publish() accepted the message (with group commit: its group is durable)
CONNECTED = "connected session_present=%d inflight=%d"
CONNECT_FAILED = "connect failed (%s); retrying in %d ms"
CONNECTION_LOST = "connection lost (%s)"
PUBLISH_REFUSED = "publish refused: %s"
PUBLISH_NACKED = "publish refused: packet id %d reason 0x%02x"  # the broker's reason code >= 0x80 in an ack
QUEUE_FULL = "offline queue full (%d messages): waiting for the broker"
MESSAGE = "message %s %d %r %d"  # topic, QoS, payload (bytes, as Python prints them), receive number (QoS 2)
HEAP = 'heap {"seq": %d, "free": %d, "block": %d}'  # with heap_log_every N, every N accepted messages
CONFIG_ERROR = "config error: %s"  # the board stops (status 3): a field of config.json, or a file it names
JOURNAL_ERROR = "journal error: %s"  # the flash under the journal failed (status 5)
# With confirm: messages the broker acknowledged stayed unconfirmed by the recorder for confirm.timeout_s (said
# once per boot; they are sent again, and counted in the summary's "confirm").
UNCONFIRMED = "unconfirmed: %d messages not confirmed by the recorder after %d s; sending them again"
# With wifi: the boot's first join (address, ms since the first attempt); the link dropped (the station's
# status), said once per outage; the link back, with the outage's length.
WIFI_JOINED = "wifi: joined %s in %d ms"
WIFI_DOWN = "wifi: down (status %d)"
WIFI_UP = "wifi: up again after %d ms"
# With sleep: the boot ends in deep sleep for this long, with these QoS 1/2 messages still unacknowledged.
SLEEP = "sleep: %d ms, %d in flight"

# The summary: one line, a JSON object with these keys (all integers but dev and version, the client's
# dmqtt.__version__; "link", the serial link's counters as an object, only on the serial transport; "confirm",
# the confirmation's counters as an object, only with confirm), printed once every accepted message is
# acknowledged.
SUMMARY_KEYS = (
    "dev",
    "boot",
    "qos",
    "sent",
    "total",
    "count",
    "refused",
    "reconnects",
    "connect_failures",
    "ms",
    "heap_at_boot",
    "heap_free",
    "heap_min",
    "heap_max_block",
    "heap_tls",
    "version",
)


def payload(dev, boot, seq, size, t, value=None):
    """The board application's telemetry message (docs/telemetry-parquet.md reads it): {"dev", "boot", "seq" (0,
    1, 2 ... within the boot, counted when the message is accepted), "t" (ms since boot: `t`), "reading", "pad"},
    padded to `size` bytes. The reading is `value` (the sensor hook's: sensor_hook.py), or without one a stand-in
    sensor, a slow deterministic wave, so the rollups have something to show."""
    if value is None:
        value = 20.0 + (seq % 20) * 0.25
    body = {"dev": dev, "boot": boot, "seq": seq, "t": t, "reading": value}
    if size:
        body["pad"] = ""
        body["pad"] = "x" * max(0, size - len(json.dumps(body)))
    return json.dumps(body).encode()
