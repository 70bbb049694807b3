# Sensor-board application: read config, connect to the broker over TCP, publish `count` telemetry messages,
# print a JSON summary line. (The serial transport, the boot counter and the journaled resume come with the
# client and link issues.)

import json
import socket
import sys
import time

import config
from dmqtt.client import Client, MQTTError

_IPPROTO_TCP = 6
_TCP_NODELAY = 1


def reading(seq):
    # Stand-in sensor: a slow deterministic wave, so plots and rollups have something to show.
    return 20.0 + (seq % 20) * 0.25


def open_socket(host, port):
    addr = socket.getaddrinfo(host, port)[0][-1]
    sock = socket.socket()
    sock.connect(addr)
    # Each packet leaves in one write; without TCP_NODELAY a QoS 1 flow waits on Nagle + delayed ACK.
    sock.setsockopt(_IPPROTO_TCP, _TCP_NODELAY, 1)
    return sock


def run(cfg):
    client = Client(cfg["client_id"], cfg["version"], cfg["keepalive"])
    client.connect(open_socket(cfg["host"], cfg["port"]))
    print("connected to %s:%d as %s" % (cfg["host"], cfg["port"], cfg["client_id"]))
    topic = cfg["topic"].encode()
    start = time.ticks_ms()
    for seq in range(cfg["count"]):
        body = {"dev": cfg["client_id"], "seq": seq, "t": time.ticks_ms(), "reading": reading(seq)}
        if cfg["payload_bytes"]:
            body["pad"] = ""
            body["pad"] = "x" * max(0, cfg["payload_bytes"] - len(json.dumps(body)))
        text = json.dumps(body)
        client.publish(topic, text.encode(), cfg["qos"])
        if cfg["interval_ms"]:
            time.sleep_ms(cfg["interval_ms"])
    client.disconnect()
    summary = {"dev": cfg["client_id"], "sent": cfg["count"], "qos": cfg["qos"], "ms": time.ticks_diff(time.ticks_ms(), start)}
    print(json.dumps(summary))


def main():
    try:
        cfg = config.load()
    except config.ConfigError as exc:
        print("config error:", exc)
        sys.exit(3)
    try:
        run(cfg)
    except (OSError, MQTTError) as exc:
        print("mqtt error:", exc)
        sys.exit(4)


main()
