"""What TLS costs the board, on the virtual board against Mosquitto in the same run: the handshake (time, and
the resident memory it adds to the MicroPython process: on the Unix port mbedTLS allocates outside MicroPython's
GC heap), and QoS 1 throughput with window 8 over TLS against plain TCP.

On an ESP32, mbedTLS allocates from the IDF heap as well, not from MicroPython's: ESP-IDF's defaults give each
TLS connection a 16 KiB receive and a 4 KiB send record buffer (CONFIG_MBEDTLS_SSL_IN_CONTENT_LEN and
CONFIG_MBEDTLS_SSL_OUT_CONTENT_LEN), and Espressif's FAQ recommends dynamic TX/RX buffers where memory is short.

    .venv/bin/python tools/bench_tls.py [--messages 1000] [--handshakes 20]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from host_bridge.boards.definition import BoardDefinition
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.broker.pki import CertificateAuthority
from host_bridge.hil.cycle import CutPlan, run_to_completion
from host_bridge.hil.virtual_dut import VirtualDut
from host_bridge.vboard.runner import micropython_executable

HANDSHAKES = """
import socket, ssl, time
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.verify_mode = ssl.CERT_REQUIRED
ctx.load_verify_locations(cadata=open("{ca}", "rb").read())
addr = socket.getaddrinfo("127.0.0.1", {port})[0][-1]
before = rss()
peak = before
for i in range({n}):
    s = socket.socket()
    s.connect(addr)
    t0 = time.ticks_us()
    t = ctx.wrap_socket(s, server_hostname="localhost")
    print("handshake_us", time.ticks_diff(time.ticks_us(), t0))
    peak = max(peak, rss())
    t.close()
print("rss_kb", before, peak)
"""


def handshakes(ca_der: Path, port: int, n: int) -> tuple[list[int], int, int]:
    script = Path(tempfile.mkdtemp()) / "hs.py"
    script.write_text(HANDSHAKES.format(ca=ca_der, port=port, n=n))
    out = subprocess.run(
        [micropython_executable(), str(script)], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    times = [int(line.split()[1]) for line in out.splitlines() if line.startswith("handshake_us")]
    before, peak = (int(x) for x in next(line for line in out.splitlines() if line.startswith("rss_kb")).split()[1:])
    return times, before, peak


def throughput(work: Path, broker: Mosquitto, messages: int, tls: dict[str, str] | None, ca: Path) -> float:
    put = ((ca, "ca.pem"),) if tls else ()
    dut = VirtualDut(
        "bench", BoardDefinition.load("sim"), flash=work / "board.flash", console_log=work / "console.log", put=put
    )
    config = {
        "client_id": work.name,
        "broker": broker.address,
        "window": 8,
        "publish": {"qos": 1, "count": messages, "payload_bytes": 64},
    }
    if tls:
        config["tls"] = tls
    try:
        dut.configure(config)
        result = run_to_completion(dut, CutPlan.none(), random.Random(0), timeout=300)
    finally:
        dut.close()
    assert result.summary is not None
    return messages / (int(str(result.summary["ms"])) / 1000)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--handshakes", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pki = CertificateAuthority(root / "pki")
        cert, key = pki.issue("broker", "localhost", dns="localhost")
        ca_der = root / "ca.der"
        subprocess.run(["openssl", "x509", "-in", str(pki.ca), "-outform", "der", "-out", str(ca_der)], check=True)
        with Mosquitto(root / "plain") as plain, Mosquitto(root / "tls", tls=(cert, key)) as secure:
            times, before, peak = handshakes(ca_der, secure.port, args.handshakes)
            rates = {}
            for name, broker, tls in (
                ("plain", plain, None),
                ("tls", secure, {"ca": "ca.pem", "server_hostname": "localhost"}),
            ):
                work = root / f"board-{name}"
                work.mkdir()
                rates[name] = throughput(work, broker, args.messages, tls, pki.ca)
    print(f"TLS on the virtual board (MicroPython {sys.platform} Unix port, mbedTLS), against Mosquitto on loopback")
    print(
        f"  handshake (RSA 2048, verified): median {statistics.median(times) / 1000:.1f} ms, "
        f"max {max(times) / 1000:.1f} ms over {len(times)}"
    )
    print(
        f"  resident memory: {before} KiB before, {peak} KiB at the peak of the handshakes "
        f"(+{peak - before} KiB, outside the GC heap)"
    )
    print(
        f"  QoS 1, window 8, {args.messages} x 64-byte messages: plain {rates['plain']:.0f} msg/s, "
        f"TLS {rates['tls']:.0f} msg/s, "
        f"ratio {rates['tls'] / rates['plain']:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
