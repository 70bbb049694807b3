# A baseline for the flash wear figure: the way Paho C (and many clients with persistence) keep in-flight
# messages, one file per message on the filesystem, written when the message is published and removed when its
# acknowledgement comes. Here every acknowledgement comes at once, so this is that store's floor. Each message is
# its topic and payload in /flash/inflight/<key>, key = packet id modulo 32 as a client's ids cycle.
# /flash/config.json: {"count": N, "size": payload bytes}.
import json
import os

cfg = json.load(open("/flash/config.json"))
payload = b"x" * cfg["size"]
topic = b"sensors/cost/telemetry"
try:
    os.mkdir("/flash/inflight")
except OSError:
    pass
for i in range(cfg["count"]):
    path = "/flash/inflight/s-%d" % (i % 32 + 1)
    with open(path, "wb") as f:
        f.write(topic)
        f.write(payload)
    os.remove(path)  # the PUBACK
print(json.dumps({"total": cfg["count"]}))
