# The MQTT client, the firmware's whole public API: CONNECT with a persistent session, publish at QoS 0/1/2
# through the journaled session, subscribe, keep-alive, over any transport (dmqtt.transport, dlink.transport).
# The application sees only this class: hooks (on_connect, on_disconnect, on_message, on_published, as paho
# names them), the connection state, counters, and exceptions under DmqttError. The protocol layer raises
# MQTTError and closes the transport; reconnecting is the caller's, with Backoff (capped exponential, jitter).
#
# When publish() returns for QoS 1/2, the message is on flash; it is then sent as the window allows and resent
# after a reconnect or a reboot until the broker completes the flow.

import random
import time

if False:  # type checkers only: MicroPython has no typing module
    from dmqtt.interfaces import OnConnect, OnDisconnect, OnMessage, OnPublished, Transport

from dmqtt import codec
from dmqtt.errors import CodecError, MQTTError, ProtocolError, PublishRefused, QueueFull, explain
from dmqtt.session import Session

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


# Failures in words: numbers into client_text.TEXT, loaded only when one happens (_text; session.py has the rest).
# A connection's ordinary ends (closed, lost, a DISCONNECT, no CONNACK while the broker is away) keep their words
# here: they happen in a healthy run, and loading texts from the filesystem at each of them would cost more.
_T_NOT_CONNACK = const(0)
_T_REFUSED = const(1)
_T_TOO_LARGE = const(2)
_T_QOS0_OFFLINE = const(3)
_T_WINDOW_FULL = const(4)
_T_NO_SUBACK = const(5)
_T_NO_PINGRESP = const(6)
_T_PACKET_LARGE = const(7)
_T_STALLED = const(8)
_T_UNEXPECTED = const(9)
_T_NOT_CONNECTED = const(18)
_T_QOS = const(21)
_T_OUR_LIMIT = const(22)

_QOS_NOT_SUPPORTED = const(0x9B)  # MQTT 5.0's reason code, which PublishRefused carries for a QoS outside 0-2
_BASE_MS = const(500)  # Backoff's first delay, at most
_CAP_MS = const(30000)  # and its longest
_RX_MAX = const(16)  # our Receive Maximum for incoming QoS 1/2 (sent in a 5.0 CONNECT)

# Connection states (MQTTClient.state).
DISCONNECTED = const(0)
CONNECTING = const(1)  # CONNECT sent, no CONNACK yet
CONNECTED = const(2)


# A connection that takes no byte for this long is dead. Not shorter: a serial link on a noisy line (bit error
# rate 1e-3) can hold its window for a second or more while it retransmits, and that is not a reason to reconnect.
_WRITE_STALL_MS = const(10000)
_DECODER_START = const(128)
# Bytes taken from the transport at a time: a window's worth of acknowledgements (20 of 4 to 6 bytes) in one read.
_READ = const(128)


def _text(rule, arg=None):
    return explain("dmqtt.client_text", rule, arg)


def sleep_flags(on, off):
    """At a wake from deep sleep (MQTTClient.slept): set the flags `on` and clear the flags `off` in RTC memory's
    byte 0 (machine.RTC().memory(): kept through deep sleep, lost with the power), returning them as they were:
    0xD0 | a connection is up (1), a wake that slept with one up was said (2). dmqtt/wake.py lays out the rest of
    RTC memory and keeps this byte. Another high nibble: the application's own RTC memory (written without
    dmqtt.wake), left alone (0). Empty RTC memory (this boot's first write since the power came) is laid out."""
    import machine

    rtc = machine.RTC()
    memory = rtc.memory() or b"\xd0\x00\x00"
    if memory[0] & 0xF0 != 0xD0:
        return 0
    was = memory[0] & 0x0F
    if (was | on) & ~off != was:
        rtc.memory(bytes((0xD0 | ((was | on) & ~off),)) + memory[1:])
    return was


def ticks_ms():
    """The clock every timeout of the client runs on (the asyncio face's too)."""
    return time.ticks_ms()


def elapsed(since):
    """Milliseconds since the ticks_ms() value `since`, across the clock's wrap."""
    return time.ticks_diff(ticks_ms(), since)


