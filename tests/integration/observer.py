"""An independent witness for the board tests: a paho-mqtt subscriber at QoS 2 that keeps every delivery in
memory, duplicates included. (The product's recorder, `host-bridge record`, has tests of its own; the board
tests keep an oracle that shares no code with it.)"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion


class Observer:
    """A QoS 2 subscriber (persistent session unless clean=True): every delivery, duplicates included, as
    received (`messages`) and by device (`deliveries`)."""

    def __init__(self, address: str, client_id: str, topic: str = "sensors/#", clean: bool = False) -> None:
        host, port = address.rsplit(":", 1)
        self.lock = threading.Lock()
        self.messages: list[mqtt.MQTTMessage] = []
        self.deliveries: dict[str, list[tuple[int, int, bool]]] = defaultdict(list)  # dev -> (boot, seq, dup)
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=clean)
        self.client.on_message = self._on_message
        subscribed = threading.Event()
        self.client.on_connect = lambda c, u, f, rc, p: c.subscribe(topic, qos=2)
        self.client.on_subscribe = lambda *args: subscribed.set()
        self.client.reconnect_delay_set(0.1, 1)
        self.client.connect(host, int(port))
        self.client.loop_start()
        if not subscribed.wait(10):
            raise TimeoutError("the observer got no SUBACK")

    def _on_message(self, _c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        body = json.loads(msg.payload)
        with self.lock:
            self.messages.append(msg)
            self.deliveries[body["dev"]].append((body["boot"], body["seq"], bool(msg.dup)))

    def distinct(self, dev: str) -> set[tuple[int, int]]:
        with self.lock:
            return {(boot, seq) for boot, seq, _ in self.deliveries[dev]}

    def wait_for(self, dev: str, count: int, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while len(self.distinct(dev)) < count and time.monotonic() < deadline:
            time.sleep(0.05)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def check_promises(observer: Observer, dev: str, qos: int, count: int) -> None:
    observer.wait_for(dev, count)
    with observer.lock:
        got = list(observer.deliveries[dev])
    distinct = {(boot, seq) for boot, seq, _ in got}
    by_boot: dict[int, list[int]] = defaultdict(list)
    for boot, seq in distinct:
        by_boot[boot].append(seq)
    for boot, seqs in by_boot.items():
        # Each boot's accepted messages are seq 0..k-1: a gap is an accepted message that was lost.
        assert sorted(seqs) == list(range(len(seqs))), f"{dev} boot {boot}: lost {set(range(max(seqs))) - set(seqs)}"
    assert len(distinct) == count, f"{dev}: {len(distinct)} distinct messages arrived, {count} were accepted"
    if qos == 2:
        dups = len(got) - len(distinct)
        assert dups == 0, f"{dev}: {dups} QoS 2 messages delivered twice"


