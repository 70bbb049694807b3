# ESP-NOW on the virtual board, as a program of one's own uses it: lab.json (written by the test) says the role,
# the peer's MAC (hex), the channel, the key and how many frames. Each role prints what espnow told it.
#   echo   answer each frame with it upper-cased, until `count` frames or a quiet `quiet_ms` (10 s)
#   send   send `count` frames once each (no retry), then read the answers until `count` or a quiet `answers_ms`
#   sink   wait `wait_ms` without reading, then read what the receive buffer kept
#   aio    the echo, with aioespnow (async for, asend)
#   irq    the echo's reading through irq(): the callback reads, the program sleeps
import json
import time

import espnow
import network

with open("lab.json") as f:
    lab = json.load(f)
peer = bytes(int(lab["peer"][i : i + 2], 16) for i in range(0, 12, 2))
count = lab.get("count", 5)

sta = network.WLAN(network.STA_IF)
sta.active(True)
if "channel" in lab:
    sta.config(channel=lab["channel"])
e = espnow.ESPNow()
if "rxbuf" in lab:
    e.config(rxbuf=lab["rxbuf"])
e.active(True)
if "lmk" in lab:
    e.add_peer(peer, lab["lmk"].encode(), encrypt=True)
else:
    e.add_peer(peer)
print("ready", lab["role"], sta.config("channel"))


def answer(mac, msg):
    e.send(mac, bytes(msg).upper())


role = lab["role"]
if role == "echo":
    n = 0
    while n < count:
        mac, msg = e.recv(lab.get("quiet_ms", 10000))
        if mac is None:
            break
        n += 1
        answer(mac, msg)
    print("echoed", n, "stats", e.stats())
elif role == "send":
    acked = 0
    for i in range(count):
        if e.send(peer, (b"ping %d " % i) + b"." * lab.get("pad", 0)):
            acked += 1
    got = []
    while len(got) < count:
        mac, msg = e.irecv(lab.get("answers_ms", 5000))
        if mac is None:
            break
        got.append(bytes(msg))
    print("acked", acked, "answers", len(got), sorted(got)[:2], "stats", e.stats())
    if peer in e.peers_table:
        print("rssi", e.peers_table[peer][0])
elif role == "sink":
    time.sleep_ms(lab["wait_ms"])
    n = 0
    while e.any():
        mac, msg = e.recv(0)
        n += 1
    print("kept", n, "stats", e.stats())
elif role == "aio":
    import asyncio

    import aioespnow

    a = aioespnow.AIOESPNow()

    async def echo():
        n = 0
        async for mac, msg in a:
            n += 1
            await a.asend(mac, bytes(msg).upper())
            if n == count:
                return n

    print("echoed", asyncio.run(asyncio.wait_for(echo(), 10)), "stats", a.stats())
elif role == "irq":
    heard = []

    def on_frame(esp):
        while True:
            mac, msg = esp.irecv(0)
            if mac is None:
                return
            heard.append(bytes(msg))
            answer(mac, msg)

    e.irq(on_frame)
    began = time.ticks_ms()
    while len(heard) < count and time.ticks_diff(time.ticks_ms(), began) < 10000:
        time.sleep_ms(5)
    print("echoed", len(heard), "stats", e.stats())
