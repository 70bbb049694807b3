# The virtual board's flash emulator timed on its own (host_bridge/vboard/shims/nor_flash.py, without the
# W25Q32JV's time): what one program of a QoS 1 PUB record costs the Unix port in the emulator's Python and file
# I/O, which the durable ("dmqtt") runs of figure 1 pay twice per message (the PUB and DONE records) and a chip,
# whose flash driver is C, does not. argv: a scratch folder. Prints one JSON line: {"program_us": ...}.
import json
import sys
import time

import nor_flash

SECTORS = 64
RECORD = b"\x01" * 98  # a PUB record of figure 1's loopback runs: 64-byte payload, 7-byte topic
folder = sys.argv[1]
with open(folder + "/emulator.flash", "wb") as f:
    f.write(b"\xff" * (SECTORS * 4096))
open(folder + "/emulator.stats", "wb").close()
flash = nor_flash.NorFlash(
    folder + "/emulator.flash", folder + "/emulator.stats", [("mqttlog", 1, 0, 0, SECTORS * 4096)]
)
best = None
for _ in range(3):
    for sector in range(SECTORS):
        flash.erase(0, sector * 4096)
    count = 0
    start = time.ticks_us()
    for addr in range(0, SECTORS * 4096 - len(RECORD), len(RECORD)):
        flash.program(0, addr, RECORD)
        count += 1
    spent = time.ticks_diff(time.ticks_us(), start) / count
    best = spent if best is None or spent < best else best
print(json.dumps({"program_us": best}))