class Backoff:
    """Reconnect delays: capped exponential with full jitter, so a fleet that lost its broker does not come
    back in lockstep."""

    # Defaults in the class: a Backoff whose connections never fail keeps no attributes (docs/firmware-style.md,
    # rule 1).
    base_ms = _BASE_MS
    cap_ms = _CAP_MS
    attempt = 0  # delays handed out since the last reset
    retry_at = None  # ticks_ms() of the next attempt, not before; None: at once

    def __init__(self, base_ms=_BASE_MS, cap_ms=_CAP_MS):
        if base_ms != _BASE_MS:
            self.base_ms = base_ms
        if cap_ms != _CAP_MS:
            self.cap_ms = cap_ms

    def next_ms(self):
        """The delay before the next attempt, which retry_at then keeps."""
        ceiling = min(self.cap_ms, self.base_ms << min(self.attempt, 16))
        self.attempt += 1
        delay = ceiling // 2 + random.getrandbits(16) * (ceiling // 2) // 65535
        self.retry_at = time.ticks_add(ticks_ms(), delay)
        return delay

    def due(self):
        """Milliseconds until the next attempt may start (0: now)."""
        return 0 if self.retry_at is None else max(0, time.ticks_diff(self.retry_at, ticks_ms()))

    def reset(self):
        # retry_at too: a time kept from long ago would read as the future once half the ticks period has passed.
        # Written only after a failure: an instance that never failed keeps the class's values (rule 1).
        if self.attempt:
            self.attempt = 0
            self.retry_at = None


