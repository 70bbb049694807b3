"""Serial link throughput on a simulated 115200-baud line (the unit tests' Line: simulated milliseconds, so
the figures repeat exactly), with frame-size adaptation against fixed full frames, in the same run. Both use
the measured retransmission timeout.

    .venv/bin/python tools/bench_link.py          (make bench)
"""

from __future__ import annotations

import random

from link_sim import Line, pump

from dlink import frame
from dlink.link import Link

BYTES = 20000


def throughput(ber: float, drop: float, adaptive: bool, seed: int) -> float:
    """Bytes per simulated second delivered, in order and intact, from one end to the other."""
    options = {} if adaptive else {"min_payload": frame.MAX_PAYLOAD}
    a, b = Link(7, **options), Link(9, **options)
    line = Line(a, b, ber=ber, drop=drop, seed=seed)
    line.run(200)
    data = bytes(random.Random(seed).randrange(256) for _ in range(BYTES))
    start = line.now
    assert pump(line, a, b, frame.MQTT, data, 10_000_000) == data, "the link corrupted the stream"
    return BYTES * 1000 / (line.now - start)


def main() -> None:
    print(f"serial link, {BYTES} bytes one way at 115200 baud (simulated time), mean of seeds 1-3:")
    print(f"{'bit error rate':>15} {'dropped bytes':>14} {'full frames':>12} {'adaptive':>10}  ratio")
    for ber, drop in ((0.0, 0.0), (1e-4, 5e-5), (3e-4, 1e-4), (1e-3, 5e-4)):
        fixed = sum(throughput(ber, drop, False, s) for s in (1, 2, 3)) / 3
        adaptive = sum(throughput(ber, drop, True, s) for s in (1, 2, 3)) / 3
        print(f"{ber:>15g} {drop:>14g} {fixed:>10.0f}/s {adaptive:>8.0f}/s  {adaptive / fixed:.2f}")


if __name__ == "__main__":
    main()
