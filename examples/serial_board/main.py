# A board on a serial line: the blocking client over the serial link (dlink) to a host that runs
# `host-bridge run --port PORT=client-id --broker HOST:PORT`, which relays it to the broker. Readings at QoS 1,
# resumed after a reset from the journaled mark. Settings: example.json (examples/README.md).
import gc
import json
import time

from dlink.transport import LinkTransport

with open("example.json") as f:
    cfg = json.load(f)
topic = "sensors/%s/reading" % cfg["client_id"]
# The link's buffers first, while the heap is still in one piece (a stock ESP32 has little to spare), then the
# client's code.
LinkTransport.prepare(cfg["uart"], cfg["baud"])
gc.collect()
from dmqtt.client import MQTTClient  # noqa: E402
from dmqtt.errors import MQTTError, QueueFull  # noqa: E402
from dmqtt.journal import open_journal  # noqa: E402

client = MQTTClient(cfg["client_id"], open_journal(), version=5)
client.open()


def serve(ms):
    """Keep the connection through the bridge up, and its acknowledgements read, for about ms."""
    if not client.connected:
        try:
            client.connect(LinkTransport(uart_id=cfg["uart"], baud=cfg["baud"]))  # the bridge's broker
        except (OSError, MQTTError) as exc:
            print("no bridge or broker (%s): is host-bridge run serving this port?" % exc)
            time.sleep_ms(1000)
            return
    try:
        client.poll(ms)
    except (OSError, MQTTError):
        client.close()


seq = client.mark
while seq < cfg["count"]:
    try:
        client.publish(topic, json.dumps({"seq": seq}).encode(), qos=1, mark=seq + 1, timeout_ms=1000)
        seq += 1
    except QueueFull:
        pass
    serve(cfg["interval_ms"])
while client.outstanding():
    serve(100)
print("done", seq)
client.disconnect()
