# The asyncio face of the durable client: the blocking client's protocol, session and journal (dmqtt.client,
# dmqtt.session), driven by tasks instead of by calls that wait, so that an application's other tasks (its
# sensors, a web page) keep their schedule. The API follows what MicroPython users know from mqtt_as: await
# connect(), await publish(), an async iterator of incoming messages, `up` and `down` events, reconnection with
# backoff as a task of its own, close().
#
# It drives the blocking client through the members dmqtt/interfaces.py names (Engine: the output buffer, the
# steps of a connection, sending without blocking), not through its private ones.
#
# The face waits on the socket. Over TCP (plain or TLS: the transport's `selectable` is the TCP socket under
# both) one task per connection waits until the socket is readable, reads and handles what came, and sends what
# that freed; a second wakes only when a packet could not be sent whole, and waits until the socket is writable;
# the connection task sleeps until the next timer (keep-alive, a write stalled, confirmation's upkeep) or until
# the connection is lost. An idle client therefore wakes once per keep-alive period (`wakes` counts). The wait is
# MicroPython asyncio's poll registration (the IO queue its streams use: the TLS object's own poll sleeps in
# 1 ms steps, so the TCP socket is registered and the transport's wait(0) covers a record mbedTLS holds); on
# CPython the event loop's add_reader/add_writer. A transport without `selectable` (the serial link, whose
# timers are its own; a test's fake) is polled: every 1 ms while flows are in flight, idle_ms otherwise.
# What still takes the CPU for a while: opening a transport (TCP connect, TLS handshake, the serial link's open
# request) and each flash program, since publish() returns once the message is on flash.
#
# Incoming messages are acknowledged when the application is done with them, not when they are queued: the
# session defers (Session.defer). A QoS 2 message is journaled on arrival, handed to the iterator, and marked
# handled when the application comes back for the next message (the body of its `async for` has returned); a
# power cut before that brings it again after the reboot (dup set). A QoS 1 message is acknowledged at the same
# point (at least once). docs/client.md states the contract.

import asyncio
import time

from dmqtt import codec
from dmqtt import journal_record as rec
from dmqtt.client import CONNECTED, Backoff, MQTTClient, elapsed, ticks_ms
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
    _within = asyncio.wait_for_ms
except AttributeError:  # CPython's asyncio (the host's tests)

    async def _sleep_ms(ms):
        await asyncio.sleep(ms / 1000)

    def _within(awaitable, ms):
        return asyncio.wait_for(awaitable, ms / 1000)


try:
    from asyncio import core as _core  # type: ignore[attr-defined]  # MicroPython's scheduler: its IO queue polls the sockets tasks wait on

    async def _io_wait(sock, write):
        """Until `sock` is writable (write) or readable: the task is parked in the scheduler's poll."""
        queue = _core._io_queue  # (each new event loop makes its own: looked up at every wait)
        if write:
            yield queue.queue_write(sock)
        else:
            yield queue.queue_read(sock)

except ImportError:  # CPython: the event loop's reader and writer callbacks

    async def _io_wait(sock, write):  # type: ignore[misc]
        loop = asyncio.get_running_loop()  # type: ignore[attr-defined]
        ready = loop.create_future()
        add, remove = (loop.add_writer, loop.remove_writer) if write else (loop.add_reader, loop.remove_reader)
        fd = sock.fileno()  # (the number, not the socket: a socket closed meanwhile has none to unregister by)
        add(fd, lambda: ready.done() or ready.set_result(None))
        try:
            await ready
        finally:
            remove(fd)


_BUSY_MS = const(1)  # a polled transport: between polls while flows are in flight or messages wait
_ACK_TIMEOUT_MS = const(10000)  # CONNACK, SUBACK
_HOLD_MS = const(5000)  # a connection without a session waits this long for the application (_open)
_HELD = const(2)  # Session.rx_handled: the application has the message and has not said it is done
_WIFI_MS = const(50)  # between checks of a WiFi link that is down
_NO_TIMER_MS = const(600000)  # the connection task's longest sleep when no timer is due (keepalive 0)
_TEND_MS = const(1000)  # a confirming client's upkeep (timeouts, what the recorder says is missing) when idle
# An inbox entry, a tuple (docs/firmware-style.md, rule 4): what the application is given
# (topic, payload, qos, retain, dup: indices 0 to 4), then what _done() needs to release it.
_E_QOS = const(2)
_E_DUP = const(4)
_E_PID = const(5)  # the receive slot's packet id
_E_CONNECTION = const(6)  # client.connects when it arrived: a QoS 1 PUBACK only on that connection
_E_NUMBER = const(7)  # the receive number (message_number())
_HEAR_MS = const(500)  # settle(): how long the recorder's retained confirmation may take after the SUBACK


