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
from dmqtt.journal import open_journal  # noqa: E402
from dmqtt.robust import Supervisor  # noqa: E402

client = MQTTClient(cfg["client_id"], open_journal(), version=5)
client.open()
# The supervisor keeps the connection through the bridge up, and its acknowledgements read, between readings.
link = Supervisor(client, lambda: LinkTransport(uart_id=cfg["uart"], baud=cfg["baud"]))  # the bridge's broker
link.on_error = lambda exc: print("no bridge or broker (%s): is host-bridge run serving this port?" % exc)

seq = client.mark
start = due = time.ticks_ms()
while seq < cfg["count"]:
    link.publish(topic, json.dumps({"seq": seq}).encode(), qos=1, mark=seq + 1)
    seq += 1
    due = time.ticks_add(due, cfg["interval_ms"])
    link.serve_until(due)
left = link.drain(30000)
print("done", seq, "in", time.ticks_diff(time.ticks_ms(), start), "ms;", left, "unacknowledged")
client.disconnect()
