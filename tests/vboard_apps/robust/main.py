# Virtual-board test app: umqtt.robust, as a stock ESP32 image freezes it (unmodified, fetched from PyPI by
# host_bridge.vboard.stock), publishing `count` QoS 1 messages over WiFi on a persistent session. Each
# acknowledged one prints an `accepted` line (the board event a scheduled access point outage can start at).
import json
import time

import network
from umqtt.robust import MQTTClient

with open("/flash/config.json") as f:
    cfg = json.load(f)
sta = network.WLAN(network.STA_IF)
sta.active(True)
sta.connect("lab", "")
while not sta.isconnected():
    time.sleep_ms(20)
host, port = cfg["broker"].rsplit(":", 1)
client = MQTTClient(cfg["client_id"], host, int(port), keepalive=60)
client.DELAY = 1  # seconds between reconnect attempts (robust's own default is 2)
client.DEBUG = True
client.connect(False)
for seq in range(cfg["count"]):
    body = {"dev": cfg["client_id"], "boot": 1, "seq": seq, "t": time.ticks_ms(), "reading": 20.0}
    client.publish(cfg["topic"].encode(), json.dumps(body).encode(), qos=1)
    print("accepted 1 %d" % seq)
    time.sleep_ms(50)
client.disconnect()
print("done")
