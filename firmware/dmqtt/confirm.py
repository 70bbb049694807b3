# End-to-end confirmation, the board's half (docs/confirmation.md): the broker's acknowledgement says the broker
# has a message, not that it reached the store; a broker killed before its persistence saved it, or one that
# acknowledges and discards (Mosquitto's 3.1.1 ACL refusals), loses it all the same. The recorder publishes, per
# board, which messages it has stored durably; the board keeps every message readable in its journal until a
# confirmation covers it, and sends again, from the journal, what the store lacks.
#
# Messages are named as the telemetry names them: an epoch (the board's boot) and its sequence number (0, 1, 2
# ... the messages accepted in that epoch). The board maps them to its acceptance serials: an epoch's messages
# hold consecutive serials from the one its EPOCH record names, so a few epochs in RAM map every message.
#
# The state that outlives a power cut is journaled: EPOCH records (one per boot), a CONFIRMED record when the
# confirmed point has moved 32 messages on, and both again in each sector's META snapshot.
# ConfirmingSession is the session with this added (sans-I/O like it: fed confirmations by take(), tended when
# the client polls); ConfirmingClient is the client that makes one and hands it its confirmations. Subclasses,
# so that a board without confirmation loads none of this and its session and client pay nothing for it.

import struct
import time
from array import array

from dmqtt import codec
from dmqtt import journal_record as rec
from dmqtt.client import CONNECTED, MQTTClient
from dmqtt.errors import JournalError, MQTTError, QueueFull
from dmqtt.session import FREE, Session

if False:  # type checkers only: MicroPython has no typing module
    from typing import Any

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


_VERSION = const(1)  # the confirmation's first byte
_RESENT = const(8)  # PUB's flags: a copy sent again (docs/journal.md)
# Epochs mapped at once: as many boots as the recorder remembers per device (a board that loses power often has
# many boots between confirmations: 8 gave up a boot the broker had lost in make soak's chaos campaign, 11 boots
# a board); a seventeenth gives up the oldest one's unconfirmed messages, counted. 13 bytes of heap each.
_EPOCHS = const(16)
_BATCH = const(8)  # messages found per pass over the journal when sending again
# The confirmed point is journaled (a CONFIRMED record) once it has moved this far, and in every sector's META:
# not at every confirmation, which at one message a second would be a record per message (7% more flash wear).
# A reboot may thus forget the last few confirmations; the recorder's retained one, at the first subscription,
# gives them back, and without it they are only sent again (the store keeps them once).
_JOURNAL_EVERY = const(32)


