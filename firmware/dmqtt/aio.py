# The asyncio face of the durable client: the blocking client's protocol, session and journal (dmqtt.client,
# dmqtt.session), driven by a task instead of by calls that wait, so that an application's other tasks (its
# sensors, a web page) keep their schedule. The API follows what MicroPython users know from mqtt_as: await
# connect(), await publish(), an async iterator of incoming messages, `up` and `down` events, reconnection with
# backoff as a task of its own, close().
#
# Nothing here waits on a socket. The connection task polls the client without blocking (poll(0); writes that
# leave the unsent tail of a packet for the next round) and sleeps between rounds: 0 ms while a packet is half
# sent, 1 ms while flows are in flight or messages wait for the application, idle_ms otherwise. mqtt_as polls its
# socket the same way: MicroPython's asyncio cannot wait on a TLS socket's buffered records or on the serial
# link's timers. What still takes the CPU for a while: opening a transport (TCP connect, TLS handshake, the
# serial link's open request) and each flash program, since publish() returns once the message is on flash.
#
# Incoming messages are acknowledged when the application is done with them, not when they are queued: the
# session defers (Session.defer). A QoS 2 message is journaled on arrival, handed to the iterator, and marked
# handled when the application comes back for the next message (the body of its `async for` has returned); a
# power cut before that brings it again after the reboot (dup set). A QoS 1 message is acknowledged at the same
# point (at least once). docs/client.md states the contract.

import asyncio

from dmqtt import codec
from dmqtt import journal_record as rec
from dmqtt.client import CONNECTED, Backoff, MQTTClient, _elapsed, _ticks_ms
from dmqtt.errors import MQTTError, QueueFull
from dmqtt.session import Session

if False:  # type checkers only: MicroPython has no typing module
    from typing import Any

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


try:
    _sleep_ms = asyncio.sleep_ms
except AttributeError:  # CPython's asyncio (the host's tests)

    async def _sleep_ms(ms):
        await asyncio.sleep(ms / 1000)


_BUSY_MS = const(1)  # between polls while flows are in flight or messages wait for the application
_ACK_TIMEOUT_MS = const(10000)  # CONNACK, SUBACK
_HOLD_MS = const(5000)  # a connection without a session waits this long for the application (_open)
_HELD = const(2)  # Session._rx_handled: the application has the message and has not said it is done
_WIFI_MS = const(50)  # between checks of a WiFi link that is down


class _DeferringSession(Session):
    """The session with deferred acknowledgement: an incoming QoS 2 message is journaled (RX) and handed to the
    application as the blocking client does, but it is handled when the application says so (handled()), not
    when on_message returns; a PUBREL that comes before is answered then (PUBCOMP waits). Everything else is
    the blocking client's session, so both faces keep the same receive contract (docs/client.md)."""

    defer = True  # QoS 1: PUBACK when the application is done (puback())

    def __init__(self, store, version, window, max_messages, rx_max):
        super().__init__(store, version, window, max_messages, rx_max)
        self._rx_rel = bytearray(rx_max)  # PUBREL came while the application held the message

    def _handle(self, j, topic, payload, retain, dup):
        self.rx_pid = self._rx_pid[j]
        if self.on_message is not None:
            self.on_message(topic, bytes(payload), 2, retain, dup)
        self._rx_handled[j] = _HELD

    def handle(self, ptype, flags, body):
        if ptype == codec.PUBREL:
            j = self._rx_find(codec.check_ack(ptype, body, self.version))
            if j >= 0 and not self._rx_handled[j]:
                from dmqtt import inbox

                inbox.deliver(self, j)  # (the application did not have it yet): it gets it now
            if j >= 0 and self._rx_handled[j] == _HELD:
                self._rx_rel[j] = 1  # answered once the application is done with it
                return
        Session.handle(self, ptype, flags, body)

    def connected(self, session_present, receive_max=65535, max_qos=2, retain_available=True, topic_aliases=0):
        for j in range(len(self._rx_rel)):
            self._rx_rel[j] = 0  # a PUBREL of the last connection comes again on this one [MQTT-4.4.0-1]
        super().connected(session_present, receive_max, max_qos, retain_available, topic_aliases)

    def handled(self, pid):
        """The application is done with incoming QoS 2 message `pid`: journaled as handled, or, when its PUBREL
        has come already, released (RXDONE, then PUBCOMP)."""
        j = self._rx_find(pid)
        if j < 0 or self._rx_handled[j] != _HELD:
            return
        if self._rx_rel[j] and self.connected_now:
            from dmqtt import inbox  # (loaded already: the message came through it)

            inbox.release(self, j)
        else:
            self._rx_addr[j] = self._journal_pid(rec.HANDLED, pid)
            self._rx_handled[j] = 1  # a PUBREL (again, after a reconnect) releases it

    def puback(self, pid):
        """The application is done with incoming QoS 1 message `pid` (of the current connection)."""
        self._owe(codec.PUBACK, pid, codec.SUCCESS)

    def holding(self):
        """Incoming QoS 2 messages the application holds."""
        n = 0
        for j in range(len(self._rx_pid)):
            if self._rx_pid[j] and self._rx_handled[j] == _HELD:
                n += 1
        return n


