# Virtual-board test app: a task watchdog and a socket whose peer never answers
# (tests/integration/test_vboard_esp32_apis.py): the board joins, arms a WDT, blocks in recv() and is reset by the
# watchdog, as a chip's task watchdog resets a task blocked in lwIP; the boot after says so.
import json
import socket
import time

import machine
import network

if machine.reset_cause() == machine.WDT_RESET:
    print("reset by the watchdog")
else:
    with open("peer.json") as f:
        peer = json.load(f)
    sta = network.WLAN(network.STA_IF)
    sta.active(True)
    sta.connect("lab", "")
    while not sta.isconnected():
        time.sleep_ms(20)
    s = socket.socket()
    s.connect(socket.getaddrinfo(peer["host"], peer["port"])[0][-1])
    machine.WDT(timeout=500)
    print("blocked in recv")
    s.recv(1)
    print("recv returned")
