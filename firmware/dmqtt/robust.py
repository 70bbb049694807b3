# The blocking face's supervised loop, for applications written the umqtt.robust way: one object keeps the
# connection up (reconnecting with Backoff, subscribing again when the broker kept no session) and reads the
# acknowledgements while the application waits, so a loop of publish() and serve_until() keeps its own pace
# through broker outages. The client underneath is unchanged: publish() journals QoS 1/2 whether or not a
# connection is up, and what a reset interrupted resumes from the journal (MQTTClient.open()).
#
# Loaded only by applications that import it: the board application (firmware/app) supervises its own runs.

import time

from dmqtt.client import Backoff
from dmqtt.errors import MQTTError, QueueFull

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


_STEP_MS = const(50)  # publish(): how long to serve between two tries while every slot is in flight


class Supervisor:
    """Keeps `client` (an MQTTClient, opened or not) connected through `transport_factory()` (`lambda:
    TCPTransport(host, port)`), subscribed to `subscriptions` ((topic, qos) pairs), and its acknowledgements read.

    on_error(exc): a connection attempt failed or a connection was lost (`last_error` keeps the last); the next
    attempt follows `backoff` (capped exponential with jitter). A connection attempt blocks for at most the
    transport's own connect timeout and the client's CONNACK wait."""

    def __init__(self, client, transport_factory, subscriptions=(), backoff=None):
        self.client = client
        self.factory = transport_factory
        self.subscriptions = subscriptions
        self.backoff = backoff or Backoff()
        self.on_error = None
        self.last_error = None

    def serve(self, ms):
        """serve_until(now + ms)."""
        self.serve_until(time.ticks_add(time.ticks_ms(), ms))

    def serve_until(self, deadline):
        """Until the ticks_ms() value `deadline` (not earlier, whatever arrives): connect when the backoff allows,
        read and send what the connection has, keep it alive."""
        c = self.client
        while True:
            now = time.ticks_ms()
            left = time.ticks_diff(deadline, now)
            if not c.connected:
                wait = self.backoff.due()
                if not wait:
                    self._connect()
                    continue
                if left <= 0:
                    return
                time.sleep_ms(min(left, wait))
                continue
            try:
                c.poll(max(0, left))
            except (OSError, MQTTError) as exc:
                self._failed(exc)
            if left <= 0:
                return

    def publish(self, topic, payload, qos=0, retain=False, mark=None, timeout_ms=10000):
        """MQTTClient.publish, served: while every slot is in flight (QoS 1/2), or while no connection is up
        (QoS 0), the connection is served and the publish tried again until timeout_ms has passed; then QueueFull
        (QoS 1/2) or MQTTError (QoS 0) as the client raises it. PublishRefused at once."""
        c = self.client
        end = time.ticks_add(time.ticks_ms(), timeout_ms)
        while True:
            try:
                return c.publish(topic, payload, qos, retain, mark)
            except QueueFull:
                if time.ticks_diff(end, time.ticks_ms()) <= 0:
                    raise
            except MQTTError as exc:  # QoS 0 without a connection, or one lost under the write
                if c.connected:
                    self._failed(exc)
                if time.ticks_diff(end, time.ticks_ms()) <= 0:
                    raise
            self._serve_step(end)

    def drain(self, timeout_ms):
        """Serve until every QoS 1/2 message is acknowledged or timeout_ms has passed; how many are left (they
        stay journaled)."""
        c = self.client
        end = time.ticks_add(time.ticks_ms(), timeout_ms)
        while c.outstanding() and time.ticks_diff(end, time.ticks_ms()) > 0:
            self._serve_step(end)
        return c.outstanding()

    def _serve_step(self, end):
        """Serve for _STEP_MS, or until `end` when that is sooner."""
        now = time.ticks_ms()
        self.serve_until(time.ticks_add(now, max(0, min(_STEP_MS, time.ticks_diff(end, now)))))

    def _connect(self):
        c = self.client
        try:
            present = c.connect(self.factory())
            if not present:
                for topic, qos in self.subscriptions:
                    c.subscribe(topic, qos)
        except (OSError, MQTTError) as exc:
            self._failed(exc)
            self.backoff.next_ms()
            return
        self.backoff.reset()

    def _failed(self, exc):
        self.client.close()
        self.last_error = exc
        if self.on_error is not None:
            self.on_error(exc)
