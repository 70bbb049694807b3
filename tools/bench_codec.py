"""Codec throughput on CPython and on the MicroPython Unix port, in the same run.

    python tools/bench_codec.py          (make bench)

Absolute numbers depend on the machine; the MicroPython/CPython ratio is the figure to compare across runs.
The same file is the MicroPython workload (it runs itself under `micropython` with --workload).
"""

import sys
import time

ROUNDS = 20000


def now_us() -> int:
    try:
        return int(time.ticks_us())  # type: ignore[attr-defined]
    except AttributeError:
        return int(time.perf_counter() * 1e6)


def workload() -> None:
    from dmqtt import codec

    out = bytearray(512)
    topic = b"sensors/dev1/telemetry"
    payload = b'{"dev":"dev1","seq":1,"reading":21.5}' * 3
    start = now_us()
    for i in range(ROUNDS):
        codec.write_publish(topic, payload, 1 << codec.QOS_SHIFT, i % 65535 + 1, codec.V311, None, out)
    encode_us = now_us() - start
    stream = codec.write_publish(topic, payload, 1 << codec.QOS_SHIFT, 1, codec.V311) + codec.encode_ack(
        codec.PUBACK, 1
    )
    decoder = codec.StreamDecoder(codec.V311, 1024, 1024)
    start = now_us()
    for _ in range(ROUNDS // 2):
        pos = 0
        while pos < len(stream):
            pos += decoder.feed(stream, pos)
            if decoder.ready and decoder.ptype == codec.PUBACK:
                codec.check_ack(codec.PUBACK, decoder.body)
            elif decoder.ready:
                codec.decode_publish(decoder.flags, decoder.body)
    decode_us = now_us() - start
    print("encode_publish_per_s %d" % (ROUNDS * 1000000 // max(1, encode_us)))
    print("decode_packets_per_s %d" % (ROUNDS * 1000000 // max(1, decode_us)))


def main() -> None:
    import os
    import subprocess
    from pathlib import Path

    from host_bridge.assets import FIRMWARE

    micropython = Path(sys.executable).with_name("micropython")
    env = dict(os.environ, MICROPYPATH=str(FIRMWARE))
    mp = subprocess.run(
        [str(micropython), "-X", "heapsize=4M", __file__, "--workload"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        workload()
    cp = dict(line.split() for line in buf.getvalue().splitlines())
    mpd = dict(line.split() for line in mp.splitlines())
    print("%-24s %14s %14s %8s" % ("metric", "CPython", "MicroPython", "ratio"))
    for key in cp:
        c, m = int(cp[key]), int(mpd[key])
        print("%-24s %14d %14d %8.2f" % (key, c, m, m / c))


if __name__ == "__main__":
    if "--workload" in sys.argv:
        workload()
    else:
        main()
