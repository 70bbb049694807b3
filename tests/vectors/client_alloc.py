# MicroPython only: heap bytes the client allocates per message, QoS 0, 1 and 2, on a whole publish flow
# (publish(), journaling, encoding, sending, reading and handling the acknowledgements), with the collector off.
# Two ways to publish: a message then a poll, as a sensor's loop does (its PUBLISH goes out while publish() runs,
# encoded from the application's own buffers), and bursts of 64 before waiting, most of which wait behind the
# window of 8 and are read back from the journal to be sent ("1 queued", "2 queued").
# The flash driver and the network stack are C on a chip: their Python stand-ins here (a partition over a
# bytearray, a transport that answers like a broker) are measured apart and left out. Prints one JSON line:
#   {"0": bytes per message, "0 str topic": ..., "1": ..., "2": ..., "1 queued": ..., "2 queued": ...,
#    "0 5.0 alias": ..., "1 5.0 alias": ...}
#
import gc
import json
import sys

from dmqtt.client import MQTTClient
from dmqtt.journal_ring import RingJournal

MESSAGES = int(sys.argv[1]) if len(sys.argv) > 1 else 64
SECTOR = 4096
outside = [0]  # bytes the stand-ins allocated (left out of the client's)


class Partition:
    """The esp32.Partition block interface over a bytearray. Each method counts what it allocates itself (a
    wrapper would allocate for its own arguments, on the caller's side)."""

    def __init__(self, sectors):
        self.buf = bytearray(b"\xff" * (sectors * SECTOR))

    def readblocks(self, block, buf, off=0):
        before = gc.mem_alloc()
        start = block * SECTOR + off
        buf[:] = memoryview(self.buf)[start : start + len(buf)]
        outside[0] += gc.mem_alloc() - before

    def writeblocks(self, block, buf, off=0):
        before = gc.mem_alloc()
        start = block * SECTOR + off
        self.buf[start : start + len(buf)] = buf
        outside[0] += gc.mem_alloc() - before

    def ioctl(self, op, arg):
        before = gc.mem_alloc()
        result = 0
        if op == 4:
            result = len(self.buf) // SECTOR
        elif op == 5:
            result = SECTOR
        elif op == 6:
            self.buf[arg * SECTOR : (arg + 1) * SECTOR] = b"\xff" * SECTOR
        outside[0] += gc.mem_alloc() - before
        return result


class Broker:
    """A transport that answers as a broker: `connack`, then PUBACK or PUBREC/PUBCOMP for what is sent."""

    def __init__(self, connack=b"\x20\x02\x00\x00"):
        self.inbox = bytearray()
        self.connack = connack

    def send(self, buf, start, end):
        """Takes every packet of the write (the client sends several at once when it has them)."""
        before = gc.mem_alloc()
        data = bytes(buf[start:end])
        pos = 0
        while pos < len(data):
            kind = data[pos] >> 4
            at = pos + 1
            remaining = shift = 0
            while True:
                remaining |= (data[at] & 0x7F) << shift
                shift += 7
                at += 1
                if not data[at - 1] & 0x80:
                    break
            if kind == 1:  # CONNECT
                self.inbox += self.connack
            elif kind == 3 and data[pos] & 0x06:  # PUBLISH at QoS 1/2: the id follows the topic
                pid_at = at + 2 + (data[at] << 8 | data[at + 1])
                ack = 0x40 if data[pos] & 0x06 == 0x02 else 0x50
                self.inbox += bytes((ack, 2, data[pid_at], data[pid_at + 1]))
            elif kind == 6:  # PUBREL
                self.inbox += bytes((0x70, 2, data[at], data[at + 1]))
            pos = at + remaining
        outside[0] += gc.mem_alloc() - before
        return len(data)

    def readinto(self, buf):
        before = gc.mem_alloc()
        n = None
        if self.inbox:
            n = min(len(buf), len(self.inbox))
            buf[:n] = self.inbox[:n]
            self.inbox = self.inbox[n:]
        outside[0] += gc.mem_alloc() - before
        return n

    def wait(self, timeout_ms, writable=False):
        return writable or bool(self.inbox)

    def close(self):
        pass


client = MQTTClient("alloc", RingJournal(Partition(16), 128), window=8)
client.open()
client.connect(Broker())
topic = b"sensors/alloc/telemetry"
payload = b'{"dev":"alloc","boot":1,"seq":1,"t":1,"reading":21.5}'
result = {}


def measure(qos, burst, topic=topic, client=client):
    gc.collect()
    gc.disable()
    outside[0] = 0
    before = gc.mem_alloc()
    for _ in range(MESSAGES):
        client.publish(topic, payload, qos, timeout_ms=1000)
        if not burst:
            client.poll(0)
    client.wait_idle(1000)
    per_message = (gc.mem_alloc() - before - outside[0]) / MESSAGES
    gc.enable()
    return per_message


for qos in (0, 1, 2):
    for _ in range(MESSAGES):  # warm-up: first-call caches, the journal's first sectors
        client.publish(topic, payload, qos, timeout_ms=1000)
    client.wait_idle(1000)
    result[str(qos)] = measure(qos, False)
    if not qos:  # a topic given as str, encoded once (in the warm-up): the client keeps the last topic it checked
        text = topic.decode()
        client.publish(text, payload, 0)
        result["0 str topic"] = measure(0, False, text)
    if qos:
        result["%d queued" % qos] = measure(qos, True)
# MQTT 5.0 with a broker that grants Topic Aliases (CONNACK's Topic Alias Maximum: 10, as Mosquitto's default):
# every PUBLISH after the first names its topic by alias, a property.
client = MQTTClient("alloc5", RingJournal(Partition(16), 128), version=5, window=8)
client.open()
client.connect(Broker(b"\x20\x06\x00\x00\x03\x22\x00\x0a"))
for qos in (0, 1):
    for _ in range(MESSAGES):
        client.publish(topic, payload, qos, timeout_ms=1000)
    client.wait_idle(1000)
    result["%d 5.0 alias" % qos] = measure(qos, False, topic, client)
print(json.dumps(result))
