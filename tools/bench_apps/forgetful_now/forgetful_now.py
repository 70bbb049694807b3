# Figure 14's baseline (f), a forgetful ESP-NOW node as mqtt_as's gateway nodes are (tools/bench_nodes.py): each
# wake reads the AHT20, sends the reading to its gateway in one ESP-NOW frame (a QoS 0 PUBLISH in the node frames'
# format, docs/nodes.md, so that the same gateway passes it on), and deep-sleeps: no journal, no answer awaited
# beyond the gateway's radio's acknowledgement. A reading the gateway does not hear (away, off, a frame lost after
# its retries) is gone; a power cut loses nothing it had not sent already.
# settings.py, written by the bench: CLIENT_ID, GATEWAY (hex), CHANNEL, TOPIC, SIZE, WAKES, PERIOD_MS.
# RTC memory: one byte, the wakes since the power-on (the run ends at the WAKES-th). Each reading goes out as SIZE
# bytes (its identity in hex, the temperature, padding), as (e)'s payloads are SIZE bytes.
# Console: "taken ID" at each wake once the reading is made; {"forgetful_now": wakes} at the end.
import os

import aht20
import espnow
import machine
import network
from settings import CHANNEL, GATEWAY, PERIOD_MS, SIZE, TOPIC, WAKES

_TRIES = 3  # ESP-NOW sends while the gateway's radio does not acknowledge (as (e)'s node tries)


def run():
    rtc = machine.RTC()
    wakes = (rtc.memory() or b"\x00")[0] + 1
    rtc.memory(bytes((wakes,)))
    reading = os.urandom(4)
    centi = int(aht20.temperature() * 100)
    body = b"%s %d " % (reading.hex().encode(), centi)
    print("taken", reading.hex())
    send(body + b"x" * (SIZE - len(body)))
    if wakes >= WAKES:
        print('{"forgetful_now": %d}' % wakes)
    else:
        machine.deepsleep(PERIOD_MS)


def send(payload):
    gateway = bytes.fromhex(GATEWAY)
    sta = network.WLAN(network.STA_IF)
    sta.active(True)
    sta.config(channel=CHANNEL)
    e = espnow.ESPNow()
    e.active(True)
    e.add_peer(gateway)
    topic = TOPIC.encode()
    n = 2 + len(topic) + len(payload)  # a QoS 0 PUBLISH: topic length, topic, payload (n < 16,384)
    head = bytes((0x30, 0x80 | (n & 0x7F), n >> 7)) if n >= 128 else bytes((0x30, n))
    frame = b"\x10\x04" + head + bytes((len(topic) >> 8, len(topic) & 0xFF)) + topic + payload
    for _ in range(_TRIES):
        if e.send(gateway, frame, True):
            break
    e.active(False)
    sta.active(False)
