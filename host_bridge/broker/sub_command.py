"""`host-bridge sub`: watch what reaches a broker, a line per message, for a board's or a bridge's first minute
(what mosquitto_sub does, without installing it):

    host-bridge sub                                      # sensors/# on 127.0.0.1:1883, until Ctrl-C
    host-bridge sub 'cmd/#' 'sensors/board-1/#' --count 10
    host-bridge sub --broker 192.168.1.10:8883 --tls --cafile ca.pem --username recorder --password-file pw

Each line: the topic, QoS, the retain flag, the message's MQTT 5.0 User Properties as name=value (`dmqtt=resent`:
a copy its board sent again on purpose, end-to-end confirmation), and the payload as text (hex when it is not
UTF-8). It subscribes in MQTT
5.0 on a clean session, so it never takes messages a persistent subscriber (the recorder) is owed."""

from __future__ import annotations

import argparse
import ssl
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from host_bridge.broker.paho_loop import end_loop
from host_bridge.errors import BrokerError
from host_bridge.net import Destination
from host_bridge.processes import sigterm_as_ctrl_c

if TYPE_CHECKING:  # paho comes with the [bench] extra, imported by run(): --help works without it
    import paho.mqtt.client as mqtt
    from paho.mqtt.reasoncodes import ReasonCode


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", nargs="*", default=["sensors/#"], help="topic filters (default: sensors/#)")
    parser.add_argument("--broker", default="127.0.0.1:1883", metavar="HOST:PORT", help="the broker to watch")
    parser.add_argument("--qos", type=int, choices=(0, 1, 2), default=2, help="the subscriptions' QoS")
    parser.add_argument("--count", type=int, default=0, metavar="N", help="exit after N messages (0: until Ctrl-C)")
    parser.add_argument("--timeout", type=float, default=0, metavar="S", help="exit 1 after S seconds (0: never)")
    parser.add_argument("-u", "--username")
    parser.add_argument("--password-file", type=Path, help="file holding the password (kept out of ps and logs)")
    parser.add_argument("--tls", action="store_true", help="TLS to the broker, certificate verified")
    parser.add_argument("--cafile", help="CA bundle that signs the broker's certificate")


def line(message: mqtt.MQTTMessage) -> str:
    """How `sub` prints a message: its User Properties (MQTT 5.0) as name=value, the resent mark among them."""
    pairs = getattr(message.properties, "UserProperty", None) or []
    properties = "".join(f" {name}={value}" for name, value in pairs)
    payload = bytes(message.payload)
    try:
        text = payload.decode()
    except UnicodeDecodeError:
        text = "hex:" + payload.hex()
    return f"{message.topic} qos={message.qos} retain={int(message.retain)}{properties} {text}"


def run(args: argparse.Namespace) -> int:
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    broker = Destination.parse(args.broker)
    if args.count < 0 or args.timeout < 0:
        raise BrokerError("--count and --timeout take 0 (no limit) or more")
    client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    if args.username is not None:
        password = args.password_file.read_text().strip() if args.password_file else None
        client.username_pw_set(args.username, password)
    if args.tls:
        client.tls_set_context(ssl.create_default_context(cafile=args.cafile))
    done = threading.Event()
    seen = 0
    refused: list[str] = []

    def on_connect(c: mqtt.Client, _u: object, _f: object, code: ReasonCode, _p: object) -> None:
        if code.is_failure:
            refused.append(f"the broker refused the connection: {code}")
            done.set()
            return
        c.subscribe([(topic, args.qos) for topic in args.topic])

    def on_message(_c: mqtt.Client, _u: object, message: mqtt.MQTTMessage) -> None:
        nonlocal seen
        print(line(message), flush=True)
        seen += 1
        if args.count and seen >= args.count:
            done.set()

    def on_subscribe(_c: mqtt.Client, _u: object, _mid: int, _codes: object, _p: object) -> None:
        # Said once the broker has the subscriptions: from here on, what is published is printed.
        print(f"sub: watching {' '.join(args.topic)} on {broker}", file=sys.stderr, flush=True)

    client.on_connect = on_connect
    client.on_message = on_message
    client.on_subscribe = on_subscribe
    sigterm_as_ctrl_c()
    try:
        client.connect(broker.host, broker.port)
    except OSError as exc:
        raise BrokerError(f"cannot reach the broker at {broker}: {exc.strerror or exc}") from None
    client.loop_start()
    try:
        finished = done.wait(args.timeout or None)
    except KeyboardInterrupt:
        finished = True
    finally:
        end_loop(client)
    if refused:
        raise BrokerError(refused[0])
    return 0 if finished else 1
