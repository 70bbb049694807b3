"""The bench's observer: a paho-mqtt subscriber at QoS 2 on a persistent session that records every delivery,
duplicates included (topic, payload, QoS, DUP, retain, arrival time). It shares no code with the board's client
or the recorder, so it can catch their mistakes; it reads payloads by the telemetry contract
(dmqtt_telemetry.format), as the recorder and the audit do, so that all three count the same messages."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from dmqtt_telemetry.format import marked_resent, parse_payload
from dmqtt_telemetry.promises import Delivery
from host_bridge.broker.paho_loop import end_loop

_SESSION_KEPT_S = 3600  # MQTT 5.0: a persistent session's expiry (the broker keeps it across our reconnects)


@dataclass(frozen=True)
class Record:
    topic: str
    payload: bytes
    qos: int
    dup: bool
    retain: bool
    arrived: float  # time.time() at delivery
    telemetry: Delivery | None  # what the telemetry contract reads in the payload; None for other payloads
    # A copy the board sent again on purpose (end-to-end confirmation), as its MQTT 5.0 User Property says; always
    # False on a 3.1.1 subscription, which cannot carry the mark.
    resent: bool = False


class Subscriber:
    """Subscribes `topic` at QoS 2 (a persistent session unless clean=True) and keeps every delivery."""

    def __init__(
        self,
        address: str,
        client_id: str,
        topic: str = "sensors/#",
        clean: bool = False,
        timeout: float = 10,
        username: str | None = None,
        password: str | None = None,
        tls_ca: Path | None = None,
        tls_cert: tuple[Path, Path] | None = None,
        mqtt5: bool = False,
    ) -> None:
        """`username`/`password`: for a broker that wants them; `tls_ca`: TLS to the broker, verified with it;
        `tls_cert`: a client certificate and key to present; `mqtt5`: subscribe in MQTT 5.0, which carries the
        User Property that marks a copy sent again (Record.resent)."""
        host, port = address.rsplit(":", 1)
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)  # notified at every delivery
        self.records: list[Record] = []
        self._seen: dict[str, set[tuple[int, int]]] = {}  # per device: the (boot, seq) that arrived
        if mqtt5:
            self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
        else:
            self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=clean)
        if username is not None:
            self.client.username_pw_set(username, password)
        if tls_ca is not None:
            cert, key = (str(tls_cert[0]), str(tls_cert[1])) if tls_cert else (None, None)
            self.client.tls_set(ca_certs=str(tls_ca), certfile=cert, keyfile=key)
        self.client.on_message = self._on_message
        subscribed = threading.Event()
        self.client.on_connect = lambda c, u, f, rc, p: c.subscribe(topic, qos=2)
        self.client.on_subscribe = lambda *args: subscribed.set()
        self.client.reconnect_delay_set(1, 2)
        if mqtt5:
            kept = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            kept.SessionExpiryInterval = 0 if clean else _SESSION_KEPT_S
            self.client.connect(host, int(port), clean_start=clean, properties=kept)
        else:
            self.client.connect(host, int(port))
        self.client.loop_start()
        if not subscribed.wait(timeout):
            self.close()
            raise TimeoutError(f"the subscriber got no SUBACK from {address} within {timeout:.0f} s")

    def _on_message(self, _c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        payload = bytes(msg.payload)
        fields = parse_payload(payload)  # once, at arrival
        telemetry = (
            Delivery(fields["dev"], fields["boot"], fields["seq"], msg.qos) if fields["parse_error"] is None else None
        )
        resent = marked_resent(getattr(msg.properties, "UserProperty", None))
        record = Record(msg.topic, payload, msg.qos, bool(msg.dup), bool(msg.retain), time.time(), telemetry, resent)
        with self.arrived:
            self.records.append(record)
            if telemetry is not None:
                self._seen.setdefault(telemetry.dev, set()).add((telemetry.boot, telemetry.seq))
            self.arrived.notify_all()

    def deliveries(self) -> list[Delivery]:
        """Every arrival of a board's telemetry message (payloads that are not telemetry are left out)."""
        with self.lock:
            return [r.telemetry for r in self.records if r.telemetry is not None]

    def distinct(self, dev: str) -> set[tuple[int, int]]:
        """The (boot, seq) of every message of `dev` that arrived."""
        with self.lock:
            return set(self._seen.get(dev, ()))

    def wait_for(self, dev: str, count: int, timeout: float = 15) -> None:
        """Until `count` distinct messages of `dev` have arrived (woken by each arrival); TimeoutError saying how
        many did."""
        deadline = time.monotonic() + timeout
        with self.arrived:
            while len(self._seen.get(dev, ())) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    have = len(self._seen.get(dev, ()))
                    raise TimeoutError(f"{dev}: {have} of {count} messages arrived within {timeout:.0f} s")
                self.arrived.wait(left)

    def save(self, path: Path) -> None:
        """Every delivery as JSON lines (payload as text where it is UTF-8, else hex)."""
        with self.lock:
            records = list(self.records)
        with open(path, "w") as f:
            for r in records:
                try:
                    payload = r.payload.decode()
                except UnicodeDecodeError:
                    payload = "hex:" + r.payload.hex()
                row = {
                    "topic": r.topic,
                    "qos": r.qos,
                    "dup": r.dup,
                    "retain": r.retain,
                    "resent": r.resent,
                    "arrived": r.arrived,
                    "payload": payload,
                }
                f.write(json.dumps(row) + "\n")

    def close(self) -> None:
        end_loop(self.client)
