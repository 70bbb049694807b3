# Virtual-board test app for the emulated serial line. config: {"mode": "send", "bytes": N, "fill": 85} writes
# N bytes to UART 1 as fast as the line takes them; {"mode": "recv", "bytes": N} reads N bytes and prints the
# milliseconds between the first and the last one, and how many arrived.
import json
import time

import machine

with open("/flash/config.json") as f:
    cfg = json.load(f)
uart = machine.UART(1, 115200)
total = cfg["bytes"]
if cfg["mode"] == "send":
    chunk = bytes([cfg.get("fill", 0x55)]) * 256
    sent = 0
    while sent < total:
        sent += uart.write(chunk[: min(256, total - sent)])
    print("sent", sent)
    time.sleep_ms(cfg.get("linger_ms", 500))
else:
    print("listening")  # the host writes once it sees this: no bytes wait in buffers before the board reads
    buf = bytearray(256)
    got = 0
    first = last = 0
    deadline = time.ticks_add(time.ticks_ms(), cfg.get("timeout_ms", 20000))
    while got < total and time.ticks_diff(deadline, time.ticks_ms()) > 0:
        n = uart.readinto(buf)
        if n:
            if not got:
                first = time.ticks_ms()
            got += n
            last = time.ticks_ms()
        else:
            time.sleep_ms(1)
    print("received", got, "ms", time.ticks_diff(last, first))
