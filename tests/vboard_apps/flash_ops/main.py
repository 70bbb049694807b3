# Virtual-board test app: raw operations on the "mqttlog" flash partition, given by the test in the environment
# (so that /flash/config.json, and the LittleFS writes it causes, stay the same from boot to boot):
# FLASH_OPS='[["erase", block], ["program", block, offset, "hex"], ["read", block, offset, n]]'
# Ends with the flash time by the model that these operations took ("model_us N", 0 without flash timing), the
# boot's own (formatting, installing files) left out.
import json
import os

import esp32
import nor_flash  # the virtual board's flash

booted_us = nor_flash.model_us
part = esp32.Partition.find(esp32.Partition.TYPE_DATA, label="mqttlog")[0]
for op in json.loads(os.getenv("FLASH_OPS") or "[]"):
    try:
        if op[0] == "erase":
            part.ioctl(6, op[1])
        elif op[0] == "program":
            data = bytes(int(op[3][i : i + 2], 16) for i in range(0, len(op[3]), 2))
            part.writeblocks(op[1], data, op[2])
        else:
            buf = bytearray(op[3])
            part.readblocks(op[1], buf, op[2])
            print("read", "".join("%02x" % b for b in buf))
        print("ok", op[0])
    except OSError as exc:
        print("error", op[0], exc.args[0])
print("model_us", nor_flash.model_us - booted_us)
