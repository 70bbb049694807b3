"""Recorder throughput against a baseline in the same run: N QoS 2 messages published to a loopback Mosquitto,
received (a) by a plain paho-mqtt subscriber that acknowledges from RAM, and (b) by `host-bridge record`, which
fsyncs its write-ahead log before every acknowledgement and commits Parquet. Prints both rates and their ratio.

    .venv/bin/python tools/bench_recorder.py [N]
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from host_bridge.broker import Mosquitto
from host_bridge.processes import ManagedProcess
from host_bridge.telemetry import format as telemetry


def publish(address: str, topic: str, n: int) -> float:
    host, port = address.rsplit(":", 1)
    pub = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"bench-pub-{topic}")
    pub.max_inflight_messages_set(20)  # Mosquitto's default receive maximum: more and it disconnects the client
    pub.connect(host, int(port))
    pub.loop_start()
    started = time.monotonic()
    infos = [pub.publish(topic, telemetry.payload("bench", 1, i, i, 1.0, pad=60), qos=2) for i in range(n)]
    for info in infos:
        info.wait_for_publish(120)
    pub.loop_stop()
    pub.disconnect()
    return started


def baseline(address: str, n: int) -> float:
    host, port = address.rsplit(":", 1)
    got = threading.Event()
    count = [0]
    sub = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="bench-paho", clean_session=False)

    def on_message(*_args: object) -> None:
        count[0] += 1
        if count[0] == n:
            got.set()

    subscribed = threading.Event()
    sub.on_message = on_message
    sub.on_subscribe = lambda *a: subscribed.set()
    sub.connect(host, int(port))
    sub.subscribe("bench/paho", qos=2)
    sub.loop_start()
    subscribed.wait(10)
    started = publish(address, "bench/paho", n)
    got.wait(300)
    elapsed = time.monotonic() - started
    sub.loop_stop()
    sub.disconnect()
    return n / elapsed


def recorder(address: str, n: int, work: Path) -> float:
    out = work / "rec"
    args = [
        sys.executable,
        "-m",
        "host_bridge",
        "record",
        "--broker",
        address,
        "--topic",
        "bench/rec",
        "--out",
        str(out),
    ]
    proc = ManagedProcess([*args, "--flush-seconds", "0.1"], work / "recorder.log")
    try:
        proc.wait_for("event=connected")
        started = publish(address, "bench/rec", n)
        while telemetry.committed_rows(out) < n:
            time.sleep(0.01)
        return n / (time.monotonic() - started)
    finally:
        proc.stop()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    with tempfile.TemporaryDirectory() as tmp, Mosquitto(Path(tmp) / "broker") as broker:
        paho_rate = baseline(broker.address, n)
        rec_rate = recorder(broker.address, n, Path(tmp))
    print(f"recorder bench, {n} QoS 2 messages of ~130 bytes through a loopback Mosquitto:")
    print(f"  paho subscriber, acks from RAM:            {paho_rate:8.0f} msg/s")
    print(f"  host-bridge record, fsync before each ack: {rec_rate:8.0f} msg/s (to committed Parquet)")
    print(f"  ratio recorder/baseline: {rec_rate / paho_rate:.2f}")


if __name__ == "__main__":
    main()