class ConfirmingSession(Session):
    """The session that keeps the confirmed point (`floor`: every serial up to it is stored, or was given up) and
    sends again what the store lacks. Counters: resent, dropped (given up unconfirmed: the journal reused their
    space first), late (times messages stayed unconfirmed for timeout_s: sent again). ConfirmingClient sets
    timeout_ms, hold and on_late."""

    def __init__(self, store, version, window, max_messages, rx_max):
        super().__init__(store, version, window, max_messages, rx_max)
        self.timeout_ms = 30000
        self.hold = False  # keep unconfirmed messages even when the journal needs room (publish() waits instead)
        self.floor = 0
        self.resent = 0
        self.dropped = 0
        self.late = 0
        self._epoch = array("I", bytes(4 * _EPOCHS))
        self._first = array("I", bytes(4 * _EPOCHS))
        # Per epoch, how many of its messages (from seq 0) the recorder has said it stores: remembered, so that the
        # floor can run on through epochs confirmed while an older one still held it back.
        self._done = array("I", bytes(4 * _EPOCHS))
        self._kept = bytearray(_EPOCHS)  # 1: the epoch is known stored whole, and journaled so (EPOCH with a count)
        self._older = False  # a confirmation raised an older epoch's count: tend() looks for one to journal
        self._epochs = 0
        self.current_epoch = -1  # the application's epoch (ConfirmingClient's), journaled at its first message
        self.stamp = -1  # the newest confirmation's stamp (-1: none since boot)
        self._acked = -1  # the highest serial the broker acknowledged (-1: unknown, after boot)
        self._journaled = 0  # the floor as last journaled
        self._due: Any = 0  # (ticks) when the messages up to _due_serial are overdue
        self._due_serial = 0  # 0: no deadline armed
        self._lo = 0  # messages to send again: serials lo..hi (hi 0: none)
        self._hi = 0
        self._sweep = False  # a sweep (everything unconfirmed after the timeout), not a listed gap
        self._found = array("I", bytes(4 * _BATCH))  # a pass's finds: serials and addresses
        self._found_at = array("I", bytes(4 * _BATCH))
        self._nfound = 0
        self._want = 0
        self._skip = 0  # the lowest serial of the range a flow in flight carries (0: none)
        self._counted = 0  # the highest serial counted in `dropped`
        self._sweep_to = 0  # an overdue sweep goes on, batch by batch, up to this serial (0: none)
        self._beyond = 0  # a pass's lowest serial past its range (0: none)
        self._sweep_next = 0  # where the next timeout's batch starts (after the last batch sent)
        self.on_late = None  # callable(count): the first time messages stay unconfirmed for timeout_s

    # -- the application's ---------------------------------------------------------------------------------

    def unconfirmed(self):
        """Messages accepted and not yet confirmed (in flight ones included)."""
        return self.serial - self.floor

    def stats(self):
        return {"unconfirmed": self.unconfirmed(), "resent": self.resent, "dropped": self.dropped, "late": self.late}

    # -- the session's, extended -------------------------------------------------------------------------------

    def accept(self, topic, payload, qos, retain=False, mark=None, defer=False):
        """As the session's; the first message of an epoch journals the epoch and its first serial before it.
        While messages wait to be sent again, new ones leave them a batch of slots: publish() waits (QueueFull)
        rather than let a busy board starve the repair until the journal gives the missing ones up."""
        if self._hi and self.connected_now and len(self._state) - self.outstanding() <= _BATCH:
            raise QueueFull("sending again what the store lacks first")
        if self.current_epoch >= 0 and not (self._epochs and self._epoch[self._epochs - 1] == self.current_epoch):
            serial = self.serial + 1  # the one accept() gives it
            self.fresh = -1  # journal.body is about to hold another record
            self._add(self.current_epoch, serial)
            struct.pack_into(">II", self.journal.body, 0, self.current_epoch, serial)
            self.journal.commit(rec.EPOCH, 8)
        return super().accept(topic, payload, qos, retain, mark, defer)

    def _finish(self, i, reason):
        if self._serial[i] > self._acked:
            self._acked = self._serial[i]
        super()._finish(i, reason)

    def is_live(self, rtype, body, addr):
        # A finished flow's message is kept too while it is unconfirmed, when the configuration asks to hold it.
        if super().is_live(rtype, body, addr):
            return True
        return self.hold and rtype == rec.PUB and rec.serial_of(rec.PUB, body) > self.floor

    def holds(self, lo, hi):
        # Held messages are live by serial, wherever they lie: any may, while one is unconfirmed.
        return (self.hold and self.serial > self.floor) or super().holds(lo, hi)

    def snapshot(self, body):
        n = super().snapshot(body)
        struct.pack_into(">IB", body, n, self.floor, self._epochs)
        n += 5
        for k in range(self._epochs):
            struct.pack_into(">III", body, n, self._epoch[k], self._first[k], self._done[k])
            n += 12
        return n

    def replay(self, rtype, body, addr):
        super().replay(rtype, body, addr)
        if rtype == rec.EPOCH:
            epoch, first = struct.unpack_from(">II", body, 0)
            k = self._epoch_index(epoch)
            if len(body) < 12:
                if k < 0:
                    self._add(epoch, first)  # an epoch's start
            elif k >= 0:  # an epoch the recorder stores whole
                self._done[k] = max(self._done[k], struct.unpack_from(">I", body, 8)[0])
                self._kept[k] = 1
        elif rtype == rec.CONFIRMED:
            self.floor = max(self.floor, rec.mark_of(body))
            self._journaled = self.floor
        elif rtype == rec.META and len(body) > rec.meta_size(body):
            tail = rec.meta_size(body)
            floor, count = struct.unpack_from(">IB", body, tail)
            self.floor = max(self.floor, floor)
            self._journaled = self.floor
            self._epochs = 0
            for k in range(count):
                epoch, first, done = struct.unpack_from(">III", body, tail + 5 + 12 * k)
                self._add(epoch, first)
                self._done[k] = done

    def _add(self, epoch, first):
        if self._epochs == _EPOCHS:
            # No room to map another epoch: the oldest one's unconfirmed messages are given up.
            self._give_up(self._first[1] - 1)
            self._shift()
        self._epoch[self._epochs] = epoch
        self._first[self._epochs] = first
        self._done[self._epochs] = 0
        self._kept[self._epochs] = 0
        self._epochs += 1

    def _shift(self):
        for k in range(1, self._epochs):
            self._epoch[k - 1] = self._epoch[k]
            self._first[k - 1] = self._first[k]
            self._done[k - 1] = self._done[k]
            self._kept[k - 1] = self._kept[k]
        self._epochs -= 1

    def _size(self, k):
        """How many messages epoch k holds (so far, for the current one)."""
        return (self._first[k + 1] if k + 1 < self._epochs else self.serial + 1) - self._first[k]

    def _give_up(self, serial):
        """Every message up to `serial` is stored or gone: the floor moves there."""
        if serial > self.floor:
            self._gone(self.floor + 1, serial)
            self.floor = serial

    def _gone(self, first, last):
        """The messages first..last are no longer in the journal, unconfirmed: counted once each."""
        first = max(first, self._counted + 1)
        if last >= first:
            self.dropped += last - first + 1
            self._counted = last

    # -- the confirmation ------------------------------------------------------------------------------------

    def take(self, data):
        """A confirmation from the recorder (docs/confirmation.md); an older one than the newest taken is
        ignored, so a late one never undoes a newer one, and so is one that is not exactly what the format says
        (another version, cut short, or longer)."""
        n = len(data)
        if n < 6 or data[0] != _VERSION:
            return
        off = 6
        for _ in range(data[5]):
            if off + 13 > n:
                return
            off += 13 + 8 * data[off + 12]
        if off != n:
            return
        stamp = struct.unpack_from(">I", data, 1)[0]
        if self.stamp >= 0 and (stamp - self.stamp) & 0xFFFFFFFF >= 0x80000000:
            return
        self.stamp = stamp
        off = 6
        for _ in range(data[5]):
            epoch, stored, _top, ranges = struct.unpack_from(">IIIB", data, off)
            off += 13
            k = self._epoch_index(epoch)
            if k >= 0:
                if stored > self._done[k]:
                    self._done[k] = stored
                    self._older = self._older or k + 1 < self._epochs
                size = self._size(k)
                if ranges and (not self._hi or self._sweep):
                    # A gap the recorder names comes before an overdue sweep (a guess at what it lacks).
                    # A batch of it (the next confirmation names what is still missing): a gap may only be messages
                    # the broker still holds for a recorder that is behind.
                    a, b = struct.unpack_from(">II", data, off)
                    if a < size:
                        self._pass(self._first[k] + a, self._first[k] + min(b, a + _BATCH - 1, size - 1), False)
                        self._sweep_to = 0
            off += 8 * ranges
        for k in range(self._epochs):  # the floor runs on through every epoch stored whole
            first = self._first[k]
            if self.floor + 1 < first:
                break
            self.floor = max(self.floor, first - 1 + min(self._done[k], self._size(k)))
            if self._done[k] < self._size(k):
                if (
                    first == self.floor + 1
                    and not self._done[k]
                    and (not self._hi or self._sweep)
                    and k + 1 < self._epochs
                ):
                    # Held at the start of an older epoch the recorder has said nothing of (it lists a few boots
                    # at a time, and a reboot forgets what it said before): its first message goes again, so that
                    # the recorder, seeing news of that boot, lists it. (Not the current epoch: its messages may
                    # simply not have reached the recorder yet.) Before an overdue sweep, a guess that walks a
                    # batch per timeout: the floor could wait behind that epoch for longer than the ring holds.
                    self._pass(first, first, False)
                break
        while self._epochs > 1 and self._first[1] - 1 <= self.floor:
            self._shift()  # fully confirmed: no longer needed to map anything
        if self._sweep_to and not self._hi:
            # The batch sent again is stored. The floor stopping right after it says the next ones are missing
            # too (a lost tail): on with the sweep. Past it, the recorder had them: the timeout watches the rest.
            if self.floor == self._lo - 1 and self.floor < self._sweep_to:
                self._sweep_on()
            elif self.floor >= self._lo - 1:
                self._sweep_to = 0

    def _epoch_index(self, epoch):
        for k in range(self._epochs):
            if self._epoch[k] == epoch:
                return k
        return -1

    def _pass(self, lo, hi, sweep):
        self._lo = lo
        self._hi = hi
        self._sweep = sweep

    def _sweep_on(self):
        """The next batch of an overdue sweep: the lowest unconfirmed messages, a batch at a time. Not all at once:
        a recorder that is only behind (killed, its disk full) would get each message again, and while it caught
        up with those, more would go overdue and be sent again."""
        self._pass(self.floor + 1, min(self._sweep_to, self.floor + _BATCH), True)

    # -- sending again ----------------------------------------------------------------------------------------

    def tend(self):
        """From the client's poll: journal a moved floor, send again what is overdue or reported missing."""
        if self.floor - self._journaled >= _JOURNAL_EVERY:
            self.sync()
            self.fresh = -1  # journal.body is about to hold another record
            self.journal.commit(rec.CONFIRMED, rec.put_mark(self.journal.body, self.floor))
            self._journaled = self.floor
        for k in range(self._epochs - 1 if self._older else 0):
            # An older epoch the recorder stores whole, though the floor may wait behind it: journaled, so that a
            # reboot does not forget it (the recorder lists only a few boots at a time).
            if not self._kept[k] and self._done[k] >= self._size(k):
                self.sync()
                self.fresh = -1  # journal.body is about to hold another record
                struct.pack_into(">III", self.journal.body, 0, self._epoch[k], self._first[k], self._done[k])
                self.journal.commit(rec.EPOCH, 12)
                self._kept[k] = 1
        self._older = False
        if self._acked < 0:
            self._acked = self.serial  # after a boot: all of them may have been acknowledged before it
        now = time.ticks_ms()
        if self._due_serial:
            if self.floor >= self._due_serial:
                self._due_serial = 0
            elif time.ticks_diff(now, self._due) >= 0:
                if not self._hi:  # (only those acknowledged when the clock started: each had its timeout)
                    self._sweep_to = self._due_serial
                    # A batch per timeout, each after the last one (confirmations that never come would
                    # otherwise bring the same batch round again), from the floor once past the end.
                    start = self._sweep_next if self.floor < self._sweep_next <= self._sweep_to else self.floor + 1
                    self._pass(start, min(self._sweep_to, start + _BATCH - 1), True)
                self._due_serial = 0
                self.late += 1
                if self.late == 1 and self.on_late is not None:
                    self.on_late(self.unconfirmed())
        if not self._due_serial and self._acked > self.floor:
            self._due_serial = self._acked
            self._due = time.ticks_add(now, self.timeout_ms)
        if self._hi and self.connected_now:
            self._send_again()

    def _send_again(self):
        """One pass over the journal: the lowest serials of lo..hi it still holds, each sent again as a new flow."""
        self._want = min(len(self._state) - self.outstanding(), _BATCH)
        if not self._want:
            return
        before = self.floor
        self._nfound = 0
        self._skip = 0
        self._beyond = 0
        self.journal.scan(self._visit)
        if self._sweep:  # what lies below the lowest still held is gone from the journal
            lowest = self._found[0] if self._nfound else (self._beyond or self._sweep_to + 1)
            if self._skip and self._skip < lowest:
                lowest = self._skip
            if self._lo == self.floor + 1:
                self._give_up(min(lowest, self._sweep_to + 1) - 1)
            else:
                self._gone(self._lo, min(lowest, self._hi + 1) - 1)
        for k in range(self._nfound):
            try:
                n = self.journal.read(self._found_at[k])
            except JournalError:
                continue  # its sector was reused meanwhile: the next pass looks again
            body = self.journal.record
            if self.journal.record_type != rec.PUB or rec.serial_of(rec.PUB, body) != self._found[k]:
                continue
            try:
                self._requeue(body[:n])
            except QueueFull:
                return  # no room: the next poll tries again from the same place
            self.resent += 1
            self._lo = self._sweep_next = self._found[k] + 1
        if self._nfound < self._want or self._lo > self._hi:
            self._hi = 0  # the range is done
            if self._sweep_to > self.floor > before and not self._nfound:
                # Nothing of this batch was left to send (given up): the next batch, which starts at the lowest
                # message still held, at once.
                self._sweep_on()
                self._send_again()

    def _requeue(self, body):
        """Send again, as a new flow, the message of a journaled PUB body: a new record with a new packet id and
        the message's own serial, so that the flow is journaled like any other (a QoS 2 flow must be: a broker
        that has its PUBREC holds the packet id until PUBREL) and the serial still names the message. The
        session's slot is filled and queued as accept() does it."""
        if self.full():
            raise QueueFull("no free slot")
        pid = self.allocate_pid()
        i = self._slot_for(pid)
        n = len(body)
        self.fresh = -1  # journal.body is about to hold this record
        copy = self.journal.body
        copy[:n] = body  # (body is the read buffer, which a commit that opens a sector reuses)
        rec.put_pid(copy, pid)
        copy[2] |= _RESENT
        qos = rec.pub_qos(copy)
        serial = rec.serial_of(rec.PUB, copy)
        self._queue(i, pid, qos, serial, self.journal.commit(rec.PUB, n))
        self._rel_addr[i] = n  # its size, until PUBREC (Session._rel_addr)

    def resent_props(self, body):
        """The properties of a journaled message's PUBLISH: a copy this session sends again goes out marked
        (docs/confirmation.md), in MQTT 5.0 with the User Property ("dmqtt", "resent") the broker passes on to
        subscribers [MQTT-3.3.2-17], which the recorder and the campaigns read (dmqtt_telemetry.format.RESENT_MARK).
        MQTT 3.1 and 3.1.1 have no place for it: there a copy is known only by what it carries."""
        if body[2] & _RESENT and self.version == codec.V5:
            return {codec.USER_PROPERTY: [("dmqtt", "resent")]}
        return None

    def _carried(self, serial):
        """Whether a flow in flight carries the message of this serial."""
        for i in range(len(self._state)):
            if self._state[i] != FREE and self._serial[i] == serial:
                return True
        return False

    def _visit(self, rtype, body, addr):
        if rtype != rec.PUB:
            return
        serial = rec.serial_of(rec.PUB, body)
        if serial < self._lo:
            return
        if serial > self._hi:
            if not self._beyond or serial < self._beyond:
                self._beyond = serial  # the lowest held past the batch: a sweep gives up what lies below it
            return
        if self._carried(serial):
            if not self._skip or serial < self._skip:
                self._skip = serial
            return
        # Keep the _want lowest serials found, each once (a message sent again has two records).
        found = self._found
        n = self._nfound
        k = n
        while k and found[k - 1] > serial:
            k -= 1
        if (k and found[k - 1] == serial) or k >= self._want:
            return
        if n == self._want:
            n -= 1
        for j in range(n, k, -1):
            found[j] = found[j - 1]
            self._found_at[j] = self._found_at[j - 1]
        found[k] = serial
        self._found_at[k] = addr
        self._nfound = n + 1


