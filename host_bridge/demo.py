"""`make demo`: virtual boards publish telemetry to a Mosquitto that the demo starts on loopback; a subscriber
prints what the broker delivered. Every process started here is stopped here, by pid."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from host_bridge.broker import Mosquitto
from host_bridge.errors import HostBridgeError
from host_bridge.vboard import VirtualBoard


@dataclass(frozen=True)
class DemoBoard:
    client_id: str
    mqtt_version: str
    qos: int
    count: int = 10


BOARDS = (
    DemoBoard("board-qos0-v31", "3.1", 0),
    DemoBoard("board-qos1-v311", "3.1.1", 1),
    DemoBoard("board-qos2-v5", "5", 2),
)


class Subscriber:
    """paho-mqtt subscriber at QoS 2 (on sensors/# by default), recording each delivery."""

    def __init__(self, address: str, topic: str = "sensors/#") -> None:
        host, port = address.rsplit(":", 1)
        self.received: list[mqtt.MQTTMessage] = []
        self.lock = threading.Lock()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="demo-subscriber")
        self.client.on_message = self._on_message
        subscribed = threading.Event()
        self.client.on_subscribe = lambda *args: subscribed.set()
        self.client.connect(host, int(port))
        self.client.subscribe(topic, qos=2)
        self.client.loop_start()
        if not subscribed.wait(10):
            raise HostBridgeError("the demo subscriber got no SUBACK from the broker")

    def _on_message(self, _client: mqtt.Client, _userdata: object, msg: mqtt.MQTTMessage) -> None:
        with self.lock:
            self.received.append(msg)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def run_board(spec: DemoBoard, broker: str, workdir: Path) -> int:
    config = workdir / f"{spec.client_id}.json"
    config.write_text(
        json.dumps(
            {
                "client_id": spec.client_id,
                "transport": "tcp",
                "broker": broker,
                "mqtt_version": spec.mqtt_version,
                "publish": {"topic": "sensors/{client_id}/telemetry", "qos": spec.qos, "count": spec.count},
            }
        )
    )
    with VirtualBoard(flash=workdir / f"{spec.client_id}.flash", config=config, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as board:
        board.start()
        assert board.process is not None and board.process.stdout is not None
        for line in board.process.stdout:
            print(f"  [{spec.client_id}] {line.decode(errors='replace').rstrip()}", flush=True)
        code = board.wait()
        stats = board.stats()["vfs"]
    print(
        f"  [{spec.client_id}] exit {code}; flash: {stats['bytes_programmed']} bytes programmed, "
        f"{stats['blocks_erased']} blocks erased",
        flush=True,
    )
    return code


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="dmqtt-demo-") as tmp:
        workdir = Path(tmp)
        print(f"[1/3] starting Mosquitto on loopback (work dir {workdir})", flush=True)
        with Mosquitto(workdir / "broker") as broker:
            print(f"      broker at {broker.address}", flush=True)
            subscriber = Subscriber(broker.address)
            try:
                print(f"[2/3] running {len(BOARDS)} virtual boards (MicroPython Unix port, emulated flash)", flush=True)
                failures = [b.client_id for b in BOARDS if run_board(b, broker.address, workdir) != 0]
                expected = sum(b.count for b in BOARDS)
                deadline = time.monotonic() + 5
                while len(subscriber.received) < expected and time.monotonic() < deadline:
                    time.sleep(0.05)
            finally:
                subscriber.close()
        print(f"[3/3] what the broker delivered to a QoS 2 subscriber on sensors/#:", flush=True)
        print(f"  {'topic':<34} {'qos':>3} {'dup':>3} {'ret':>3}  payload")
        for msg in subscriber.received:
            print(f"  {msg.topic:<34} {msg.qos:>3} {int(msg.dup):>3} {int(msg.retain):>3}  {msg.payload.decode()}")
        print(f"received {len(subscriber.received)} of {expected} messages", flush=True)
        if failures:
            print(f"boards that failed: {', '.join(failures)}", file=sys.stderr)
            return 1
        return 0 if len(subscriber.received) >= expected else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except HostBridgeError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        sys.exit(2)
