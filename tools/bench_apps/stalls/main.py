# The flash-stall workload on a virtual board with flash timing on: the durable client publishes QoS 1 over TCP
# and times each publish() call (time.ticks_us). /flash/config.json: {"host", "port", "size", "count",
# "idle_ms"}: with idle_ms > 0 the application serves the connection (poll) that long between messages, which is
# when the ring opens and erases its next sector ahead of need, and the application collects its garbage; with 0
# it publishes back to back, and a sector's erase falls inside the publish() that needs it. Prints one JSON line:
# every publish() time in microseconds ("us"), and of each the time its socket write took ("send_us": the
# kernel's, not the flash's; on loopback one write in about 28 takes 0.1 ms instead of 0.02 on this host), and
# what the flash emulator's waits ran past the model's time ("over_us": the host's, see nor_flash.busy_us), and
# the flash's time by the model inside it ("flash_us": what a chip's CPU would wait for its flash), and how long
# the board was ready to run but waited for a core the host gave another process ("waited_us": the kernel's
# run-queue wait of this process, /proc/self/schedstat's second field).
import gc
import json
import sys
import time
from array import array

import nor_flash  # the virtual board's flash (this app runs only there)

from dmqtt.client import MQTTClient
from dmqtt.journal import open_journal
from dmqtt.transport import TCPTransport

cfg = json.load(open("/flash/config.json"))
payload = b"x" * cfg["size"]
# The times, made before the client while the heap is whole (a list growing through the run would need ever
# larger blocks of a heap the client has cut up).
times = array("I", bytes(4 * cfg["count"]))
sends = array("H", bytes(2 * cfg["count"]))
overs = array("H", bytes(2 * cfg["count"]))
flash = array("I", bytes(4 * cfg["count"]))
waits = array("H", bytes(2 * cfg["count"]))
schedstat = open("/proc/self/schedstat")


def run_queue_ns():
    """Nanoseconds this process has spent ready to run but waiting for a core, since it started."""
    schedstat.seek(0)
    return int(schedstat.read().split()[1])


class TimedTransport(TCPTransport):
    """TCP, with the time of the last socket write kept (the transport interface's send)."""

    spent = 0

    def send(self, buf, start, end):
        begin = time.ticks_us()
        n = TCPTransport.send(self, buf, start, end)
        self.spent += time.ticks_diff(time.ticks_us(), begin)
        return n


client = MQTTClient("bench-stalls", open_journal(record_max=cfg["size"] + 64), window=8)
client.open()
transport = TimedTransport(cfg["host"], cfg["port"])
client.connect(transport)
if cfg["idle_ms"]:
    client.poll(cfg["idle_ms"])  # served a while before the first message, as an application's loop does
for i in range(cfg["count"]):
    transport.spent = 0
    over = nor_flash.overshoot_us
    model = nor_flash.model_us
    waited = run_queue_ns()
    start = time.ticks_us()
    client.publish(b"bench/stalls", payload, qos=1, timeout_ms=60000)
    times[i] = time.ticks_diff(time.ticks_us(), start)
    sends[i] = min(transport.spent, 65535)
    overs[i] = min(nor_flash.overshoot_us - over, 65535)
    flash[i] = nor_flash.model_us - model
    waits[i] = min((run_queue_ns() - waited) // 1000, 65535)
    if cfg["idle_ms"]:
        client.poll(cfg["idle_ms"])
        # Collected while idle, as MicroPython's docs advise an application with a timing goal: a collection
        # that the heap's filling starts inside a publish() (the flash model's Python allocates, a chip's C
        # driver does not) would be timed as the publish's.
        gc.collect()
client.wait_idle(60000)
client.disconnect()
client = None
gc.collect()
# Written a number at a time: one string of them all would need a block the heap may not have.
sys.stdout.write('{"total": %d, "ms": 0' % len(times))
for key, values in (("us", times), ("send_us", sends), ("over_us", overs), ("flash_us", flash), ("waited_us", waits)):
    sys.stdout.write(', "%s": [%d' % (key, values[0]))
    for t in values[1:]:
        sys.stdout.write(", %d" % t)
    sys.stdout.write("]")
sys.stdout.write("}\n")
