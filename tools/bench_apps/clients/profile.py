# Where a durable QoS 1 message's time goes on the MicroPython Unix port: run by tools/bench_clients.py (figure
# 1's profile), not on a board. The client journals on a RAM partition (the flash emulator's cost taken out) and
# publishes to a broker on loopback.  argv: port, MQTT version, window, messages per measurement.
# Run with the heap of the board definition "sim" (110 KB, an ESP32's free heap). Prints one JSON line:
#   bytes_per_msg   heap allocated per message (a short run with the collector off)
#   heap_free, collect_us, gc_us   free heap after a collection, what one collection costs, and the collector's
#                   estimated time per message: bytes_per_msg / heap_free collections of collect_us each
#   us_unwrapped    time per message of a run without wrappers (collector on, as on a board)
#   ref_us          the reference workload's time (reference.py: 1,000 iterations of a fixed loop), timed
#                   in the same process around the runs: us_unwrapped / ref_us is the message's cost in units
#                   that move with the interpreter's speed, not with the machine's
#   phases          {name: [calls per message, us per message in it, us per message of its run]}: one run per
#                   phase, the phase timed by a wrapper (what the wrapper costs shows as its run's excess over
#                   us_unwrapped); the phases do not overlap, and what us_unwrapped has beyond their sum is
#                   publish()'s own code and the loop.
import gc
import json
import sys
import time

from ram_partition import RamPartition
from reference import reference

from dmqtt import journal_ring
from dmqtt import session as session_module
from dmqtt.client import MQTTClient
from dmqtt.transport import TCPTransport

port = int(sys.argv[1])
version = int(sys.argv[2])
window = int(sys.argv[3])
count = int(sys.argv[4])
_ALLOC_RUN = 40  # messages measured with the collector off: about 50 KB of the heap
TOPIC = b"bench/t"
PAYLOAD = b"x" * 64
_ABSENT = object()

client = MQTTClient("profile", journal_ring.RingJournal(RamPartition(16), 128), version=version, window=window)
client.open()
client.connect(TCPTransport("127.0.0.1", port))


def run(n):
    start = time.ticks_us()
    for _ in range(n):
        client.publish(TOPIC, PAYLOAD, qos=1, timeout_ms=60000)
    client.wait_idle(60000)
    return time.ticks_diff(time.ticks_us(), start) / n


ref_before = reference()
run(200)  # warm-up: connection, first-call caches, the journal's first sectors
# What the path allocates: a short run with the collector off (it must fit in the board-sized heap).
gc.collect()
gc.disable()
before = gc.mem_alloc()
run(_ALLOC_RUN)
bytes_per_msg = (gc.mem_alloc() - before) / _ALLOC_RUN
gc.enable()
# The collector's share, estimated: a collection runs when the heap is full, so one per (free heap / bytes
# per message) messages, each costing what a collection of this heap costs. (Timing a run with the collector
# off instead would mislead: the allocator then walks fresh memory, and the cache misses cost more than the
# collections saved.)
gc.collect()
free = gc.mem_free()
start = time.ticks_us()
for _ in range(10):
    gc.collect()
collect_us = time.ticks_diff(time.ticks_us(), start) / 10
gc_us = bytes_per_msg / free * collect_us

phases = {}


def timed(owner, name, label, arity):
    """Replace owner.name by a wrapper that adds up its calls and time. Fixed positional arity, so that the
    wrapper allocates nothing (a *args tuple per call would feed the collector and skew what it measures)."""
    method = getattr(owner, name)
    entry = [0, 0]
    phases[label] = entry

    def account(start):
        entry[0] += 1
        entry[1] += time.ticks_diff(time.ticks_us(), start)

    if arity == 0:

        def wrapper(self):
            start = time.ticks_us()
            result = method(self)
            account(start)
            return result

    elif arity == 1:

        def wrapper(self, a):
            start = time.ticks_us()
            result = method(self, a)
            account(start)
            return result

    elif arity == 2:

        def wrapper(self, a, b=_ABSENT):  # a second argument passed on only when given (an older firmware's
            start = time.ticks_us()  # methods may take one argument only: the CPU figure's baseline)
            result = method(self, a) if b is _ABSENT else method(self, a, b)
            account(start)
            return result

    else:

        def wrapper(self, a, b, c, d, e, f):
            start = time.ticks_us()
            result = method(self, a, b, c, d, e, f)
            account(start)
            return result

    setattr(owner, name, wrapper)


# One phase per run, each against a run unwrapped, so a wrapper distorts only its own phase's run.
us_unwrapped = run(count)
totals = {}
for owner, name, label, arity in (
    (session_module.Session, "accept", "accept: journal the PUB record", 6),
    (session_module.Session, "next_packet", "next_packet: pick a flow, read its record, encode", 2),
    (MQTTClient, "write_packet", "send: socket write", 2),
    (TCPTransport, "wait", "wait: poll()", 2),
    (MQTTClient, "_receive", "receive: read, decode, PUBACK, journal the DONE record", 0),
):
    original = getattr(owner, name)
    timed(owner, name, label, arity)
    totals[label] = run(count)
    setattr(owner, name, original)
client.disconnect()
print(
    json.dumps(
        {
            "messages": count,
            "bytes_per_msg": bytes_per_msg,
            "heap_free": free,
            "collect_us": collect_us,
            "gc_us": gc_us,
            "us_unwrapped": us_unwrapped,
            "ref_us": min(ref_before, reference()),
            "phases": {k: [v[0] / count, v[1] / count, totals[k]] for k, v in phases.items()},
        }
    )
)
