# Virtual-board test app: the WiFi station and its sockets through the virtual access point. Joins as the config
# says, prints each status it passes through with the time it took, then (with "echo": HOST:PORT) talks to an
# echo server until the link is lost, saying how each socket operation failed, and talks again once rejoined.
# With "nonblocking": connects without blocking instead (asyncio.open_connection, then a raw socket) and ends.
# With "apis": the newer network API first (WLAN's constants, ipconfig); with "reconnects": config(reconnects=N).
import errno
import json
import socket
import time

import network

with open("/flash/config.json") as f:
    cfg = json.load(f)
sta = network.WLAN(network.STA_IF)
print("idle", sta.status(), sta.isconnected(), sta.config("mac").hex())
sta.active(True)
if cfg.get("apis"):
    # The newer network API (MicroPython 1.24 on): WLAN a class with its constants, ipconfig() beside ifconfig().
    print("class", isinstance(sta, network.WLAN), network.WLAN(network.WLAN.IF_STA) is sta)
    sta.config(pm=network.WLAN.PM_NONE)
    print("pm", network.WLAN.PM_NONE, network.WLAN.PM_PERFORMANCE, network.WLAN.PM_POWERSAVE, sta.config("pm"))
    sta.ipconfig(addr4="192.168.4.60/24", gw4="192.168.4.1")
    network.ipconfig(dns="192.168.4.53")
    print("ipconfig", sta.ipconfig("addr4"), sta.ipconfig("gw4"), sta.ipconfig("dhcp4"), network.ipconfig("dns"))
if cfg.get("reconnects") is not None:
    sta.config(reconnects=cfg["reconnects"])
if cfg.get("ip"):
    sta.ifconfig(tuple(cfg["ip"]))
bssid = bytes(int(b, 16) for b in cfg["bssid"].split(":")) if cfg.get("bssid") else None
began = time.ticks_ms()
sta.connect(cfg["ssid"], cfg.get("password", ""), bssid=bssid)
seen = []
while not sta.isconnected() and time.ticks_diff(time.ticks_ms(), began) < cfg.get("give_up_ms", 10000):
    status = sta.status()
    if not seen or seen[-1] != status:
        seen.append(status)
    time.sleep_ms(2)
print("statuses", seen, "connected", sta.isconnected(), "after", time.ticks_diff(time.ticks_ms(), began))
if not sta.isconnected() or not cfg.get("echo"):
    raise SystemExit(0)
print("ifconfig", sta.ifconfig())
host, port = cfg["echo"].rsplit(":", 1)
addr = socket.getaddrinfo(host, int(port))[0][-1]


def name(exc):
    return errno.errorcode.get(exc.errno, str(exc.errno))


if cfg.get("nonblocking"):
    # As asyncio.open_connection and mqtt_as connect: EINPROGRESS, then the socket is writable.
    import asyncio
    import select

    async def talk():
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"async")
        await writer.drain()
        print("async echo", await reader.readexactly(5))
        writer.close()

    asyncio.run(talk())
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(addr)
        print("nonblocking connect returned")
    except OSError as exc:
        print("nonblocking connect", name(exc))
    poller = select.poll()
    poller.register(s, select.POLLOUT)
    print("writable", bool(poller.poll(5000)))
    s.setblocking(True)
    s.write(b"plain")
    print("echo", s.read(5))
    raise SystemExit(0)
s = socket.socket()
s.settimeout(10)
s.connect(addr)
s.write(b"hello")
print("echo", s.read(5))
print("talking")
try:
    while True:
        s.write(b"x")
        if s.read(1) != b"x":
            print("socket ended")
            break
        time.sleep_ms(20)
except OSError as exc:
    print("socket failed", name(exc), "connected", sta.isconnected(), "status", sta.status())
try:
    socket.socket().connect(addr)
    print("connect worked offline")
except OSError as exc:
    print("connect failed", name(exc))
try:
    socket.getaddrinfo("broker.lan", 1883)
    print("resolved offline")
except OSError as exc:
    print("resolve failed", exc.errno)
began = time.ticks_ms()
while not sta.isconnected():
    time.sleep_ms(5)
print("rejoined after", time.ticks_diff(time.ticks_ms(), began), "status", sta.status())
s = socket.socket()
s.settimeout(10)
s.connect(addr)
s.write(b"again")
print("echo", s.read(5))
