# MicroPython only: heap bytes allocated by the board's hot path (write a QoS 1 PUBLISH into a preallocated
# buffer, cut a PUBACK out of the stream, check it), per packet, with the garbage collector off.
import gc

from dmqtt import codec

ROUNDS = 200
out = bytearray(512)
topic = b"sensors/dev1/telemetry"
payload = b'{"dev":"dev1","seq":1,"reading":21.5}'
decoder = codec.StreamDecoder(codec.V311, 1024, 1024)
acks = [codec.encode_ack(codec.PUBACK, pid) for pid in range(1, ROUNDS + 1)]


def hot_path(pid, ack):
    n = codec.write_publish(topic, payload, 1 << codec.QOS_SHIFT, pid, codec.V311, None, out)
    decoder.feed(ack)
    return n + codec.check_ack(decoder.ptype, decoder.body, codec.V311) + codec.ack_reason(decoder.body)


hot_path(1, acks[0])  # warm-up: first-call caches
gc.collect()
gc.disable()
before = gc.mem_alloc()
for i in range(ROUNDS):
    hot_path(i + 1, acks[i])
after = gc.mem_alloc()
gc.enable()
print("bytes_per_packet", (after - before) / ROUNDS)
