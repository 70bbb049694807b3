# Virtual-board test app: a task watchdog left unfed where no shim waits. The first boot spins in a busy loop; the
# one its watchdog reset blocks in select.poll() with no timeout, on a socket to a peer that never answers
# (peer.json); the next says it was reset again and ends.
import json
import select
import socket

import machine

resets = 0
try:
    with open("resets") as f:
        resets = int(f.read())
except OSError:
    pass
if machine.reset_cause() == machine.WDT_RESET:
    resets += 1
    with open("resets", "w") as f:
        f.write(str(resets))
print("boot after", resets, "watchdog resets")
if resets == 0:
    machine.WDT(timeout=300)
    print("spinning")
    n = 0
    while True:
        n += 1
elif resets == 1:
    with open("peer.json") as f:
        peer = json.load(f)
    sock = socket.socket()
    sock.connect(socket.getaddrinfo(peer["host"], peer["port"])[0][-1])
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    machine.WDT(timeout=300)
    print("polling")
    poller.poll(-1)
    print("poll returned")
