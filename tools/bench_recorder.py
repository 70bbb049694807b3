"""Recorder throughput (figure 9 of BENCHMARKS.md) against a baseline in the same run. QoS 2 messages wait in
Mosquitto for subscribers with persistent sessions that are offline; then the subscribers connect and the time to
take them all is measured, so the rate is the receiving side's, not a Python publisher's: (a) a plain paho-mqtt
subscriber that acknowledges from RAM, (b) 1, 2 and 4 `host-bridge record` processes sharing one MQTT 5 shared
subscription (`$share/recorders/...`), each with its own persistent session and folder, each fsyncing its
write-ahead log before every acknowledgement and committing Parquet (the rate counts until every row is committed).
Mosquitto hands a shared subscription's messages round robin to the group's sessions, offline ones included.

    .venv/bin/python tools/bench_recorder.py [--quick]          (part of make bench)
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from bench_report import Section, table
from figure_cli import print_figure
from paho.mqtt.enums import CallbackAPIVersion

from dmqtt_telemetry import format as telemetry
from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.processes import ManagedProcess

PUBLISHERS = 4


def publish(address: str, prefix: str, n: int) -> float:
    """n QoS 2 messages from PUBLISHERS clients at once (each on its own topic); returns when it started."""
    host, port = address.rsplit(":", 1)

    def one(k: int) -> None:
        pub = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"bench-pub-{prefix}-{k}")
        pub.max_inflight_messages_set(20)  # Mosquitto's default receive maximum: more and it disconnects the client
        pub.connect(host, int(port))
        pub.loop_start()
        infos = [
            pub.publish(f"{prefix}/p{k}", telemetry.payload(f"p{k}", 1, i, i, 1.0, pad=60), qos=2)
            for i in range(n // PUBLISHERS)
        ]
        for info in infos:
            info.wait_for_publish(300)
        pub.loop_stop()
        pub.disconnect()

    started = time.monotonic()
    threads = [threading.Thread(target=one, args=(k,)) for k in range(PUBLISHERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return started


def baseline(address: str, n: int) -> float:
    host, port = address.rsplit(":", 1)
    got = threading.Event()
    stamps: list[float] = []

    def on_message(*_args: object) -> None:
        stamps.append(time.monotonic())
        if len(stamps) == n:
            got.set()

    def connect() -> mqtt.Client:
        sub = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="bench-paho", clean_session=False)
        subscribed = threading.Event()
        sub.on_message = on_message
        sub.on_subscribe = lambda *a: subscribed.set()
        sub.on_connect = lambda c, *a: c.subscribe("bench/paho/#", qos=2)
        sub.connect(host, int(port))
        sub.loop_start()
        subscribed.wait(10)
        return sub

    sub = connect()
    sub.loop_stop()
    sub.disconnect()  # the session stays: what is published now waits for it
    publish(address, "bench/paho", n)
    sub = connect()
    got.wait(300)
    sub.loop_stop()
    sub.disconnect()
    return n / (stamps[-1] - stamps[0])  # first delivery to last, as the recorders' rate is taken


def recorders(address: str, n: int, work: Path, count: int) -> dict[str, Any]:
    """n queued messages taken by `count` recorders sharing a subscription: the aggregate rate, each one's share."""
    outs = [work / f"rec-{count}-{i}" for i in range(count)]

    def start(marker: str) -> list[ManagedProcess]:
        procs = []
        for out in outs:
            args = [sys.executable, "-m", "host_bridge", "record", "--broker", address, "--out", str(out)]
            args += ["--client-id", out.name, "--mqtt-version", "5", "--topic", f"$share/recorders/bench/r{count}/#"]
            procs.append(ManagedProcess([*args, "--flush-seconds", "0.1"], work / f"{out.name}.log"))
        for proc in procs:
            proc.wait_for(marker)
        return procs

    for proc in start("event=subscribed"):
        proc.stop()  # sessions and the shared subscription stay with the broker
    publish(address, f"bench/r{count}", n)
    procs = start("event=start")
    try:
        while sum(telemetry.committed_rows(out) for out in outs) < n:
            time.sleep(0.01)
    finally:
        for proc in procs:
            proc.stop()
    # From the first delivery any recorder read to the last (their received_at stamps), so that the recorders'
    # interpreter start (pyarrow's import) is not counted.
    stamps = [r["received_at"] for out in outs for r in telemetry.read_committed(out, ["received_at"])]
    seconds = (max(stamps) - min(stamps)).total_seconds()
    return {"recorders": count, "rate": n / seconds, "shares": [telemetry.committed_rows(out) for out in outs]}


def figure(quick: bool) -> dict[str, Any]:
    n = 2000 if quick else 8000
    with tempfile.TemporaryDirectory() as tmp, Mosquitto(Path(tmp) / "broker") as broker:
        paho_rate = baseline(broker.address, n)
        rows = []
        for count in (1, 2, 4):
            row = recorders(broker.address, n, Path(tmp), count)
            row["of_baseline"] = row["rate"] / paho_rate
            rows.append(row)
            print(f"  {count} recorder(s): {row['rate']:.0f} msg/s ({row['of_baseline']:.2f} of a RAM-acking "
                  f"paho subscriber's {paho_rate:.0f}), shares {row['shares']}", flush=True)  # fmt: skip
    for row in rows:
        row["of_one"] = row["rate"] / rows[0]["rate"]
    return {"messages": n, "publishers": PUBLISHERS, "baseline_rate": paho_rate, "rows": rows}


# -- the report (tools/bench_recorder.md) -----------------------------------------------------------------------


def report(fig: dict[str, Any], figures: dict[str, Any]) -> Section:
    rows = [
        [r["recorders"], f"{r['rate']:,.0f}", f"{r['of_baseline']:.2f}", f"{r['of_one']:.2f}", str(r["shares"])]
        for r in fig["rows"]
    ]
    head = ["recorders", "msg/s", "of the RAM baseline", "of one recorder", "rows per recorder"]
    return Section({"messages": f"{fig['messages']:,}", "baseline_rate": f"{fig['baseline_rate']:,.0f}",
                    "table": table(head, rows)})  # fmt: skip


def main() -> None:
    print_figure(__doc__, figure)


if __name__ == "__main__":
    main()