# How long settle() waits past the acknowledgements for a retained confirmation that has not come: the recorder
# publishes it when it stores a batch, so none comes only before it has stored anything of this board's.
_HEAR_MS = const(500)


class ConfirmingClient(MQTTClient):
    """MQTTClient with end-to-end confirmation: the recorder's confirmations arrive on `confirm_topic` (subscribe
    to it at QoS 0 after each connect: the recorder retains its newest), never reaching on_message; messages are
    numbered 0, 1, 2 ... within `epoch` (a board: its boot); timeout_s: how long an acknowledged message may stay
    unconfirmed before it is sent again; hold: keep unconfirmed messages when the journal needs room (publish()
    waits) rather than give the oldest up. The counters are the session's: session.resent, .dropped, .late."""

    _Session = ConfirmingSession
    session: "ConfirmingSession"  # (an annotation only: the client makes it from _Session)

    def __init__(self, client_id, store, confirm_topic, epoch, timeout_s=30, hold=False, **options):
        super().__init__(client_id, store, **options)
        self.confirm_topic = confirm_topic
        session = self.session
        session.current_epoch = epoch
        session.timeout_ms = timeout_s * 1000
        session.hold = hold

    def unconfirmed(self):
        """Messages accepted and not yet confirmed by the recorder (in flight ones included)."""
        return self.session.unconfirmed()

    def poll(self, timeout_ms=0):
        if self.state == CONNECTED:  # (else the client's poll says it is not)
            self.session.tend()
        super().poll(timeout_ms)

    def settle(self, timeout_ms):
        """As MQTTClient.settle, with the recorder's retained confirmation read: it follows the SUBACK of
        confirm_topic, so it has come by the time the messages are acknowledged, or within _HEAR_MS after (none
        comes while the recorder has stored nothing of this board's). What it says is missing goes again first."""
        end = time.ticks_add(time.ticks_ms(), timeout_ms)
        try:
            self.wait_idle(timeout_ms)
            hear = time.ticks_add(time.ticks_ms(), min(_HEAR_MS, time.ticks_diff(end, time.ticks_ms())))
            while self.session.stamp < 0 and time.ticks_diff(hear, time.ticks_ms()) > 0:  # none since boot
                self.poll(20)
            self.poll()  # what the confirmation says is missing, queued and sent
        except (OSError, MQTTError):
            self.close()
        return super().settle(max(0, time.ticks_diff(end, time.ticks_ms())))

    def _message(self, topic, payload, qos, retain, dup):
        if topic == self.confirm_topic:
            self.session.take(payload)
        else:
            super()._message(topic, payload, qos, retain, dup)
