# The client's own CPU per message on the MicroPython Unix port, its flash and its network left out: the journal
# on a RAM partition and the broker a transport in memory that acknowledges each PUBLISH as it is written (what
# the kernel and the flash emulator cost is not the client's, and moves between machines: the profile's socket
# writes are a quarter of its time). Run by tools/bench_clients.py (figure 1), from staged .mpy, for this
# firmware and for the baseline's in interleaved rounds.  argv: messages per measurement.
# Prints one JSON line: {"ref_us": the reference loop's time (reference.py), "<case>": us per message, ...} with
# cases "qos Q, loop" (publish, then poll(0), as a sensor does) and "qos Q, burst" (publish back to back behind
# the window of 8, then wait_idle), each the best of three runs.
import json
import sys
import time

from ram_partition import RamPartition
from reference import reference

from dmqtt.client import MQTTClient
from dmqtt.journal_ring import RingJournal

count = int(sys.argv[1])


class Broker:
    """A transport that answers as a 5.0 broker: CONNACK, then PUBACK, or PUBREC and PUBCOMP, for what it is
    sent, into a buffer made once (the acks of a window fit)."""

    def __init__(self):
        self.inbox = bytearray(4096)
        self.mv = memoryview(self.inbox)
        self.n = 0

    def _ack(self, first, hi, lo):
        inbox, n = self.inbox, self.n
        inbox[n] = first
        inbox[n + 1] = 2
        inbox[n + 2] = hi
        inbox[n + 3] = lo
        self.n = n + 4

    def send(self, buf, start, end):
        """Takes every packet of the write (this firmware's client sends several at once when it has them)."""
        pos = start
        while pos < end:
            first = buf[pos]
            kind = first >> 4
            at = pos + 1
            remaining = buf[at] & 0x7F
            shift = 0
            while buf[at] & 0x80:
                at += 1
                shift += 7
                remaining |= (buf[at] & 0x7F) << shift
            at += 1
            if kind == 1:  # CONNECT: CONNACK, no properties
                self.inbox[0:5] = b"\x20\x03\x00\x00\x00"
                self.n = 5
            elif kind == 3 and first & 0x06:  # PUBLISH at QoS 1/2: its packet id follows the topic
                pid_at = at + 2 + ((buf[at] << 8) | buf[at + 1])
                self._ack(0x40 if first & 0x06 == 0x02 else 0x50, buf[pid_at], buf[pid_at + 1])
            elif kind == 6:  # PUBREL
                self._ack(0x70, buf[at], buf[at + 1])
            pos = at + remaining
        return end - start

    def readinto(self, buf):
        n = self.n
        if not n:
            return None
        take = min(len(buf), n)
        buf[:take] = self.mv[:take]
        if take < n:  # (never in these runs: a window's acks fit in one read)
            self.inbox[: n - take] = self.inbox[take:n]
        self.n = n - take
        return take

    def wait(self, timeout_ms, writable=False):
        return writable or self.n > 0

    def close(self):
        pass


client = MQTTClient("cpu", RingJournal(RamPartition(16), 128), version=5, window=8)
client.open()
client.connect(Broker())
TOPIC = b"bench/t"
PAYLOAD = b"x" * 64


def run(n, qos, burst):
    start = time.ticks_us()
    for _ in range(n):
        client.publish(TOPIC, PAYLOAD, qos, timeout_ms=1000)
        if not burst:
            client.poll(0)
    client.wait_idle(1000)
    return time.ticks_diff(time.ticks_us(), start) / n


result = {"ref_us": reference()}
for qos in (0, 1, 2):
    for burst in (False, True):
        if qos == 0 and burst:
            continue  # QoS 0 has no window: its burst is its loop
        run(200, qos, burst)  # warm-up: first-call caches, the journal's first sectors
        result["qos %d, %s" % (qos, "burst" if burst else "loop")] = min(run(count, qos, burst) for _ in range(3))
result["ref_us"] = min(result["ref_us"], reference())
client.disconnect()
print(json.dumps(result))