def _deferring(base):
    """The session `base` (Session, or confirmation's ConfirmingSession) with deferred acknowledgement: an incoming
    QoS 2 message is journaled (RX) and handed to the application as the blocking client does, but it is handled
    when the application says so (handled()), not when on_message returns; a PUBREL that comes before is answered
    then (PUBCOMP waits). Everything else is the blocking client's session, so both faces keep the same receive
    contract (docs/client.md). A class made per base, not a mixin: MicroPython's super() does not follow a
    diamond's method order."""

    class DeferringSession(base):  # type: ignore[valid-type,misc]
        defer = True  # QoS 1: PUBACK when the application is done (puback())

        def __init__(self, store, version, window, max_messages, rx_max):
            base.__init__(self, store, version, window, max_messages, rx_max)
            self._rx_rel = bytearray(rx_max)  # PUBREL came while the application held the message

        def hand_over(self, j, topic, payload, retain, dup):
            self.rx_pid = self.rx_pids[j]
            if self.on_message is not None:
                self.on_message(topic, bytes(payload), 2, retain, dup)
            self.rx_handled[j] = _HELD

        def handle(self, ptype, flags, body):
            if ptype == codec.PUBREL:
                j = self.rx_find(codec.check_ack(ptype, body, self.version))
                if j >= 0 and not self.rx_handled[j]:
                    from dmqtt import inbox

                    inbox.deliver(self, j)  # (the application did not have it yet): it gets it now
                if j >= 0 and self.rx_handled[j] == _HELD:
                    self._rx_rel[j] = 1  # answered once the application is done with it
                    return
            base.handle(self, ptype, flags, body)

        def connected(self, session_present, receive_max=65535, max_qos=2, retain_available=True, topic_aliases=0):
            for j in range(len(self._rx_rel)):
                self._rx_rel[j] = 0  # a PUBREL of the last connection comes again on this one [MQTT-4.4.0-1]
            base.connected(self, session_present, receive_max, max_qos, retain_available, topic_aliases)

        def handled(self, pid):
            """The application is done with incoming QoS 2 message `pid`: journaled as handled, or, when its
            PUBREL has come already, released (RXDONE, then PUBCOMP)."""
            j = self.rx_find(pid)
            if j < 0 or self.rx_handled[j] != _HELD:
                return
            if self._rx_rel[j] and self.connected_now:
                from dmqtt import inbox  # (loaded already: the message came through it)

                inbox.release(self, j)
            else:
                self.rx_addr[j] = self.journal_pid(rec.HANDLED, pid)
                self.rx_handled[j] = 1  # a PUBREL (again, after a reconnect) releases it

        def puback(self, pid):
            """The application is done with incoming QoS 1 message `pid` (of the current connection)."""
            self.owe(codec.PUBACK, pid, codec.SUCCESS)

        def holding(self):
            """Incoming QoS 2 messages the application holds."""
            n = 0
            for j in range(len(self.rx_pids)):
                if self.rx_pids[j] and self.rx_handled[j] == _HELD:
                    n += 1
            return n

    return DeferringSession


class _Client(MQTTClient):
    _Session = _deferring(Session)
    blocking = False


def _confirming_client():
    """The client with end-to-end confirmation (dmqtt.confirm, loaded only for it) and the deferring session."""
    from dmqtt.confirm import ConfirmingClient, ConfirmingSession

    class Confirming(ConfirmingClient):
        _Session = _deferring(ConfirmingSession)
        blocking = False

    return Confirming


