# The errno numbers a board raises and names, as an ESP32 has them (newlib's, lwIP's): the same from `errno.NAME`
# in this file (compiled on the board), from `from errno import` in a module (compiled by mpy-cross), and in what
# the sockets, wired and on WiFi, and the parts raise. peer.json: a host port that accepts and never answers.
import asyncio
import errno
import json
import socket

import machine
import names
import network
from esp import dht_readinto

print("main", errno.ETIMEDOUT, errno.ECONNABORTED, errno.EHOSTUNREACH, errno.EINPROGRESS)
print("module", names.NUMBERS)
print("errorcode", errno.errorcode.get(errno.ETIMEDOUT))
try:
    dht_readinto(machine.Pin(4), bytearray(5))  # nothing wired on the pin
except OSError as exc:
    print("dht", exc.errno, exc.errno == errno.ETIMEDOUT)
with open("peer.json") as f:
    peer = json.load(f)
address = socket.getaddrinfo(peer["host"], peer["port"])[0][-1]
wired = socket.socket()
wired.setblocking(False)
try:
    wired.connect(address)
except OSError as exc:
    print("wired non-blocking connect", exc.errno, exc.errno == errno.EINPROGRESS)
wired.close()
wired = socket.socket()
wired.connect(address)
wired.settimeout(0.2)
try:
    wired.recv(1)
except OSError as exc:
    print("wired recv timeout", exc.errno, exc.errno == errno.ETIMEDOUT)
wired.close()


async def opened():
    reader, writer = await asyncio.open_connection(peer["host"], peer["port"])
    writer.close()
    return True


print("asyncio open_connection", asyncio.run(opened()))
network.WLAN(network.STA_IF).active(True)
try:
    socket.socket().connect(address)
except OSError as exc:
    print("unjoined connect", exc.errno, exc.errno == errno.EHOSTUNREACH)
raise OSError(errno.ETIMEDOUT)
