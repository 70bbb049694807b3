# Virtual-board test app: NVS in the flash file. Reads the count an earlier boot committed to NVS namespace "app"
# (-4354, ESP_ERR_NVS_NOT_FOUND, when none did), then commits it `commits` times, one more each time, saying so
# after each; says where the nvs partition is and the first bytes esp.flash_read() finds at the chip's NVS offset.
import json

import esp
import esp32

with open("/flash/config.json") as f:
    cfg = json.load(f)
nvs = esp32.NVS("app")
try:
    count = nvs.get_i32("count")
except OSError as exc:
    count = exc.args[0]
print("count", count)
part = esp32.Partition.find(esp32.Partition.TYPE_DATA, label="nvs")[0]
info = part.info()
print("partition", info[1], info[3], info[4])
head = bytearray(4)
esp.flash_read(cfg.get("nvs_at", 0x9000), head)
print("at the chip's nvs", bytes(head))
for _ in range(cfg.get("commits", 1)):
    count = max(count, 0) + 1
    nvs.set_i32("count", count)
    nvs.set_blob("tag", b"t%d" % count)
    nvs.commit()
    print("committed", count)
