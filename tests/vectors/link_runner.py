# Runs tests/vectors/link_frames.json against firmware/dlink/frame.py and control.py, and fuzzes the frame decoder, on
# CPython (imported by tests/unit/dmqtt/test_shared_vectors.py) and on the MicroPython Unix port (run as a script).
#
#   micropython tests/vectors/link_runner.py VECTORS.json [FUZZ_ITERATIONS]

import json
import random

from hexcodes import to_hex, unhex

from dlink import control, frame
from dlink.link import Link


def frames_in(data, decoder=None):
    """Every frame (as a tuple) and console line the decoder finds in data."""
    dec = decoder or frame.Decoder()
    out = []
    pos = 0
    while pos < len(data):
        pos += dec.feed(data, pos)
        if dec.ready == frame.Decoder.FRAME:
            out.append((dec.ftype, dec.channel, dec.seq, dec.ack, dec.epoch, bytes(dec.payload())))
        elif dec.ready == frame.Decoder.LINE:
            out.append(("line", dec.line))
    return out


def check_vector(vec):
    want = (vec["type"], vec["channel"], vec["seq"], vec["ack"], vec["epoch"], unhex(vec["payload"]))
    out = bytearray(frame.WIRE_MAX)
    n = frame.encode(out, want[0], want[1], want[2], want[3], want[4], want[5])
    if to_hex(out[:n]) != vec["wire"]:
        return "encoded %s, expected %s" % (to_hex(out[:n]), vec["wire"])
    wire = unhex(vec["wire"])
    dec = frame.Decoder()
    got = []
    for i in range(len(wire)):  # one byte at a time
        got += frames_in(wire[i : i + 1], dec)
    if got != [want]:
        return "decoded %r" % (got,)
    return None


def check_console(vectors):
    wires = [unhex(v["wire"]) for v in vectors["frames"]]
    stream = b"boot: ok\r\n" + wires[0] + b"half a line " + wires[1] + b"\x00and the rest\n"
    got = frames_in(stream)
    kinds = [g[0] for g in got]
    if kinds != ["line", 1, "line", 1, "line"] or got[0][1] != "boot: ok" or got[4][1] != "and the rest":
        return "stream decoded as %r" % (got,)
    return None


def fuzz(vectors, iterations, seed=7):
    """Random bytes and damaged frames: nothing raises, and every frame that comes out is one that was sent."""
    if hasattr(random, "Random"):
        rnd = random.Random(seed)
    else:
        random.seed(seed)
        rnd = random
    valid = [unhex(v["wire"]) for v in vectors["frames"]]
    sent = []
    for v in vectors["frames"]:
        sent.append((v["type"], v["channel"], v["seq"], v["ack"], v["epoch"], unhex(v["payload"])))
    for i in range(iterations):
        if i % 3 == 0:
            data = bytes(bytearray(rnd.getrandbits(8) for _ in range(rnd.randrange(1, 300))))
        else:
            data = bytearray(b"".join(valid[rnd.randrange(len(valid))] for _ in range(2)))
            for _ in range(rnd.randrange(1, 4)):
                pos = rnd.randrange(len(data))
                op = rnd.randrange(4)
                if op == 0:
                    data[pos] ^= 1 << rnd.randrange(8)  # bit error
                elif op == 1:
                    data = data[:pos] + data[pos + 1 :]  # dropped byte
                elif op == 2:
                    data = data[:pos] + bytes([rnd.getrandbits(8)]) + data[pos:]  # garbage
                else:
                    data = data[:pos]  # truncation
                if not data:
                    break
            data = bytes(data)
        try:
            got = frames_in(data + b"\x00" * 300 + bytes(600))  # also oversize runs of zeros and garbage
        except Exception as exc:
            return "iteration %d: %s on %s" % (i, repr(exc), to_hex(data))
        for item in got:
            if item[0] != "line" and item not in sent:
                return "iteration %d: a frame that was never sent came out: %r" % (i, item)
    return None


def check_endpoints():
    """Two Link endpoints, a fifth of the writes lost at random: the stream still arrives whole and in order."""
    random.seed(3)
    a = Link(0x0A0A, 921600)
    b = Link(0x0B0B, 921600)
    data = bytes(bytearray(i * 7 % 251 for i in range(6000)))
    got = bytearray()
    buf = bytearray(300)
    sent = 0
    writes = 0
    for now in range(0, 200000, 5):
        if a.up and sent < len(data):
            sent += a.send(frame.MQTT, memoryview(data)[sent : sent + 500])
        for src, dst in ((a, b), (b, a)):
            chunk = src.poll(now)
            while chunk is not None:
                writes += 1
                if random.getrandbits(8) >= 51:  # 20 % lost
                    dst.feed(bytes(chunk), now)
                chunk = src.poll(now)
        n = b.readinto(frame.MQTT, buf)
        got += buf[:n]
        if len(got) == len(data):
            break
    if bytes(got) != data:
        return "%d of %d bytes arrived intact" % (len(got), len(data))
    if not a.retransmissions:
        return "nothing was retransmitted although writes were lost"
    return None


def lines_in(data):
    lines = control.Lines()
    out = []
    for b in data:
        line = lines.push(b)
        if line is not None:
            out.append(line)
    return out, lines.dropped


def check_control(vec):
    wire = unhex(vec["line"])
    got = control.encode(vec["kind"], vec["text"])
    if got != wire:
        return "encoded %s, expected %s" % (to_hex(got), vec["line"])
    lines, _ = lines_in(wire)
    if len(lines) != 1:
        return "cut into %r" % (lines,)
    decoded = control.decode(lines[0])
    if decoded != (vec["kind"], vec["text"]):
        return "decoded %r" % (decoded,)
    return None


def check_control_invalid(vec):
    try:
        got = control.decode(unhex(vec["line"]))
    except control.ControlError:
        return None
    return "accepted as %r" % (got,)


def check_control_bounds(vectors):
    """A line longer than the bound is dropped whole, and the line after it arrives intact; an argument too
    long for a line is cut so that the line fits."""
    good = unhex(vectors["control"][1]["line"])
    lines, dropped = lines_in(b"E " + b"x" * (2 * control.MAX_LINE) + b"\n" + good)
    if lines != [good[:-1]] or dropped != 1:
        return "overlong line: got %r, %d dropped" % (lines, dropped)
    long = control.encode(control.REFUSED, "y" * 500)
    if len(long) != control.MAX_LINE or long[-1:] != b"\n":
        return "a long argument encoded to %d bytes" % len(long)
    return None


def run_all(path, iterations=2000):
    with open(path) as f:
        vectors = json.load(f)
    results = []
    for vec in vectors["frames"]:
        results.append(("frame: " + vec["name"], check_vector(vec)))
    results.append(("console text between frames", check_console(vectors)))
    for vec in vectors["control"]:
        results.append(("control: " + vec["name"], check_control(vec)))
    for vec in vectors["control_invalid"]:
        results.append(("control refused: " + vec["name"], check_control_invalid(vec)))
    results.append(("control: line bounds", check_control_bounds(vectors)))
    results.append(("fuzz: random, flipped, dropped, inserted, truncated", fuzz(vectors, iterations)))
    results.append(("endpoints: a stream through lost writes", check_endpoints()))
    return results


if __name__ == "__main__":
    import report

    report.main(run_all)
