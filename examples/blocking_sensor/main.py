# A sensor loop on the blocking client: a reading every interval_ms at QoS 2, on flash when publish() returns.
# The supervisor (dmqtt.robust) keeps the connection up and its acknowledgements read between readings, so the
# loop keeps its pace through broker outages. After a reset or a power cut it goes on from the last reading it
# accepted (the mark journaled with each message), so every reading reaches the broker exactly once.
# Settings: example.json (examples/README.md).
import json
import time

from dmqtt.client import MQTTClient
from dmqtt.journal import open_journal
from dmqtt.robust import Supervisor
from dmqtt.transport import TCPTransport

with open("example.json") as f:
    cfg = json.load(f)
host, port = cfg["broker"].rsplit(":", 1)
topic = "sensors/%s/reading" % cfg["client_id"]
client = MQTTClient(cfg["client_id"], open_journal(), version=5)
client.open()  # flows a reset interrupted resume
link = Supervisor(client, lambda: TCPTransport(host, int(port)))
link.on_error = lambda exc: print("broker unreachable (%s): check example.json's broker" % exc)

seq = client.mark  # readings accepted before the last reset
start = due = time.ticks_ms()
while seq < cfg["count"]:
    reading = json.dumps({"seq": seq, "reading": 20 + seq % 8 / 4}).encode()
    link.publish(topic, reading, qos=2, mark=seq + 1)  # waits (serving) while every slot is in flight
    seq += 1
    due = time.ticks_add(due, cfg["interval_ms"])
    link.serve_until(due)  # the next reading on schedule, whatever arrives meanwhile
left = link.drain(30000)
print("done", seq, "in", time.ticks_diff(time.ticks_ms(), start), "ms;", left, "unacknowledged")
client.disconnect()
