# The MQTT session state machine, sans-I/O: it never sleeps and never touches a socket. The client feeds it
# packets (handle) and connection events (connected, lost) and takes the packets it wants sent (next_packet).
#
# Outgoing QoS 1/2 messages live in slots, one per packet id in use, in the states the spec names:
#   QUEUED     accepted and journaled, not yet sent as a new flow (offline queue, or waiting for the window)
#   WAIT_ACK   PUBLISH sent, waiting for PUBACK (QoS 1) or PUBREC (QoS 2)
#   WAIT_COMP  PUBREC received, PUBREL sent or owed, waiting for PUBCOMP
# Each slot also records whether it has been transmitted on the current connection: nothing is ever sent
# twice on a live connection [MQTT-4.4.0-1]; after a reconnect with a session, everything unacknowledged is
# sent again with the same packet id, PUBLISH with DUP=1 [MQTT-3.3.1-1] and PUBREL as PUBREL.
#
# Every state change that a reboot must not forget is journaled before it takes effect (docs/journal.md).
# The slot arrays are allocated once: nothing per message on the hot path beyond the journal's own buffers.

from array import array

from dmqtt import journal_record as rec
from dmqtt.errors import ProtocolError, PublishRefused, QueueFull, explain

if False:  # type checkers only: MicroPython has no typing module
    from typing import Any

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


_V311 = const(4)  # codec.V311

FREE = const(0)
QUEUED = const(1)
WAIT_ACK = const(2)
WAIT_COMP = const(3)

# Failures in words: numbers into client_text.TEXT (after client.py's), loaded only when one happens (_text).
_T_NOT_JOURNALED = const(11)
_T_SLOTS_FULL = const(12)
_T_RECORD_LARGE = const(13)
_T_ACKS_BEHIND = const(16)
_T_NO_PID = const(17)
_T_WRONG_ACK = const(24)
_T_ABOVE_MAX_QOS = const(25)
_T_NO_SLOT = const(10)


def _text(rule, arg=None):
    return explain("dmqtt.client_text", rule, arg)


# The wire's code (dmqtt.codec), loaded at the first connection (connected()) or delivery (dmqtt.inbox): a
# session that only journals (the sampling wake of a board that sleeps between readings) never loads it, nor
# spends its heap and time.
codec: "Any" = None


_CONTROL_MAX = const(16)
# The auto window where the CONNACK cannot carry a Receive Maximum (MQTT 3.1, 3.1.1): the broker's limit is
# unknowable, and exceeding it costs the connection (Mosquitto 2.0 drops a 3.1.1 client with more unreleased
# incoming QoS 2 messages than its max_inflight_messages, 20 by default; measured here).
_LEGACY_WINDOW = const(8)
# MQTT 5.0 topic aliases: the first PUBLISH of a topic on a connection carries the name and an alias, the next
# ones the alias alone (a 2-byte property instead of a 30-byte name: a quarter of a 64-byte message's line time
# on a serial link). At most this many topics per connection: a board publishes to few, and each costs a copy.
_ALIASES = const(4)
# MQTT 5.0's reason codes that PublishRefused carries for a message accept() cannot journal.
_QOS_NOT_SUPPORTED = const(0x9B)
_PACKET_TOO_LARGE = const(0x95)
_IMPLEMENTATION_ERROR = const(0x83)  # a DISCONNECT's reason when a broker's limit leaves a message unsendable
# The most a packet the session sends adds to its topic and payload: an acknowledgement without properties is
# at most 5 bytes; a PUBLISH adds a fixed header (5), the topic's length (2), a packet id (2) and its Topic Alias
# property block (4). What next_packet() needs free behind packets already in the buffer.
_ACK_MAX = const(5)
_PUBLISH_EXTRA = const(13)


