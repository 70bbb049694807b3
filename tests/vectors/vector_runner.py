# Runs tests/vectors/mqtt_codec.json against firmware/dmqtt/codec.py. The same file runs on CPython (imported
# by tests/unit/dmqtt/test_shared_vectors.py) and on the MicroPython Unix port (run as a script, one result line per
# vector on stdout), so both interpreters are held to the same bytes.
#
#   micropython -X heapsize=16M tests/vectors/vector_runner.py VECTORS.json [FUZZ_ITERATIONS]

import json
import random

from hexcodes import to_hex, unhex

from dmqtt import codec_host as codec
from dmqtt.codec import varint_at


def clean_hex(text):
    return "".join(text.split())


def load_value(value):
    if isinstance(value, dict) and "hex" in value:
        return unhex(clean_hex(value["hex"]))
    if isinstance(value, list):
        return [load_value(v) for v in value]
    return value


def load_props(pairs):
    if pairs is None:
        return None
    props = {}
    for pid, value in pairs:
        if pid in (codec.USER_PROPERTY, codec.SUBSCRIPTION_IDENTIFIER) and isinstance(value, list):
            props[pid] = [tuple(v) if isinstance(v, list) else v for v in value]
        else:
            props[pid] = load_value(value)
    return props


def normalise(value):
    """Decoded values in the vectors' JSON shape: bytes as {"hex"}, tuples as lists, props as sorted pairs."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"hex": to_hex(value)}
    if isinstance(value, dict):
        return [[k, normalise(value[k])] for k in sorted(value)]
    if isinstance(value, (list, tuple)):
        return [normalise(v) for v in value]
    return value


def feed_bytewise(decoder, data):
    """Feed one byte at a time; return every decoded packet."""
    out = []
    for i in range(len(data)):
        decoder.feed(data[i : i + 1])
        if decoder.ready:
            out.append(codec.decode(decoder.ptype, decoder.flags, decoder.body, decoder.version))
    return out


def check_encode(vec):
    args = [load_value(a) for a in vec["args"]]
    kwargs = {}
    for key in vec["kwargs"]:
        kwargs[key] = load_props(vec["kwargs"][key]) if key.endswith("props") else load_value(vec["kwargs"][key])
    fn = getattr(codec, vec["fn"])
    got = fn(*args, **kwargs)
    want = clean_hex(vec["hex"])
    if to_hex(got) != want:
        return "encoded %s, expected %s" % (to_hex(got), want)
    into = bytearray(len(got) + 3)
    n = fn(*args, into=into, **kwargs)
    if n != len(got) or bytes(into[:n]) != got:
        return "encoding into a buffer differs from encoding to bytes"
    version = kwargs.get("version", codec.V5 if vec["fn"] == "encode_auth" else codec.V311)
    packets = feed_bytewise(codec.PacketDecoder(version), got)
    if len(packets) != 1 or packets[0].type != got[0] >> 4:
        return "did not decode back to one packet of type %d" % (got[0] >> 4)
    return None


def check_varint(value, want):
    buf = bytearray(4)
    n = codec.put_varint(buf, 0, value)
    if to_hex(buf[:n]) != want or codec.varint_size(value) != n:
        return "varint %d encoded %s, expected %s" % (value, to_hex(buf[:n]), want)
    back, end = varint_at(unhex(want), 0)
    if back != value or end != n:
        return "varint %s decoded to %d" % (want, back)
    return None


def check_remaining_length(length):
    payload = b"x" * (length - 3)
    packet = codec.encode_publish("t", payload)
    size = codec.varint_size(length)
    if len(packet) != 1 + size + length:
        return "packet of %d bytes for Remaining Length %d" % (len(packet), length)
    header = bytearray(4)
    n = codec.put_varint(header, 0, length)
    if packet[1 : 1 + n] != bytes(header[:n]):
        return "Remaining Length bytes %s" % to_hex(packet[1 : 1 + n])
    decoder = codec.PacketDecoder(codec.V311, length + 5)
    pos = 0
    while pos < len(packet) and not decoder.ready:
        pos += decoder.feed(memoryview(packet)[pos : pos + 4096])
    if not decoder.ready or len(decoder.body) != length or pos != len(packet):
        return "decoder did not return the %d-byte body" % length
    return None


def check_decode(vec):
    packets = feed_bytewise(codec.PacketDecoder(vec["version"]), unhex(clean_hex(vec["hex"])))
    if len(packets) != 1:
        return "decoded %d packets" % len(packets)
    packet = packets[0]
    for key in vec["expect"]:
        want = vec["expect"][key]
        got = packet.type if key == "type" else normalise(packet.fields.get(key))
        if got != want:
            return "%s: got %r, expected %r" % (key, got, want)
    return None


def check_error(vec):
    data = unhex(clean_hex(vec["hex"]))
    for chunked in (True, False):
        decoder = codec.PacketDecoder(vec["version"], vec.get("max", 65536))
        try:
            if chunked:
                feed_bytewise(decoder, data)
            else:
                list(decoder.packets(data))
        except codec.CodecError as exc:
            if exc.reason_code != vec["code"]:
                return "reason code 0x%02x (%s), expected 0x%02x" % (exc.reason_code, exc.reason, vec["code"])
            continue
        return "accepted without error"
    return None


def valid_packets(vectors):
    out = []
    for vec in vectors["encode"]:
        out.append(unhex(clean_hex(vec["hex"])))
    return out


def fuzz(vectors, iterations, seed=1):
    """Random and mutated bytes into the decoder: only CodecError may come out, every packet it yields must
    decode, and nothing may grow past the maximum packet size."""
    rng = random.Random(seed) if hasattr(random, "Random") else None
    rnd = rng if rng is not None else random
    if rng is None:
        random.seed(seed)
    seeds = valid_packets(vectors)
    limit = 512
    for i in range(iterations):
        if i % 2:
            data = bytearray(rnd.getrandbits(8) for _ in range(rnd.randrange(1, 64)))
        else:
            data = bytearray(seeds[rnd.randrange(len(seeds))])
            for _ in range(rnd.randrange(1, 4)):
                if not data:
                    break
                op = rnd.randrange(3)
                pos = rnd.randrange(len(data))
                if op == 0:
                    data[pos] ^= 1 << rnd.randrange(8)
                elif op == 1:
                    data = data[:pos]
                else:
                    data[pos:pos] = bytes([rnd.getrandbits(8)])
            if not data:
                continue
        version = (3, 4, 5)[rnd.randrange(3)]
        decoder = codec.PacketDecoder(version, limit)
        try:
            for _packet in decoder.packets(bytes(data)):
                pass
        except codec.CodecError:
            pass
        except Exception as exc:  # anything else is a codec bug
            return "iteration %d: %s on %s (v%d): %r" % (i, type(exc).__name__, to_hex(data), version, exc)
        if len(decoder._buf) > limit:
            return "iteration %d: buffer grew to %d bytes" % (i, len(decoder._buf))
    return None


def run_all(path, fuzz_iterations=2000):
    with open(path) as f:
        vectors = json.load(f)
    results = []

    def record(group, name, fn, *args):
        try:
            problem = fn(*args)
        except Exception as exc:
            problem = "raised %s: %r" % (type(exc).__name__, exc)
        results.append((group + ": " + name, problem))

    for vec in vectors["encode"]:
        record("encode", vec["name"], check_encode, vec)
    for value, want in vectors["varint"]:
        record("varint", str(value), check_varint, value, want)
    for length in vectors["remaining_length"]:
        record("remaining_length", str(length), check_remaining_length, length)
    for vec in vectors["decode"]:
        record("decode", vec["name"], check_decode, vec)
    for vec in vectors["errors"]:
        record("error", vec["name"], check_error, vec)
    record("fuzz", "random and mutated bytes", fuzz, vectors, fuzz_iterations)
    return results


if __name__ == "__main__":
    import report

    report.main(run_all)