class MQTTClient:
    """Hooks, each None or a callable, called from inside connect(), poll(), publish() and close():
      on_connect(session_present)            a CONNACK accepted the connection
      on_disconnect(code, reason)            a connection ended: code is the MQTT reason code (0 for our own
                                             clean DISCONNECT) or None when there is none (a dead socket)
      on_message(topic, payload, qos, retain, dup)   an incoming PUBLISH (QoS 2: once, even across reboots)
      on_published(pid, code)                a QoS 1/2 flow ended: code < 0x80 delivered, >= 0x80 refused
    Counters since this client was made: connects, reconnects (connects after the first), connect_failures,
    disconnects, received, published (QoS 1/2 flows completed), refused (publishes refused, by publish() or by
    the broker), retain_cleared (messages sent without their retain flag: the broker has no retain)."""

    # The session class: the asyncio face's client makes one that defers acknowledgements (dmqtt.aio).
    _Session: "type[Session]" = Session
    # Writes block until the transport has taken the whole packet (this client's API waits anyway). The asyncio
    # face's client does not block: the unsent tail of a packet then stays in the output buffer for the next poll,
    # and the asyncio face encodes nothing new (QoS 0, SUBSCRIBE, DISCONNECT) before it has gone.
    blocking = True
    # At a wake from deep sleep, sleep_flags (open() sets it): told of each connection made and ended, so that the
    # next wake can say when this one slept with its connection up, without settle().
    slept = None

    def __init__(
        self,
        client_id,
        store,
        version=codec.V311,
        keepalive=60,
        clean=False,
        session_expiry=3600,
        window="auto",
        max_messages=32,
        username=None,
        password=None,
        will=None,
        max_packet=1024,
        group_commit=0,
    ):
        if version not in (3, 4, 5):
            from dmqtt import usage  # (a version written as text: "3.1.1", "5")

            version = usage.version_number(version)
        self.client_id = client_id
        self.version = version
        self.keepalive = keepalive
        self.clean = clean
        self.session_expiry = session_expiry
        self.username = username
        self.password = password
        self.will = will  # (topic, payload, qos, retain) or None
        # window "auto": follow the broker's Receive Maximum up to max_messages (the journal's slots).
        auto = window == "auto"
        self.session = self._Session(store, version, 0 if auto else window, max_messages, _RX_MAX)  # use the API
        self.session.on_message = self._message
        self.session.on_result = self._result
        self.max_packet = max_packet
        # Group commit: up to this many QoS 1/2 records share one flash program; 0: each publish() is durable
        # on return. With it, a message is durable at the next flush(), poll(), or when the group is full.
        self.group_commit = group_commit
        self.broker_max_packet = 268435455
        self.state = DISCONNECTED
        # Plain attributes, kept up to date where they change, not properties: on MicroPython a class with a
        # property makes every attribute store on its instances look for a setter first (measured on the Unix
        # port: 5% of a QoS 1 message's time, 12% of a QoS 0 one's).
        self.connected = False  # state == CONNECTED
        # `mark`, the application's progress counter as last journaled (it survives reboots), is set by open():
        # read before it, it opens the journal (__getattr__), as connect(), publish() and outstanding() do.
        self.window = self.session.window  # flows in flight at once on this connection (after CONNACK)
        self.retain_cleared = 0
        self.on_connect: OnConnect | None = None
        self.on_disconnect: OnDisconnect | None = None
        self.on_message: OnMessage | None = None
        self.on_published: OnPublished | None = None
        self.connects = 0
        self.reconnects = 0
        self.connect_failures = 0
        self.disconnects = 0
        self.received = 0
        self.published = 0
        self.refused = 0
        self.tx_buf = bytearray(max_packet)
        self._in = bytearray(_READ)  # a read at a time: larger packets take more reads, no more heap
        # Room for what every board receives (acks, CONNACK, SUBACK); an incoming PUBLISH larger than that grows
        # the buffer once to its size (up to max_packet), so a board that only publishes keeps the kilobyte.
        self._decoder = codec.StreamDecoder(version, max_packet, min(max_packet, _DECODER_START))
        self.transport: Transport = None  # type: ignore[assignment]  # given to connect(); used only while connected
        self.last_tx = 0  # when a packet began to be sent, or the transport last took a byte of it
        self.ping_at = -1
        self.acks: dict = {}  # SUBACK/UNSUBACK by packet id
        self.tx_tail = self.tx_end = 0  # the packet being sent: [tx_tail, tx_end) of the output buffer is not sent yet
        self._grant = (65535, 2, True, 0)  # what the last CONNACK allowed: Receive Maximum, QoS, retain, aliases
        # publish()'s last topic as given (bytes or str, which cannot change) and as checked: a loop that
        # publishes to one topic has it checked, and a str encoded, once.
        self._topic_given = self._topic = None

    # -- life cycle ------------------------------------------------------------------------------------------

    def __getattr__(self, name) -> int:
        # Called only for a name the instance lacks: `mark` before open() opens the journal to say it (a -1 read
        # there would number an application's readings from nowhere).
        if name != "mark":
            raise AttributeError(name)
        self.open()
        return self.mark

    def open(self):
        """Replay the journal; returns what it found worth telling (torn records, foreign data). Incoming QoS 2
        messages whose handler a power cut interrupted reach on_message again here (dup set): set the hooks
        first. connect(), publish(), outstanding() and a read of `mark` call it when the application has not. At
        a wake from deep sleep it says (printed, once) when the last wake went to sleep with its connection up
        and messages unacknowledged: they go again now, as they will at every wake that sleeps without settle()."""
        notes = self.session.open()
        self.mark = self.session.mark
        try:
            import machine

            if machine.reset_cause() == machine.DEEPSLEEP_RESET:
                MQTTClient.slept = staticmethod(sleep_flags)
                was = sleep_flags(0, 1)  # (the last wake's connection is over)
                if was & 1 and not was & 2 and self.session.outstanding():
                    from dmqtt import usage

                    usage.unsettled(self.session.outstanding(), sleep_flags)
        except (ImportError, AttributeError):
            pass  # (CPython; the Unix port without the virtual board's machine)
        self.session.deliver_pending()
        return notes

    def message_number(self):
        """The receive number of the incoming QoS 2 message on_message is being given: the same at each delivery
        of that message (after a power cut, dup set), larger for each later message, never reused while the
        journal lives; 0 for QoS 0 and 1. Keep it with the handler's effect, in one write, and skip a delivery
        whose number is the one kept: the message is then applied exactly once (docs/client.md)."""
        return self.session.rx_number

    def outstanding(self):
        """QoS 1/2 messages accepted and not yet completed (in flight or queued, including the journaled ones
        a reboot brought back: the journal is opened first when it is not yet)."""
        self.mark  # noqa: B018 (before open(), this read opens the journal: __getattr__)
        return self.session.outstanding()

    def connect(self, transport, timeout_ms=10000):
        """CONNECT on an open transport and wait for CONNACK; returns the session-present flag. A failure
        raises MQTTError (counted in connect_failures) with the transport closed."""
        self.mark  # noqa: B018 (before open(), this read opens the journal: __getattr__)
        try:
            self.send_connect(transport)
            start = ticks_ms()
            present = None
            while present is None:
                left = timeout_ms - elapsed(start)
                if left <= 0 or not transport.wait(left):
                    self.fail("no answer from the broker within %d ms" % timeout_ms, None)
                present = self.take_connack()
            return self.establish(present)
        except MQTTError:
            self.connect_failures += 1
            raise

    # The connection in three steps, so that the asyncio face (dmqtt.aio) awaits where connect() waits:
    # send_connect, then take_connack until it returns the session-present flag, then establish.

    def send_connect(self, transport):
        self.transport = transport
        self.state = CONNECTING
        self._decoder.restart()  # the same buffer for every connection: no new allocation per reconnect
        props = None
        if self.version == codec.V5:
            props = {
                codec.SESSION_EXPIRY_INTERVAL: 0 if self.clean else self.session_expiry,
                codec.RECEIVE_MAXIMUM: _RX_MAX,
                codec.MAXIMUM_PACKET_SIZE: self.max_packet,
            }
        will_topic, will_payload, will_qos, will_retain = self.will or (None, b"", 0, False)
        n = codec.encode_connect(
            self.client_id,
            self.version,
            self.keepalive,
            self.clean,
            self.username,
            self.password,
            will_topic,
            will_payload,
            will_qos,
            will_retain,
            None,
            props,
            self.tx_buf,
        )
        self.write_packet(n)

    def take_connack(self):
        """Read what has arrived of the CONNACK, one byte at a time (nothing read past it: what follows goes
        through _dispatch); None until it is whole, then the session-present flag. Raises MQTTError when the
        broker refuses or breaks the protocol."""
        first = memoryview(self._in)[:1]  # (a view per call: only a connection reads the CONNACK this way)
        while True:
            got = self.transport.readinto(first)
            if got is None:
                return None
            if not got:
                self._lost("the broker closed the connection")
            try:
                self._decoder.feed(self._in, 0, 1)
            except CodecError as exc:
                self.fail(exc.reason, exc.reason_code)
            if self._decoder.ready:
                break
        if self._decoder.ptype != codec.CONNACK:
            self.fail(_text(_T_NOT_CONNACK, self._decoder.ptype), codec.PROTOCOL_ERROR)
        try:
            present, code, cprops = codec.decode_connack(self._decoder.body, self.version)
        except CodecError as exc:  # (one a broker of another version sends is told as such: codec_text.py)
            self.fail(exc.reason, exc.reason_code)
        if code:
            self._lost(_text(_T_REFUSED, (code, self.version, len(self.client_id))), code)
        if self.version == codec.V31:
            # MQTT 3.1's CONNACK cannot say whether the session was kept: assume it was when we asked for it,
            # so in-flight flows are resumed (PUBREL again, PUBLISH with DUP) rather than restarted.
            present = not self.clean
        receive_max, max_qos, retain_ok, aliases = 65535, 2, True, 0
        if self.version == codec.V5:
            # This broker's, not the last one's: absent means the protocol's limit. (3.1/3.1.1: what a broker's
            # dropped connections have shown, dmqtt.oversize, kept until the next boot.)
            self.broker_max_packet = 268435455
        if cprops:
            receive_max = cprops.get(codec.RECEIVE_MAXIMUM, receive_max)
            max_qos = cprops.get(codec.MAXIMUM_QOS, max_qos)
            retain_ok = bool(cprops.get(codec.RETAIN_AVAILABLE, 1))
            self.broker_max_packet = cprops.get(codec.MAXIMUM_PACKET_SIZE, self.broker_max_packet)
            self.keepalive = cprops.get(codec.SERVER_KEEP_ALIVE, self.keepalive)  # overrides ours [MQTT-3.2.2-21]
            aliases = cprops.get(codec.TOPIC_ALIAS_MAXIMUM, 0)
        self.session.max_packet = self.broker_max_packet
        self._grant = (receive_max, max_qos, retain_ok, aliases)
        return bool(present)

    def establish(self, present):
        """The CONNACK accepted the connection: the session resumes its flows, the hooks and counters hear of it."""
        self.session.connected(present, *self._grant)
        self.state = CONNECTED
        self.connected = True
        if self.slept:
            self.slept(1, 0)  # (a connection is up)
        self.window = self.session.window
        self.ping_at = -1
        if self.connects:
            self.reconnects += 1
        self.connects += 1
        if self.on_connect is not None:
            self.on_connect(present)
        self.pump()
        return present

    def close(self):
        """Drop the connection (no DISCONNECT): the session and the journal stay as they are."""
        self._drop(None)

    def disconnect(self):
        """A clean DISCONNECT: the broker discards the will; the session stays on both sides."""
        if self.transport is not None:
            try:
                self.write_packet(codec.encode_disconnect(codec.SUCCESS, self.version, None, self.tx_buf))
            except (OSError, MQTTError):
                pass
        self._drop(codec.SUCCESS)

    def _drop(self, code, reason="closed"):
        """Close the transport; an established connection that ends is counted and told to on_disconnect."""
        was = self.state
        if self.transport is not None:
            try:
                self.transport.close()
            except OSError:
                pass
        self.transport = None  # type: ignore[assignment]  # closed: used again only after connect()
        # The rest of a packet half sent goes nowhere: its flow is resent whole on the next connection, and a
        # send on this one (a timer's upkeep in the same round as the end) finds nothing left to send.
        self.tx_tail = self.tx_end = 0
        self.state = DISCONNECTED
        self.connected = False
        self.session.lost()
        if was == CONNECTED:
            if self.slept:
                self.slept(0, 3 if code == codec.SUCCESS else 1)  # (our DISCONNECT: a wake that settled)
            self.disconnects += 1
            if self.on_disconnect is not None:
                self.on_disconnect(code, reason)

    # -- application -----------------------------------------------------------------------------------------

    def publish(self, topic, payload, qos=0, retain=False, mark=None, timeout_ms=0):
        """QoS 0: sent now (needs a connection). QoS 1/2: journaled, then sent as the window allows; returns the
        packet id once the message is on flash, even while disconnected (offline queue). When every slot is
        in flight, waits up to timeout_ms for acknowledgements, then raises QueueFull. The payload: bytes,
        bytearray or memoryview, or a str (sent as UTF-8); PublishRefused for anything else, a QoS outside 0-2 or
        a message larger than max_packet or the journal's records."""
        if type(payload) is not bytes and type(payload) is not bytearray:
            from dmqtt import usage  # (a str, a memoryview, or a mistake)

            payload = usage.payload_bytes(payload)
        if qos not in (0, 1, 2):
            raise PublishRefused(_text(_T_QOS, repr(qos)), _QOS_NOT_SUPPORTED)
        self.mark  # noqa: B018 (before open(), this read opens the journal: __getattr__)
        if topic is self._topic_given:  # the same immutable topic as last time: checked (and encoded) then
            topic = self._topic
        else:
            given = topic
            try:
                topic = codec.check_topic(topic)
            except CodecError as exc:
                self.refused += 1
                raise PublishRefused(exc.reason, codec.TOPIC_NAME_INVALID)
            if isinstance(given, (bytes, str)):  # (a bytearray may change before the next call)
                self._topic_given = given
                self._topic = topic
        # A PUBLISH without properties has at most 10 bytes besides its topic and payload: the exact size only
        # when that could matter.
        if len(topic) + len(payload) + 10 > min(self.broker_max_packet, self.max_packet):
            size = codec.publish_size(len(topic), len(payload), qos, self.version)
            if size > self.max_packet:  # (with room for a 5.0 Topic Alias property: what the session may add)
                raise PublishRefused(_text(_T_OUR_LIMIT, (size, self.max_packet)), codec.PACKET_TOO_LARGE)
            if size > self.broker_max_packet:
                self.refused += 1
                raise PublishRefused(
                    _text(_T_TOO_LARGE, (size, self.broker_max_packet, self.version)), codec.PACKET_TOO_LARGE
                )
        session = self.session
        if qos == 0:
            if self.state != CONNECTED:
                raise MQTTError(_text(_T_QOS0_OFFLINE))
            if retain and not session.retain_available:
                retain = False  # Retain Available 0: a retained PUBLISH would be a protocol error [MQTT-3.2.2-14]
                session.retain_cleared += 1
                self.retain_cleared = session.retain_cleared
            wire = session.wire_topic(topic)
            self.write_packet(
                codec.write_publish(
                    wire,
                    payload,
                    codec.RETAIN_FLAG if retain else 0,
                    0,
                    self.version,
                    None,
                    self.tx_buf,
                    0,
                    session.wire_alias,
                )  # fmt: skip
            )
            if mark is not None:
                session.note_mark(mark)
                self.mark = mark
            return 0
        start = None  # (the clock read only when there is no room at once)
        group = self.group_commit
        while True:
            # Room for it: a free slot, and room in the journal (which refuses before writing anything).
            if session.full():
                full = None  # (the exception made only if raised: its text is loaded for it)
            else:
                try:
                    pid = session.accept(topic, payload, qos, retain, mark, group > 0)
                    self.mark = session.mark
                    break
                except QueueFull as exc:
                    full = exc
            if start is None:
                start = ticks_ms()
            if self.state != CONNECTED or elapsed(start) >= timeout_ms:
                raise full or QueueFull(_text(_T_WINDOW_FULL, session.outstanding()))
            self.poll(min(100, max(1, timeout_ms - elapsed(start))))
        try:
            if group and session.staged < group:
                return pid  # staged: durable at the next flush(), poll() or full group
            if group:
                session.sync()
            # Only when the message may leave now: with the window full (a burst), nothing new is sendable
            # until acknowledgements come, which poll() reads and pumps after (a pump and a next_packet() for
            # nothing cost a tenth of a queued message's CPU). What the last pump left (the non-blocking
            # face's unsent tail) waits for the same poll().
            if self.state == CONNECTED and session.in_window < session.window:
                try:
                    self.pump()
                except MQTTError:
                    # The message is accepted (journaled): publish() has succeeded and must say so, or the caller
                    # would publish it again. The lost connection shows in `connected`; the flow resumes after it.
                    pass
        finally:
            session.returned()  # the application's buffers are its own again
        return pid

    def flush(self):
        """Make every group-committed message durable now."""
        self.session.sync()

    def subscribe(self, topic, qos=1, timeout_ms=10000):
        """SUBSCRIBE and wait for SUBACK; returns the granted QoS (0x80 and up: refused)."""
        pid = self.session.allocate_pid()
        self.write_packet(codec.encode_subscribe(pid, [(topic, qos)], self.version, None, self.tx_buf))
        return self._await_ack(pid, timeout_ms)[0]

    def unsubscribe(self, topic, timeout_ms=10000):
        pid = self.session.allocate_pid()
        self.write_packet(codec.encode_unsubscribe(pid, [topic], self.version, None, self.tx_buf))
        self._await_ack(pid, timeout_ms)

    def wait_idle(self, timeout_ms):
        """Poll until every QoS 1/2 message is acknowledged; False on timeout."""
        start = ticks_ms()
        while self.session.outstanding():
            left = timeout_ms - elapsed(start)
            if left <= 0:
                return False
            self.poll(min(left, 100))
        return True

    def settle(self, timeout_ms):
        """End a wake before deep sleep (docs/low-power.md): poll until every QoS 1/2 message is acknowledged or
        timeout_ms has passed, then a clean DISCONNECT (the broker keeps the session). Returns how many are left:
        they stay journaled and go at the next connection. A connection lost meanwhile ends the wait."""
        try:
            if self.state == CONNECTED:
                self.wait_idle(timeout_ms)
                self.disconnect()
        except (OSError, MQTTError):
            self.close()
        return self.session.outstanding()

    def poll(self, timeout_ms=0):
        """Send what the session has ready, wait up to timeout_ms for input, handle it, keep the link alive."""
        if self.state != CONNECTED:
            raise MQTTError(_text(_T_NOT_CONNECTED))
        self.pump()
        if self.transport.wait(timeout_ms):
            self._receive()
        self.ping_if_due()
        self.pump()
        if timeout_ms:
            # A caller willing to wait is idle: the journal's erase-ahead and the opening of its next sector go
            # here, not in publish(). Last, after the acknowledgements' records: the room they took decides
            # whether the next message still fits the head (before them, one publish() in a sector's worth
            # found the head full after all and opened the next one itself).
            self.session.journal.tend()

    # -- internals -------------------------------------------------------------------------------------------

    def _await_ack(self, pid, timeout_ms):
        start = ticks_ms()
        while pid not in self.acks:
            left = timeout_ms - elapsed(start)
            if left <= 0:
                self.fail(_text(_T_NO_SUBACK, timeout_ms), None)
            self.poll(min(left, 100))
        return self.acks.pop(pid)

    def ping_if_due(self):
        if not self.keepalive:
            return
        period = self.keepalive * 1000
        if self.ping_at >= 0 and time.ticks_diff(ticks_ms(), self.ping_at) > period:
            self.fail(_text(_T_NO_PINGRESP), codec.KEEP_ALIVE_TIMEOUT)
        if self.ping_at < 0 and elapsed(self.last_tx) >= period * 3 // 4 and self.send_pending(self.blocking):
            self.write_packet(codec.encode_empty(codec.PINGREQ, self.tx_buf))
            self.ping_at = ticks_ms()

    def pump(self):
        # The session's packets go out as many at a time as the output buffer holds, in one write: a backlog
        # (acknowledgements that opened the window for several queued messages) costs one socket call, not one
        # per packet (on an ESP32, each is a pass through lwIP). The session checks each packet's size against
        # the broker's Maximum Packet Size itself.
        # (the test of an empty output buffer inline: send_pending would say the same, a call later)
        session = self.session
        try:
            while self.transport is not None and (self.tx_tail == self.tx_end or self.send_pending(self.blocking)):
                end = 0
                while n := session.next_packet(self.tx_buf, end):
                    end = n
                if not end:
                    break
                self.write_packet(end, True)
        except ProtocolError as exc:  # a message above the broker's Maximum QoS (Session.next_packet)
            self.fail(str(exc), exc.reason_code)
        except MemoryError:
            # The heap could not take a step of encoding (a reconnect's burst of resends, on a heap the emulation
            # or a long uptime fragmented). The packets taken from the session's queues so far are not sent, so
            # the connection ends as a lost one does: every flow goes again on the next one, from the journal
            # [MQTT-4.4.0-1]. The words are a constant: loading a text needs the heap that just ran out. Not
            # _lost(): on 3.1.1 it would read flows in flight at a drop as a sign of the broker's packet limit.
            self._drop(None, "out of heap while sending")
            raise MQTTError("out of heap while sending")
        self.retain_cleared = session.retain_cleared  # (the session clears the flag as it encodes)

    def write_packet(self, n, packets=False):
        """Send the n bytes encoded in the output buffer, one packet (or, `packets`, the session's, each checked
        against the broker's limit already): all of them before returning, or (not blocking) what the transport
        takes now, the tail going out at the next poll before anything new is encoded."""
        if n > self.broker_max_packet and not packets:
            raise MQTTError(_text(_T_PACKET_LARGE, n))
        if self.state == DISCONNECTED:
            raise MQTTError(_text(_T_NOT_CONNECTED))  # (subscribe() before connect(), say)
        self.tx_tail = 0
        self.tx_end = n
        self.last_tx = ticks_ms()
        self.send_pending(self.blocking)

    def send_pending(self, block):
        """Send what is left of the output buffer; True once all of it is sent. A connection that takes no byte
        for _WRITE_STALL_MS is dead."""
        if self.tx_tail == self.tx_end:
            return True
        try:
            while self.tx_tail < self.tx_end:
                sent = self.transport.send(self.tx_buf, self.tx_tail, self.tx_end)  # usually the whole packet at once
                if sent:
                    self.tx_tail += sent
                    self.last_tx = ticks_ms()
                elif elapsed(self.last_tx) > _WRITE_STALL_MS:
                    self.fail(_text(_T_STALLED, _WRITE_STALL_MS // 1000), None)
                elif block:
                    self.transport.wait(1000, True)
                else:
                    return False
        except OSError as exc:
            self._salvage()
            self._lost("connection lost while sending: %s" % exc)
        return True

    def _salvage(self):
        """The acknowledgements that arrived before a connection failed under a write. A broker that closes on
        a message it refuses (Mosquitto 2.0 on 3.1.1, for an ACL denial) acknowledges it first, and its close
        is a reset when our next message is unread on its side: the write fails, but the acknowledgement is
        still there to read. Left unread, the flow would be resent, refused and lost the same way at every
        reconnect."""
        try:
            got = self.transport.readinto(self._in)
            pos = 0
            while got and pos < got:
                pos += self._decoder.feed(self._in, pos, got)
                if self._decoder.ready and codec.PUBACK <= self._decoder.ptype <= codec.PUBCOMP:
                    self.session.handle(self._decoder.ptype, self._decoder.flags, self._decoder.body)
        except (OSError, CodecError, ProtocolError):
            pass  # the connection is ending all the same

    def _receive(self):
        try:
            got = self.transport.readinto(self._in)
        except OSError as exc:
            self._lost("connection lost: %s" % exc)
        if got is None:
            return
        if not got:
            self._lost("the broker closed the connection")
        pos = 0
        decoder = self._decoder
        try:  # (a packet that breaks the format or a rule of the session: fail() closes and raises MQTTError)
            while pos < got:
                ack = decoder.short_ack(self._in, pos, got)
                if ack:  # a publisher's usual packet, without the decoder's buffering
                    pos += 2 + (ack >> 20 & 3)
                    self.ping_at = -1  # any packet from the broker shows the connection is alive
                    self.session.acked(ack >> 16 & 15, ack & 0xFFFF, ack >> 24)
                    continue
                pos += decoder.feed(self._in, pos, got)
                if decoder.ready:
                    self._dispatch(decoder.ptype, decoder.flags, decoder.body)
        except (CodecError, ProtocolError) as exc:
            self.fail(str(exc), exc.reason_code)

    def _dispatch(self, ptype, flags, body):
        self.ping_at = -1  # any packet from the broker shows the connection is alive
        if codec.PUBLISH <= ptype <= codec.PUBCOMP:
            self.session.handle(ptype, flags, body)
        elif ptype == codec.SUBACK:
            pid, codes, _props = codec.decode_suback(body, self.version)
            self.acks[pid] = codes
        elif ptype == codec.UNSUBACK:
            pid, codes, _props = codec.decode_unsuback(body, self.version)
            self.acks[pid] = codes
        elif ptype == codec.DISCONNECT:
            reason, _props = codec.decode_reason_only(ptype, body, self.version)
            self._lost("the broker disconnected us: reason 0x%02x" % reason, reason)
        elif ptype != codec.PINGRESP:
            self.fail(_text(_T_UNEXPECTED, ptype), codec.PROTOCOL_ERROR)

    def fail(self, reason, code):
        """Close on a broken rule; MQTT 5.0 tells the broker why first (DISCONNECT with a reason code)."""
        if self.version == codec.V5 and code is not None and code >= 0x80 and self.transport is not None:
            try:
                n = codec.encode_disconnect(code, codec.V5, None, self.tx_buf)
                self.transport.send(self.tx_buf, 0, n)
            except (OSError, CodecError):
                pass
        self._lost(reason, code)

    def _lost(self, reason, code=None):
        """The connection ended under us (or we ended it on a broken rule): close, tell, raise."""
        if self.version != codec.V5 and self.state == CONNECTED and self.session.in_window:
            from dmqtt import oversize  # (3.1.1: flows in flight, and the broker cannot say its packet limit)

            oversize.dropped(self)
        self._drop(code, reason)
        raise MQTTError(reason, code)

    def _message(self, topic, payload, qos, retain, dup):
        self.received += 1
        if self.on_message is not None:
            self.on_message(topic, payload, qos, retain, dup)

    def _result(self, pid, code):
        if code >= 0x80:
            self.refused += 1
        else:
            self.published += 1
        if self.on_published is not None:
            self.on_published(pid, code)