class _Client(MQTTClient):
    _Session = _DeferringSession
    blocking = False


class AsyncClient:
    """The durable client for asyncio apps. `options` are MQTTClient's (version, keepalive, window, ...); the
    blocking client underneath is `client` (its counters, `mark`, `outstanding()`; leave its hooks alone).

    Events (asyncio.Event, set by the client, cleared by the application, as mqtt_as has them): `up`, a
    connection was made; `down`, one was lost (the broker's, or the WiFi's under it).

    `wifi`: dmqtt.wifi once started (wifi.start(ssid, password)), for a board on WiFi: no connection is tried
    while the link is down, and the link is rejoined with its backoff (its on_up/on_down hooks say when)."""

    def __init__(self, client_id, store, idle_ms=20, queue_max=16, wifi=None, **options):
        c = self.client = _Client(client_id, store, **options)
        self._session: _DeferringSession = c.session  # type: ignore[assignment]  # what _Client makes
        c.on_message = self._arrived
        c.on_disconnect = self._lost
        c.on_published = self._ended
        self.idle_ms = idle_ms
        self.wifi = wifi
        self.queue_max = queue_max  # QoS 0 messages beyond this many waiting are dropped (counted)
        self.dropped = 0
        self.last_error = None  # why the last connection attempt failed or the last connection ended
        self.up = asyncio.Event()
        self.down = asyncio.Event()
        self._ready = asyncio.Event()  # connected now
        self._news = asyncio.Event()  # a message arrived, or the client closed
        self._room = asyncio.Event()  # a flow ended: a slot may be free
        self._inbox = []  # (topic, payload, qos, retain, dup, pid, connection)
        self._holding = None  # the message the application was last given
        self._subs = []  # (topic, qos): subscribed again when a connection finds no session
        self._factory: Any = None  # opens a transport (connect())
        self._task: Any = None
        self._closed = False
        self.notes = c.open()  # the journal replayed: interrupted QoS 2 messages are in the inbox already

    # -- connection ------------------------------------------------------------------------------------------

    @property
    def connected(self):
        return self.client.connected

    async def connect(self, transport_factory):
        """Start the connection task (it reconnects with backoff until close()) and wait until the first
        connection is up. transport_factory() opens a transport: `lambda: TCPTransport(host, port)`."""
        if self._task is None:
            self._factory = transport_factory
            self._task = asyncio.create_task(self._run())
        await self._ready.wait()

    async def close(self):
        """Stop the connection task, send DISCONNECT, end the iterators. Messages the application still holds
        are not marked done: they come again after the next boot."""
        self._closed = True
        self._news.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        c = self.client
        c.flush()
        c.blocking = True  # from here on every write completes: the rest of a packet, then DISCONNECT
        if c.state == CONNECTED:
            try:
                c._drain(True)
            except MQTTError:
                return  # the connection ended under it: closed already
            c.disconnect()
        else:
            c.close()

    async def _run(self):
        c = self.client
        backoff = Backoff()
        while True:
            if c.state != CONNECTED:
                if self.wifi is not None and not self.wifi.check():
                    await _sleep_ms(_WIFI_MS)  # no link: nothing to try until the supervision has it back
                    continue
                try:
                    await self._open()
                    backoff.reset()
                except (OSError, MQTTError) as exc:
                    c.close()
                    self.last_error = str(exc)
                    await _sleep_ms(backoff.next_ms())
                continue
            try:
                c.poll(0)
            except (OSError, MQTTError):
                c.close()  # told to _lost() by the client
                continue
            if c._tail != c._end:  # a packet half sent
                await _sleep_ms(0)
            elif c.outstanding() or self._inbox or self._holding is not None:
                await _sleep_ms(_BUSY_MS)
            else:
                c.session.journal.tend()  # idle: the ring opens and erases ahead here, not inside a publish()
                await _sleep_ms(self.idle_ms)

    async def _open(self):
        c = self.client
        transport = self._factory()
        try:
            c._send_connect(transport)
            start = _ticks_ms()
            present = None
            while present is None:
                if _elapsed(start) > _ACK_TIMEOUT_MS:
                    c._fail("no answer from the broker within %d ms" % _ACK_TIMEOUT_MS, None)
                await _sleep_ms(_BUSY_MS)
                c._drain(False)
                present = c._take_connack()
            if not present:
                # The broker has no session: the session releases every incoming id (Session.connected). What
                # the application holds is journaled as handled first, so that a cut cannot lose it, if the
                # application finishes with it within _HOLD_MS (an application that awaits connect() before it
                # iterates cannot: then the ids are released, and the messages stay in the inbox).
                start = _ticks_ms()
                while self._session.holding() and _elapsed(start) < _HOLD_MS:
                    await _sleep_ms(_BUSY_MS)
            c._establish(present)
        except MQTTError:
            c.connect_failures += 1
            raise
        if not present:
            for topic, qos in self._subs:
                await self._subscribe(topic, qos)
        self.up.set()
        self._ready.set()

    def _lost(self, code, reason):
        self.last_error = reason
        self._ready.clear()
        self.down.set()

    def _ended(self, pid, code):
        self._room.set()

    # -- application -----------------------------------------------------------------------------------------

    async def publish(self, topic, payload, qos=0, retain=False, mark=None):
        """QoS 0: sent once connected. QoS 1/2: returns the packet id once the message is on flash (also while
        disconnected: the offline queue), waiting without blocking while every slot is in flight. Raises
        PublishRefused for a message that can never be sent."""
        c = self.client
        while True:
            if qos == 0:
                await self._writable()
            try:
                return c.publish(topic, payload, qos, retain, mark)
            except QueueFull:
                self._room.clear()
                await self._room.wait()
            except MQTTError:
                c.close()  # QoS 0 met a lost connection: sent again on the next one

    async def subscribe(self, topic, qos=1):
        """Subscribe now (when connected) and again on every connection that finds no session; returns the
        granted QoS, or None when not connected yet."""
        self._subs = [s for s in self._subs if s[0] != topic] + [(topic, qos)]
        if self.connected:
            return await self._subscribe(topic, qos)
        return None

    async def _subscribe(self, topic, qos):
        await self._writable()
        c = self.client
        pid = c.session.allocate_pid()
        c._write(codec.encode_subscribe(pid, [(topic, qos)], c.version, None, c._out))
        start = _ticks_ms()
        while pid not in c._acks:
            if not self.connected:
                raise MQTTError("connection lost before SUBACK")
            if _elapsed(start) > _ACK_TIMEOUT_MS:
                raise MQTTError("no SUBACK within %d ms" % _ACK_TIMEOUT_MS)
            await _sleep_ms(_BUSY_MS)
        return c._acks.pop(pid)[0]

    async def wait_idle(self):
        """Until every QoS 1/2 message accepted so far is acknowledged."""
        while self.client.outstanding():
            self._room.clear()
            await self._room.wait()

    async def settle(self, timeout_ms):
        """End a wake before deep sleep (docs/low-power.md): until every QoS 1/2 message is acknowledged (the
        connection task reconnecting meanwhile) or timeout_ms has passed, then close(). Returns how many are left:
        they stay journaled and go at the next connection."""
        try:
            await asyncio.wait_for(self.wait_idle(), timeout_ms / 1000)
        except asyncio.TimeoutError:
            pass
        await self.close()
        return self.client.outstanding()

    async def _writable(self):
        c = self.client
        while c.state != CONNECTED or c._tail != c._end:
            if c.state != CONNECTED:
                await self._ready.wait()
            else:
                await _sleep_ms(0)

    # -- incoming messages -----------------------------------------------------------------------------------

    def messages(self):
        """`async for topic, payload, qos, retain, dup in client.messages():` every incoming message. One
        message is done when the loop comes back for the next: QoS 2 is then journaled as handled, QoS 1
        acknowledged. The loop ends at close()."""
        return self

    def __aiter__(self):
        return self

    async def __anext__(self):
        self._done()
        while not self._inbox:
            if self._closed:
                raise StopAsyncIteration
            self._news.clear()
            await self._news.wait()
        m = self._holding = self._inbox.pop(0)
        return m[0], m[1], m[2], m[3], m[4]

    def message_number(self):
        """The receive number of the message the loop last gave (MQTTClient.message_number): keep it with the
        message's effect, and skip a message whose number is the one kept."""
        return self._holding[7] if self._holding else 0

    def _arrived(self, topic, payload, qos, retain, dup):
        if qos == 0 and len(self._inbox) >= self.queue_max:
            self.dropped += 1  # at most once: the application is behind
            return
        self._inbox.append(
            (topic, payload, qos, retain, dup, self._session.rx_pid, self.client.connects, self._session.rx_number)
        )
        self._news.set()

    def _done(self):
        """The application is done with the message it was last given."""
        m = self._holding
        if m is None:
            return
        self._holding = None
        c = self.client
        if m[2] == 2:
            self._session.handled(m[5])
        elif m[2] == 1 and c.state == CONNECTED and m[6] == c.connects:
            self._session.puback(m[5])  # on another connection the broker sends it again instead