class AsyncClient:
    """The durable client for asyncio apps. `options` are MQTTClient's (version, keepalive, window, ...); the
    blocking client underneath is `client` (its counters, `mark`, `outstanding()`; leave its hooks alone).

    Events (asyncio.Event, set by the client, cleared by the application, as mqtt_as has them): `up`, a
    connection was made; `down`, one was lost (the broker's, or the WiFi's under it).

    `wifi`: dmqtt.wifi once started (wifi.start(ssid, password)), for a board on WiFi: no connection is tried
    while the link is down, and the link is rejoined with its backoff (its on_up/on_down hooks say when).

    `confirm_topic`: end-to-end confirmation by the recorder (docs/confirmation.md), as ConfirmingClient has it:
    `epoch` names this boot's messages (the telemetry's boot), `timeout_s` and `hold` as there. The client
    subscribes to confirm_topic at each connection; `unconfirmed()` counts what the store has not confirmed.

    `wakes`: how often the connection's tasks have resumed (what an idle client costs the CPU)."""

    def __init__(
        self,
        client_id,
        store,
        idle_ms=20,
        queue_max=16,
        wifi=None,
        confirm_topic=None,
        epoch=0,
        timeout_s=30,
        hold=False,
        **options,
    ):
        if confirm_topic is None:
            c = self.client = _Client(client_id, store, **options)
        else:
            c = self.client = _confirming_client()(client_id, store, confirm_topic, epoch, timeout_s, hold, **options)
        self._session: Any = c.session  # a deferring session (_deferring)
        self.confirm_topic = confirm_topic
        c.on_message = self._arrived
        c.on_disconnect = self._lost
        c.on_published = self._ended
        self.idle_ms = idle_ms
        self.wifi = wifi
        self.queue_max = queue_max  # QoS 0 messages beyond this many waiting are dropped (counted)
        self.dropped = 0
        self.wakes = 0
        self.last_error = None  # why the last connection attempt failed or the last connection ended
        self.up = asyncio.Event()
        self.down = asyncio.Event()
        self._ready = asyncio.Event()  # connected now
        self._gone = asyncio.Event()  # the connection ended (wakes the connection task)
        self._input = asyncio.Event()  # the connection read something, or ended (SUBACK waits)
        self._unsent = asyncio.Event()  # a packet was not sent whole (wakes the writer)
        self._sent = asyncio.Event()  # the output buffer is empty again, or the connection ended
        self._news = asyncio.Event()  # a message arrived, or the client closed
        self._room = asyncio.Event()  # a flow ended: a slot may be free
        self._inbox = []  # entries: (topic, payload, qos, retain, dup, pid, connection, receive number): _E_*
        self._holding = None  # the message the application was last given
        self._subs = []  # (topic, qos): subscribed again when a connection finds no session
        self._factory: Any = None  # opens a transport (connect())
        self._task: Any = None
        self._io: list = []  # the connection's reader and writer tasks
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
        self._stop_io()
        c = self.client
        c.flush()
        c.blocking = True  # from here on every write completes: the rest of a packet, then DISCONNECT
        if c.state == CONNECTED:
            try:
                c.send_pending(True)
            except MQTTError:
                return  # the connection ended under it: closed already
            c.disconnect()
        else:
            c.close()

    async def _run(self):
        c = self.client
        backoff = Backoff()
        while True:
            if self.wifi is not None and not self.wifi.check():
                await _sleep_ms(_WIFI_MS)  # no link: nothing to try until the supervision has it back
                continue
            try:
                present = await self._open()
                backoff.reset()
                sock = getattr(c.transport, "selectable", None)
                self._io.append(asyncio.create_task(self._read(sock)))
                if sock is not None:
                    self._io.append(asyncio.create_task(self._write(sock)))
                if self.confirm_topic is not None:
                    await self._subscribe(self.confirm_topic, 0)  # the recorder's retained confirmation comes
                if not present:
                    for topic, qos in self._subs:
                        await self._subscribe(topic, qos)
                self.up.set()
                self._ready.set()
                while c.state == CONNECTED:
                    self._gone.clear()
                    try:
                        await _within(self._gone.wait(), self._timer_ms())
                    except asyncio.TimeoutError:
                        self._tick()
            except (OSError, MQTTError, MemoryError) as exc:
                # (MemoryError: a connection's steps allocate, the transport's among them. The heap that ran out
                # may have room again after this attempt's objects are gone; a task that ended here would never
                # connect again.)
                c.close()
                self.last_error = str(exc)
                self._stop_io()
                await _sleep_ms(backoff.next_ms())
                continue
            self._stop_io()

    def _stop_io(self):
        """End the connection's reader and writer (waiting on a socket that is closed, or on an event). Not awaited:
        a task that awaited them would take their CancelledError for its own, and close() would not stop it."""
        for task in self._io:
            if not task.done():
                task.cancel()
        self._io = []

    async def _open(self):
        """A transport, CONNECT, CONNACK: the session-present flag."""
        c = self.client
        transport = self._factory()
        sock = getattr(transport, "selectable", None)
        try:
            c.send_connect(transport)
            start = ticks_ms()
            present = None
            while present is None:
                left = _ACK_TIMEOUT_MS - elapsed(start)
                if left <= 0:
                    c.fail("no answer from the broker within %d ms" % _ACK_TIMEOUT_MS, None)
                if sock is None:
                    await _sleep_ms(_BUSY_MS)
                else:
                    try:
                        await _within(_io_wait(sock, c.tx_tail != c.tx_end), left)
                    except asyncio.TimeoutError:
                        pass
                c.send_pending(False)
                present = c.take_connack()
            if not present:
                # The broker has no session: the session releases every incoming id (Session.connected). What
                # the application holds is journaled as handled first, so that a cut cannot lose it, if the
                # application finishes with it within _HOLD_MS (an application that awaits connect() before it
                # iterates cannot: then the ids are released, and the messages stay in the inbox).
                start = ticks_ms()
                while self._session.holding() and elapsed(start) < _HOLD_MS:
                    await _sleep_ms(_BUSY_MS)
            c.establish(present)
        except MQTTError:
            c.connect_failures += 1
            raise
        return present

    async def _read(self, sock):
        """The connection's input: wait until the socket is readable (or, polled, sleep), then read, handle and
        send what that allows. Ends with the connection."""
        c = self.client
        transport = c.transport
        rounds = 0
        while True:
            try:
                c.poll(0)
            except (OSError, MQTTError, MemoryError):
                # (MemoryError: what came could not be taken in. The connection ends, and the broker sends again
                # what it has not had acknowledged; a reader that ended alone would leave the connection deaf.)
                c.close()  # told to _lost()
                return
            self._input.set()
            if c.tx_tail != c.tx_end:
                self._unsent.set()
            else:
                self._sent.set()
            rounds += 1
            if sock is not None and rounds < 8 and transport.wait(0):  # (wait(0): also a TLS record mbedTLS holds)
                continue  # more input waiting: read on without a trip through the scheduler (8 rounds at most)
            rounds = 0
            busy = c.outstanding() or self._inbox or self._holding is not None
            if not busy:
                c.session.journal.tend()  # idle: the ring opens and erases ahead here, not in a publish()
            if sock is None:
                await _sleep_ms(0 if c.tx_tail != c.tx_end else _BUSY_MS if busy else self.idle_ms)
            else:
                await _io_wait(sock, False)
            self.wakes += 1

    async def _write(self, sock):
        """The rest of a packet the socket did not take whole: wait until it is writable, then send it and what the
        session has ready behind it."""
        c = self.client
        while True:
            self._unsent.clear()
            await self._unsent.wait()
            while c.tx_tail != c.tx_end and c.state == CONNECTED:
                await _io_wait(sock, True)
                self.wakes += 1
                try:
                    c.pump()
                except (OSError, MQTTError):
                    c.close()
                    return
            self._sent.set()

    def _timer_ms(self):
        """Until the connection's next timer: a PINGREQ due, a PINGRESP overdue, a stalled write to check,
        confirmation's upkeep."""
        c = self.client
        ms = _NO_TIMER_MS
        if c.keepalive:
            period = c.keepalive * 1000
            if c.ping_at >= 0:
                ms = period - elapsed(c.ping_at)
            else:
                ms = period * 3 // 4 - elapsed(c.last_tx)
        if c.tx_tail != c.tx_end or self.confirm_topic is not None:
            ms = min(ms, _TEND_MS)
        return max(1, ms + 1)

    def _tick(self):
        c = self.client
        self.wakes += 1
        try:
            c.send_pending(False)  # (a write that has taken nothing for the client's stall limit fails here)
            if self.confirm_topic is not None:
                self._session.tend()  # timeouts, what the recorder says is missing
                c.pump()
            c.ping_if_due()
        except (OSError, MQTTError):
            c.close()
            return
        if c.tx_tail != c.tx_end:
            self._unsent.set()

    def _lost(self, code, reason):
        self.last_error = reason
        self._ready.clear()
        self.down.set()
        self._gone.set()
        self._input.set()
        self._sent.set()

    def _ended(self, pid, code):
        self._room.set()

    def unconfirmed(self):
        """With confirm_topic: messages accepted and not yet confirmed by the recorder (in flight ones included)."""
        return self.client.unconfirmed()  # type: ignore[operator]  # (a ConfirmingClient's)

    # -- application -----------------------------------------------------------------------------------------

    async def publish(self, topic, payload, qos=0, retain=False, mark=None):
        """QoS 0: sent once connected. QoS 1/2: returns the packet id once the message is on flash (also while
        disconnected: the offline queue), waiting without blocking while every slot is in flight. Raises
        PublishRefused for a message that can never be sent."""
        c = self.client
        session = c.session
        while True:
            if qos == 0:
                await self._writable()
            elif session.full():
                # (waited for here, not by catching the client's QueueFull: an exception per message costs more
                # than the message when acknowledgements free one slot at a time)
                self._room.clear()
                await self._room.wait()
                continue
            try:
                pid = c.publish(topic, payload, qos, retain, mark)
            except QueueFull:
                self._room.clear()
                await self._room.wait()
                continue
            except MQTTError:
                c.close()  # QoS 0 met a lost connection: sent again on the next one
                continue
            if c.tx_tail != c.tx_end:
                self._unsent.set()
            return pid

    async def subscribe(self, topic, qos=1):
        """Subscribe now (when connected) and again on every connection that finds no session; returns the
        granted QoS, or None when not connected yet."""
        codec.check_sub_options(qos, self.client.version)  # (now: a subscription kept for later is sent later)
        self._subs = [s for s in self._subs if s[0] != topic] + [(topic, qos)]
        if self.connected:
            return await self._subscribe(topic, qos)
        return None

    async def _subscribe(self, topic, qos):
        await self._writable()
        c = self.client
        pid = c.session.allocate_pid()
        c.write_packet(codec.encode_subscribe(pid, [(topic, qos)], c.version, None, c.tx_buf))
        if c.tx_tail != c.tx_end:
            self._unsent.set()
        start = ticks_ms()
        while pid not in c.acks:
            if not self.connected:
                raise MQTTError("connection lost before SUBACK")
            left = _ACK_TIMEOUT_MS - elapsed(start)
            if left <= 0:
                raise MQTTError("no SUBACK within %d ms" % _ACK_TIMEOUT_MS)
            self._input.clear()
            try:
                await _within(self._input.wait(), left)
            except asyncio.TimeoutError:
                pass
        return c.acks.pop(pid)[0]

    async def wait_idle(self):
        """Until every QoS 1/2 message accepted so far is acknowledged."""
        while self.client.outstanding():
            self._room.clear()
            await self._room.wait()

    async def settle(self, timeout_ms):
        """End a wake before deep sleep (docs/low-power.md): until every QoS 1/2 message is acknowledged (the
        connection task reconnecting meanwhile) or timeout_ms has passed, then close(). With confirmation, the
        recorder's retained confirmation is awaited too, and what it says is missing goes first. Returns how many
        are left: they stay journaled and go at the next connection."""
        end = time.ticks_add(ticks_ms(), timeout_ms)
        try:
            await _within(self.wait_idle(), timeout_ms)
            if self.confirm_topic is not None:
                await self._hear(end)
        except asyncio.TimeoutError:
            pass
        await self.close()
        return self.client.outstanding()

    async def _hear(self, end):
        """The recorder's retained confirmation (ConfirmingClient.settle's rule): it follows the SUBACK, so it has
        come by now or within a moment; then what it says is missing, sent and acknowledged."""
        c = self.client
        session: Any = c.session
        hear = time.ticks_add(ticks_ms(), _HEAR_MS)
        while session.stamp < 0 and time.ticks_diff(hear, ticks_ms()) > 0 and self.connected:
            await _sleep_ms(20)
        session.tend()
        if self.connected:
            c.pump()
        await _within(self.wait_idle(), max(1, time.ticks_diff(end, ticks_ms())))

    async def _writable(self):
        c = self.client
        while c.state != CONNECTED or c.tx_tail != c.tx_end:
            if c.state != CONNECTED:
                await self._ready.wait()
            else:
                self._sent.clear()
                self._unsent.set()
                await self._sent.wait()

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
        return m[: _E_DUP + 1]  # (topic, payload, qos, retain, dup)

    def message_number(self):
        """The receive number of the message the loop last gave (MQTTClient.message_number): keep it with the
        message's effect, and skip a message whose number is the one kept."""
        return self._holding[_E_NUMBER] if self._holding else 0

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
        if m[_E_QOS] == 2:
            self._session.handled(m[_E_PID])
        elif m[_E_QOS] == 1 and c.state == CONNECTED and m[_E_CONNECTION] == c.connects:
            self._session.puback(m[_E_PID])  # on another connection the broker sends it again instead
