"""Serial link throughput on a simulated 115200-baud line (the unit tests' Line: simulated milliseconds, so
the figures repeat exactly), with frame-size adaptation against fixed full frames, in the same run. Both use
the measured retransmission timeout. Then at 921600 baud with the hosts' round trip modelled as a fixed delay
each way: the window of 16 frames against 8 (Link(window=8): the frame count of 0.5.0 in the same buffer).

    .venv/bin/python tools/bench_link.py          (make bench)
"""

from __future__ import annotations

import random

from link_sim import Line, pump

from dlink import frame
from dlink.link import WINDOW, Link

BYTES = 20000


def throughput(
    ber: float, drop: float, adaptive: bool, seed: int, baud: int = 115200, delay_ms: int = 0, window: int = WINDOW
) -> float:
    """Bytes per simulated second delivered, in order and intact, from one end to the other."""
    options = {} if adaptive else {"min_payload": frame.MAX_PAYLOAD}
    a, b = Link(7, baud, window, **options), Link(9, baud, window, **options)
    line = Line(a, b, baud=baud, ber=ber, drop=drop, seed=seed, delay_ms=delay_ms)
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
    print(f"\n921600 baud, {BYTES} bytes one way, a fixed delay each way, mean of seeds 1-4, of the clean line's rate:")
    print(f"{'bit error rate':>15} {'delay':>6} {'window 8':>9} {f'window {WINDOW}':>10}")
    for delay in (2, 5):
        clean = throughput(0.0, 0.0, True, 1, 921600, delay)
        for ber in (1e-4, 1e-3):
            old, new = (
                sum(throughput(ber, ber / 2, True, s, 921600, delay, w) for s in (1, 2, 3, 4)) / 4 / clean
                for w in (8, WINDOW)
            )
            print(f"{ber:>15g} {delay:>4}ms {old:>9.2f} {new:>10.2f}")


if __name__ == "__main__":
    main()