class Session:
    # Deferred acknowledgement, for the asyncio face (dmqtt.aio's session, a subclass): the application is done
    # with an incoming message when it says so, not when on_message returns; here, QoS 1 is then not acknowledged
    # on return.
    defer = False
    # None, or callable(PUB body) -> the properties of its PUBLISH: dmqtt.confirm's marks a copy it sends again.
    resent_props: "Any" = None

    def __init__(self, store, version=_V311, window=8, max_messages=32, rx_max=16):
        self.journal = store
        self.version = version
        # The window: flows in flight at once. 0 (auto): as many as the broker's Receive Maximum allows, up to the
        # slots, since every flow in flight holds one; a number: at most that many.
        self.window_config = window
        self.window = window or max_messages
        self.max_qos = 2
        self.retain_available = True
        self.on_message = None  # callable(topic: str, payload: bytes, qos, retain, dup)
        self.on_result = None  # callable(pid, reason): a QoS 1/2 flow ended (reason >= 0x80: refused)
        # The broker's Maximum Packet Size (5.0 CONNACK): a PUBLISH larger than this is never sent
        # [MQTT-3.2.2-15]; a journaled one found too large ends its flow as refused (0x95) instead.
        self.max_packet = 268435455
        self.mark = 0  # the application's progress counter, journaled with each message
        self.serial = 0  # acceptance order of outgoing messages, journaled
        self.next_pid = 0  # the last packet id handed out
        # allocate_pid's shortcut: this many ids after the id _free_after are known to be free, so the slots are
        # searched once per run of free ids, not for every message (only while next_pid is still _free_after:
        # a replay may set it).
        self._free_pids = self._free_after = 0
        n = max_messages
        self._pid = array("H", bytes(2 * n))
        self._state = bytearray(n)
        self._tx = bytearray(n)  # 1: transmitted on the current connection
        self._qos = bytearray(n)
        self._addr = array("I", bytes(4 * n))  # the PUB record: topic and payload
        # The REL record, once PUBREC came; before that, the PUB record's size, so that the largest message a
        # broker acknowledged is known. Two more entries, for dmqtt.oversize: [-1] the largest PUB record (bytes)
        # a broker has acknowledged since boot, [-2] the serial of the message the last connection that ended
        # had in flight (0: none). In this array, not attributes of their own: one more attribute can double
        # the instance's attribute table (measured: 0.3 KB of a deployed board's heap).
        self._rel_addr = array("I", bytes(4 * (n + 2)))
        self._serial = array("I", bytes(4 * n))
        # Incoming QoS 2 messages, from PUBLISH to PUBREL: the packet id (0: free), whether the application's
        # handler has returned for it, and the one record that keeps it (RX while not handled, HANDLED after).
        self.rx_pids = array("H", bytes(2 * rx_max))
        self.rx_handled = bytearray(rx_max)  # 0: not yet, 1: handled (journaled); 2: held (dmqtt.aio)
        self.rx_pid = 0  # the packet id of the message on_message is being given
        # The receive number of the QoS 2 message on_message is being given (0 for QoS 0 and 1, and for one
        # journaled before format 4): the same at every delivery of the message, larger for every later one,
        # never reused while the journal lives. `received` is the last one given out, kept in RX and META.
        self.rx_number = 0
        self.received = 0
        self.rx_addr = array("I", bytes(4 * rx_max))
        # Acks we owe the broker, in order: a ring of packet type << 24 | reason code << 16 | packet id (one array,
        # not three: a deployed board's heap keeps every object's header).
        self._ctl = array("I", bytes(4 * _CONTROL_MAX))
        self._ctl_head = 0
        self._ctl_len = 0
        self.connected_now = False
        self.retain_cleared = 0
        self.staged = 0  # group-committed records not yet on flash
        # The packets to send, in order, each a ring of slot indices (head, length): the messages not yet sent as
        # PUBLISH on this connection, in acceptance order, and the flows owing a PUBREL, in the order their PUBRECs
        # came [MQTT-4.6.0-3]. connected() rebuilds both; in_window counts the flows that hold a place in the window
        # (PUBLISH sent and unacknowledged, or PUBREL owed or sent). next_packet() takes the head of a ring instead
        # of searching the slots: a pass over 32 slots costs about 5 us on the Unix port, a tenth of a message.
        self._sendq = bytearray(n)
        self._sendq_head = self._sendq_len = 0
        self._relq = bytearray(n)
        self._relq_head = self._relq_len = 0
        self.in_window = 0
        self._busy = 0  # slots that hold a flow: outstanding()
        # fresh: the slot whose message the publish() that is running accepted, sent from the application's own
        # topic and payload instead of its record read back from flash (slices of the record would be objects per
        # message); the application may reuse its buffers once publish() has returned (returned()), and a message
        # sent later is read back.
        self.fresh = -1
        self._fresh_topic = self._fresh_payload = b""
        self._aliases = []  # topics (bytes) aliased on this connection: alias i + 1
        self._alias_max = 0
        self.wire_alias = 0  # the Topic Alias of the PUBLISH wire_topic() named last (0: none)

    # -- journal owner -----------------------------------------------------------------------------------------

    def open(self):
        """Replay the journal: rebuild the slots, the receive set, the counters. Returns the journal's notes."""
        self.journal.open(self)
        self._busy = 0
        for state in self._state:  # bytearray.count(int) is CPython-only
            if state != FREE:
                self._busy += 1
        return self.journal.notes

    def replay(self, rtype, body, addr):
        if rtype == rec.PUB or rtype == rec.REL:
            pid = rec.pid_of(body)
            serial = rec.serial_of(rtype, body)
            i = self._find(pid)
            # A record carried forward can replay after a later record of the same flow (a PUB copied past its
            # REL): the serial tells the same flow from a new one that reuses the packet id.
            same_flow = i >= 0 and self._serial[i] == serial
            if i < 0:
                i = self._slot_for(pid)
                if i < 0:
                    # More journaled messages than slots: max_messages was lowered since they were accepted.
                    self.journal.notes.append(_text(_T_NO_SLOT, (pid, len(self._state))))
                    return
            if rtype == rec.PUB:
                if not (same_flow and self._state[i] == WAIT_COMP):
                    self._state[i] = WAIT_ACK  # maybe sent before the reset: resent with DUP=1 if the session lives
                    self._rel_addr[i] = len(body)
                self._qos[i] = rec.pub_qos(body)
                self._addr[i] = addr
                self.mark = max(self.mark, rec.pub_mark(body))
                self.next_pid = pid
            else:
                self._state[i] = WAIT_COMP
                self._rel_addr[i] = addr
                self._qos[i] = 2
            self._pid[i] = pid
            self._serial[i] = serial
            self.serial = max(self.serial, serial)
        elif rtype == rec.DONE:
            i = self._find(rec.pid_of(body))
            if i >= 0:
                self._state[i] = FREE
        elif rtype == rec.RX or rtype == rec.HANDLED:
            pid = rec.pid_of(body)
            j = self.rx_find(pid)
            if j < 0:
                j = self.rx_find(0)
                if j < 0:
                    return
                self.rx_pids[j] = pid
            # A format 1 RX (pid only) was delivered before it was journaled: handled.
            self.rx_handled[j] = 0 if rtype == rec.RX and len(body) > 2 else 1
            self.rx_addr[j] = addr
            if rtype == rec.RX:
                self.received = max(self.received, rec.rx_number(body))
        elif rtype == rec.RXDONE:
            j = self.rx_find(rec.pid_of(body))
            if j >= 0:
                self.rx_pids[j] = 0
        elif rtype == rec.META:
            self.next_pid, serial, mark, received = rec.meta(body)
            self.serial = max(self.serial, serial)
            self.received = max(self.received, received)
            self.mark = max(self.mark, mark)
        elif rtype == rec.MARK:
            self.mark = max(self.mark, rec.mark_of(body))

    def is_live(self, rtype, body, addr):
        if rtype == rec.PUB or rtype == rec.REL:
            # PUB stays live until the flow ends, even after PUBREC: a broker that lost the session gets the
            # message again as a new flow, and that needs the payload.
            i = self._find(rec.pid_of(body))
            if i < 0:
                return False
            if rtype == rec.PUB:
                return self._addr[i] == addr
            return self._state[i] == WAIT_COMP and self._rel_addr[i] == addr
        if rtype == rec.RX or rtype == rec.HANDLED:
            j = self.rx_find(rec.pid_of(body))
            return j >= 0 and self.rx_addr[j] == addr
        return False  # DONE, RXDONE, META, MARK: superseded by the snapshot written with every compaction

    def holds(self, lo, hi):
        """Whether a live record may lie in [lo, hi): is_live holds only at the addresses these arrays keep
        (a stale one only makes the answer conservative). The ring reclaims a sector without reading its
        records when none does, which in a steady flow is every time: the oldest sector's flows ended long ago."""
        for i in range(len(self._state)):
            state = self._state[i]
            # (a slot's REL address only while it waits for PUBCOMP: a stale one, 0 in a fresh slot, would have
            # every reclaim of sector 0 read all its records)
            if state != FREE and (lo <= self._addr[i] < hi or state == WAIT_COMP and lo <= self._rel_addr[i] < hi):
                return True
        for j in range(len(self.rx_pids)):
            if self.rx_pids[j] and lo <= self.rx_addr[j] < hi:
                return True
        return False

    def moved(self, rtype, body, old, new):
        pid = rec.pid_of(body)
        if rtype == rec.RX or rtype == rec.HANDLED:
            j = self.rx_find(pid)
            if j >= 0 and self.rx_addr[j] == old:
                self.rx_addr[j] = new
            return
        i = self._find(pid)
        if i < 0:
            return
        if rtype == rec.PUB and self._addr[i] == old:
            self._addr[i] = new
        elif rtype == rec.REL and self._rel_addr[i] == old:
            self._rel_addr[i] = new

    def snapshot(self, body):
        return rec.put_meta(body, self.next_pid, self.serial, self.mark, self.received)

    # -- application side ----------------------------------------------------------------------------------

    def accept(self, topic, payload, qos, retain=False, mark=None, defer=False):
        """Journal a QoS 1/2 message and queue it; returns its packet id once the record is on flash.
        topic: bytes already validated with codec.check_topic. Raises QueueFull when every slot is taken.
        defer=True (group commit): the record is only staged; it is made durable by sync(), which
        next_packet() calls before anything is sent, so no message leaves before it is on flash."""
        if qos not in (1, 2):
            raise PublishRefused(_text(_T_NOT_JOURNALED), _QOS_NOT_SUPPORTED)
        if self._busy == len(self._state):
            raise QueueFull(_text(_T_SLOTS_FULL, self._busy))
        pid = self.allocate_pid()
        i = self._slot_for(pid)
        serial = self.serial + 1
        mark = self.mark if mark is None else mark
        body = self.journal.body
        n = rec.pub_size(len(topic), len(payload))
        if n > len(body):
            raise PublishRefused(_text(_T_RECORD_LARGE, (n, len(body))), _PACKET_TOO_LARGE)
        # journal.body is about to hold this record: the last one's send can no longer read it from there (and
        # if the journal refuses this one, neither will this one's).
        self.fresh = -1
        rec.put_pub(body, pid, qos, retain, serial, mark, topic, payload)
        addr = self.journal.commit(rec.PUB, n, defer)  # the durability point of publish() (or of sync())
        self.staged = self.staged + 1 if defer else 0
        # Only now: a commit that opens a sector snapshots the counters first, and a snapshot must never
        # count a message whose own record a power cut could still tear.
        self.serial = serial
        self.mark = mark
        self._queue(i, pid, qos, serial, addr)
        self._rel_addr[i] = n  # its size, until PUBREC (whoever queues a flow sets it)
        self.fresh = i
        self._fresh_topic = topic
        self._fresh_payload = payload
        return pid

    def _queue(self, i, pid, qos, serial, addr):
        """Slot i holds a new flow, its PUB record journaled at addr: queued to be sent, after those before it."""
        self._pid[i] = pid
        self._state[i] = QUEUED
        self._tx[i] = 0
        self._qos[i] = qos
        self._addr[i] = addr
        self._serial[i] = serial
        self._busy += 1
        q = self._sendq
        q[(self._sendq_head + self._sendq_len) % len(q)] = i
        self._sendq_len += 1

    def returned(self):
        """The publish() that called accept() is returning: the application may reuse its topic and payload
        buffers from now on, so a message still queued is read back from the journal to be sent."""
        self.fresh = -1
        self._fresh_topic = self._fresh_payload = b""

    def sync(self):
        """Make group-committed messages durable (one program for all of them)."""
        if self.staged:
            self.journal.sync()
            self.staged = 0

    def note_mark(self, mark):
        """Journal the application's progress for a message that has no record of its own (QoS 0)."""
        self.fresh = -1  # journal.body is about to hold another record
        self.journal.commit(rec.MARK, rec.put_mark(self.journal.body, mark))
        self.mark = mark  # after the commit, for the same reason as in accept()

    def outstanding(self):
        """Outgoing QoS 1/2 messages not yet completed."""
        return self._busy

    def full(self):
        """Every slot holds a message."""
        return self._busy == len(self._state)

    # -- connection events ---------------------------------------------------------------------------------

    def connected(self, session_present, receive_max=65535, max_qos=2, retain_available=True, topic_aliases=0):
        """After CONNACK. The window is ours (or our slots, on auto) capped by the broker's Receive Maximum: the
        client sends no more unacknowledged QoS 1/2 PUBLISH packets than that [MQTT-3.3.4-7]. topic_aliases: the
        broker's Topic Alias Maximum (0: none)."""
        global codec
        if codec is None:
            from dmqtt import codec
        self.connected_now = True
        # Aliases live as long as the network connection: none is carried to the next one [MQTT-3.3.2-7], so a
        # flow resent after a reconnect names its topic again.
        self._aliases = []
        self._alias_max = min(_ALIASES, topic_aliases) if self.version == codec.V5 else 0
        auto = len(self._state) if self.version == codec.V5 else _LEGACY_WINDOW
        self.window = max(1, min(self.window_config or auto, receive_max))
        self.max_qos = max_qos
        self.retain_available = retain_available
        self._ctl_len = 0
        # The rings and the window count, rebuilt from the slots: every flow, oldest first by serial (so flows
        # resent on a kept session go in the order they were first sent [MQTT-4.6.0-1]), then split into the
        # flows owing a PUBREL and the messages to send as PUBLISH (in place: the second never passes the first).
        state = self._state
        serial = self._serial
        order = self._sendq
        n = 0
        for i in range(len(state)):
            self._tx[i] = 0
            if state[i] == FREE:
                continue
            # The broker has no session: it never saw, or has forgotten, these flows. Each is sent again as a
            # new flow (PUBLISH, DUP=0), not dropped; even after PUBREC, since a broker that releases QoS 2
            # messages on PUBREL (Mosquitto does) would otherwise lose it. Exactly once cannot survive a
            # broker that forgets its sessions; this keeps "never lost".
            if not session_present:
                state[i] = QUEUED
            k = n
            while k and serial[order[k - 1]] > serial[i]:
                order[k] = order[k - 1]
                k -= 1
            order[k] = i
            n += 1
        self._sendq_head = self._sendq_len = self._relq_head = self._relq_len = self.in_window = 0
        for k in range(n):
            i = order[k]
            if state[i] == WAIT_COMP:  # PUBREL owed: its flow holds a place in the window
                self._relq[self._relq_len] = i
                self._relq_len += 1
                self.in_window += 1
            else:  # QUEUED, or WAIT_ACK not sent on this connection
                order[self._sendq_len] = i
                self._sendq_len += 1
        # What the application has not had yet (a hook set after open(), a handler that raised), it gets now.
        self.deliver_pending()
        if not session_present:
            # The broker forgot its incoming flows: their packet ids are free again, on both sides. (The asyncio
            # face lets the application finish with what it holds first: dmqtt.aio.)
            for j in range(len(self.rx_pids)):
                if self.rx_pids[j]:
                    self.journal_pid(rec.RXDONE, self.rx_pids[j])
                    self.rx_pids[j] = 0

    def lost(self):
        self.connected_now = False

    # -- outgoing packets ----------------------------------------------------------------------------------

    def next_packet(self, buf, at=0):
        """Encode the next packet the session wants sent into buf at `at`, behind the packets before it there;
        returns where it ends, or 0 for none. From at > 0, also 0 when the next packet would not fit behind
        them: it stays next, for the next call from 0."""
        if not self.connected_now:
            return 0
        if self.staged:  # (the test inline: this runs a few times per message)
            self.sync()
        if (self._ctl_len or self._relq_len) and at + _ACK_MAX > len(buf):
            return 0
        if self._ctl_len:
            h = self._ctl_head
            self._ctl_head = (h + 1) % _CONTROL_MAX
            self._ctl_len -= 1
            owed = self._ctl[h]
            reason = (owed >> 16) & 0xFF if self.version == codec.V5 else 0
            return codec.encode_ack(owed >> 24, owed & 0xFFFF, reason, self.version, None, buf, at)
        if self._relq_len:  # PUBRELs first: those flows already hold their place in the window
            i = self._relq[self._relq_head]
            self._relq_head = (self._relq_head + 1) % len(self._relq)
            self._relq_len -= 1
            self._tx[i] = 1
            return codec.encode_ack(codec.PUBREL, self._pid[i], 0, self.version, None, buf, at)
        while self._sendq_len and self.in_window < self.window:
            i = self._sendq[self._sendq_head]
            end = self._encode_publish(i, buf, at)
            if not end:
                return 0  # no room behind the packets before it
            self._sendq_head = (self._sendq_head + 1) % len(self._sendq)
            self._sendq_len -= 1
            if end - at <= self.max_packet:
                return end
            # Accepted before the limit was known (a reboot, another broker): it can never be sent. The flow
            # ends as refused and frees its slot, instead of holding the window for ever.
            self._finish(i, codec.PACKET_TOO_LARGE)
        return 0

    def _encode_publish(self, i, buf, at):
        """Slot i's PUBLISH at `at` in buf; returns where it ends, or 0 (nothing done) when at > 0 and it might
        not fit behind what is there."""
        resend = self._state[i] == WAIT_ACK  # after a reconnect with a session: same id, DUP=1
        if i == self.fresh:
            body = self.journal.body  # its fixed fields only: topic and payload are the application's, the same
            topic = self._fresh_topic
            payload = self._fresh_payload
        else:
            n = self.journal.read(self._addr[i])
            body = self.journal.record
            topic = rec.pub_topic(body)
            payload = rec.pub_payload(body, n)
        # Before wire_topic, which may give the topic an alias the broker would then be taken to know.
        if at and at + len(topic) + len(payload) + _PUBLISH_EXTRA > len(buf):
            return 0
        qos = rec.pub_qos(body)
        retain = rec.pub_retain(body)
        if qos > self.max_qos:
            # MQTT 5.0 CONNACK Maximum QoS: never send above it [MQTT-3.2.2-11], and never below the QoS it was
            # accepted at either (a QoS 2 message sent at QoS 1 may arrive twice). Before anything of it is
            # written: it stays first in the queue, journaled, and the client ends the connection saying so.
            raise ProtocolError(_text(_T_ABOVE_MAX_QOS, (self.max_qos, qos)), _IMPLEMENTATION_ERROR)
        if retain and not self.retain_available:
            retain = False  # Retain Available 0: a retained PUBLISH would be a protocol error [MQTT-3.2.2-14]
            self.retain_cleared += 1
        pid = self._pid[i]
        props = None if self.resent_props is None else self.resent_props(body)
        flags = qos << codec.QOS_SHIFT | (codec.RETAIN_FLAG if retain else 0)
        if resend and qos:
            flags |= codec.DUP_FLAG  # a copy sent again [MQTT-3.3.1-1]
        n = codec.write_publish(
            self.wire_topic(topic),
            payload,
            flags,
            pid if qos else 0,
            self.version,
            props,
            buf,
            at,
            self.wire_alias,
        )
        if n - at > self.max_packet:
            return n
        if qos == 0:
            self._finish(i, codec.SUCCESS)
        else:
            self._qos[i] = qos
            self._state[i] = WAIT_ACK
            self._tx[i] = 1
            self.in_window += 1
        return n

    def wire_topic(self, topic):
        """The topic for a PUBLISH of `topic` on this connection, its Topic Alias left in wire_alias (0: none;
        codec.write_publish writes it): an alias when the broker grants them (1 .. its Topic Alias Maximum, never
        0 nor above [MQTT-3.3.2-8] [MQTT-3.3.2-9]); once the broker knows the alias, a zero-length name stands
        for the topic (MQTT 5.0 section 3.3.2.3.4)."""
        self.wire_alias = 0
        if not self._alias_max:
            return topic
        aliases = self._aliases
        for i in range(len(aliases)):
            if aliases[i] == topic:
                self.wire_alias = i + 1
                return b""
        if len(aliases) < self._alias_max:
            aliases.append(bytes(topic))
            self.wire_alias = len(aliases)
        return topic

    # -- incoming packets ----------------------------------------------------------------------------------

    def handle(self, ptype, flags, body):
        """A packet from the broker that belongs to the publish flows. Raises codec.CodecError on a malformed
        packet and ProtocolError on a broken rule: the client then disconnects."""
        if ptype == codec.PUBLISH:
            self._on_publish(flags, body)
        elif ptype == codec.PUBACK or ptype == codec.PUBREC or ptype == codec.PUBCOMP:
            self.acked(ptype, codec.check_ack(ptype, body, self.version), codec.ack_reason(body))
        elif ptype == codec.PUBREL:
            pid = codec.check_ack(ptype, body, self.version)
            j = self.rx_find(pid)
            if j >= 0:
                from dmqtt import inbox

                if not self.rx_handled[j]:
                    inbox.deliver(self, j)  # (a handler that raised earlier): the application first
                inbox.release(self, j)
            else:
                # Unexpected PUBREL: answer so the broker's flow ends; the connection stays up.
                self.owe(codec.PUBCOMP, pid, codec.PACKET_ID_NOT_FOUND)

    def acked(self, ptype, pid, reason):
        """A PUBACK, PUBREC or PUBCOMP from the broker, checked (codec.check_ack, or the decoder's short_ack).
        ProtocolError for one that answers no flow of ours or not as its QoS asks [MQTT-3.3.4-1] (RabbitMQ's MQTT
        plugin answers QoS 2 with PUBACK): waiting for the right one would stall the window for ever, so the
        client ends the connection saying what the broker did, and the flow stays journaled. A PUBREC is not one:
        a broker may send it again after a reconnect (amqtt does, for a flow that owes its PUBREL or has ended), and
        MQTT 5.0 calls a PUBREC of no flow "not an error during recovery" (4.3.3): a PUBREL answers it."""
        i = self._find(pid)
        qos = 0
        if i < 0 and ptype == codec.PUBREC:
            self.owe(codec.PUBREL, pid, codec.PACKET_ID_NOT_FOUND)  # (its flow ended before the reconnect)
            return
        if i >= 0:
            state = self._state[i]
            if state == WAIT_COMP and ptype != codec.PUBACK:
                if ptype == codec.PUBCOMP and self._tx[i]:
                    self._finish(i, reason)
                return  # (a PUBREC again: the PUBREL owed answers it, sent or to send on this connection)
            if self._tx[i]:
                qos = self._qos[i]
                sizes = self._rel_addr
                if state == WAIT_ACK and sizes[i] > sizes[-1]:
                    sizes[-1] = sizes[i]  # the largest acknowledged so far
                if state == WAIT_ACK and ptype == (codec.PUBACK if qos == 1 else codec.PUBREC):
                    if qos == 1 or reason >= 0x80:
                        self._finish(i, reason)  # (a refused PUBREC ends the flow: no PUBREL, MQTT 5.0 4.3.3)
                    else:
                        self._journal_rel(i)
                    return
        raise ProtocolError(_text(_T_WRONG_ACK, (ptype, pid, qos)))

    def _on_publish(self, flags, body):
        topic, pid, payload, _props = codec.decode_publish(flags, body, self.version)
        qos = (flags >> 1) & 3
        if qos == 2:
            from dmqtt import inbox  # the receive side for incoming QoS 2, loaded when first needed

            inbox.publish(self, topic, pid, payload, bool(flags & 1), bool(flags & 8))
            return
        self.rx_pid = pid
        self.rx_number = 0
        if self.on_message is not None:
            self.on_message(topic, bytes(payload), qos, bool(flags & 1), bool(flags & 8))
        if qos == 1 and not self.defer:
            self.owe(codec.PUBACK, pid, codec.SUCCESS)

    def deliver_pending(self):
        """Hand the application the incoming QoS 2 messages its handler has not returned from (a power cut or
        an exception came first), from the journal, flagged dup: the client calls this when the journal is open
        and at every connect."""
        for j in range(len(self.rx_pids)):
            if self.rx_pids[j] and not self.rx_handled[j]:
                from dmqtt import inbox

                inbox.deliver_pending(self)
                return

    def hand_over(self, j, topic, payload, retain, dup):
        """The handler, then its return journaled. A cut between the two is the one window no journal closes:
        the message comes again after the reboot (dup set) with the same receive number, by which an
        application that keeps the number with its effect recognises it (docs/client.md)."""
        if self.on_message is not None:
            self.on_message(topic, bytes(payload), 2, retain, dup)
        self.rx_addr[j] = self.journal_pid(rec.HANDLED, self.rx_pids[j])
        self.rx_handled[j] = 1

    # -- helpers ---------------------------------------------------------------------------------------------

    def owe(self, ptype, pid, reason):
        if self._ctl_len == _CONTROL_MAX:
            raise ProtocolError(_text(_T_ACKS_BEHIND), codec.RECEIVE_MAXIMUM_EXCEEDED)
        self._ctl[(self._ctl_head + self._ctl_len) % _CONTROL_MAX] = ptype << 24 | reason << 16 | pid
        self._ctl_len += 1

    def journal_pid(self, rtype, pid):
        self.fresh = -1  # journal.body is about to hold another record
        return self.journal.commit(rtype, rec.put_pid(self.journal.body, pid))

    def _journal_rel(self, i):
        self.fresh = -1  # journal.body is about to hold another record
        self._rel_addr[i] = self.journal.commit(rec.REL, rec.put_rel(self.journal.body, self._pid[i], self._serial[i]))
        self._state[i] = WAIT_COMP
        self._tx[i] = 0  # PUBREL owed (its flow keeps its place in the window)
        q = self._relq
        q[(self._relq_head + self._relq_len) % len(q)] = i
        self._relq_len += 1

    def _finish(self, i, reason):
        pid = self._pid[i]
        self.fresh = -1  # (journal_pid written out: one call less per message)
        self.journal.commit(rec.DONE, rec.put_pid(self.journal.body, pid))
        if self._tx[i] or self._state[i] == WAIT_COMP:
            self.in_window -= 1  # a place in the window is free
        self._state[i] = FREE
        self._tx[i] = 0
        self._busy -= 1
        if self.on_result is not None:
            self.on_result(pid, reason)

    def _find(self, pid):
        i = pid % len(self._state)
        if self._state[i] != FREE and self._pid[i] == pid:  # its home slot, where a flow usually is (_slot_for)
            return i
        for i in range(len(self._state)):
            if self._state[i] != FREE and self._pid[i] == pid:
                return i
        return -1

    def _slot_for(self, pid):
        """The slot for a new flow with this packet id: its home slot (pid modulo the slots) when free, so that
        _find looks at one slot, not all of them; else the first free one (-1: none)."""
        i = pid % len(self._state)
        if self._state[i] == FREE:
            return i
        for i in range(len(self._state)):
            if self._state[i] == FREE:
                return i
        return -1

    def rx_find(self, pid):
        for j in range(len(self.rx_pids)):
            if self.rx_pids[j] == pid:
                return j
        return -1

    def allocate_pid(self):
        # Never 0, wrapping 65535 -> 1 [MQTT-2.3.1-1], skipping ids still in flight.
        pid = self.next_pid % 0xFFFF + 1
        if self._free_pids and self.next_pid == self._free_after:
            self._free_pids -= 1
            self.next_pid = self._free_after = pid
            return pid
        for _ in range(len(self._state) + 1):
            if self._find(pid) < 0:
                self.next_pid = self._free_after = pid
                # Ids are handed out in order, so the ones up to the next id in flight stay free until then.
                run = 0xFFFE
                for i in range(len(self._state)):
                    if self._state[i] != FREE:
                        run = min(run, (self._pid[i] - pid - 1) % 0xFFFF)
                self._free_pids = run
                return pid
            pid = pid % 0xFFFF + 1
        raise QueueFull(_text(_T_NO_PID))
