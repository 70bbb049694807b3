# A sensor loop on the blocking client: a reading every interval_ms at QoS 2, on flash when publish() returns.
# After a reset or a power cut it goes on from the last reading it accepted (the mark journaled with each
# message), so every reading reaches the broker exactly once. Settings: example.json (examples/README.md).
import json
import time

from dmqtt.client import Backoff, MQTTClient
from dmqtt.errors import MQTTError, QueueFull
from dmqtt.journal import open_journal
from dmqtt.transport import TCPTransport

with open("example.json") as f:
    cfg = json.load(f)
host, port = cfg["broker"].rsplit(":", 1)
topic = "sensors/%s/reading" % cfg["client_id"]
client = MQTTClient(cfg["client_id"], open_journal(), version=5)
client.open()  # flows a reset interrupted resume
backoff = Backoff()


def serve(ms):
    """Keep the connection up (reconnecting with backoff) and its acknowledgements read, for about ms."""
    if not client.connected:
        try:
            client.connect(TCPTransport(host, int(port)))
            backoff.reset()
        except (OSError, MQTTError) as exc:
            print("broker unreachable (%s): check example.json's broker" % exc)
            time.sleep_ms(min(ms, backoff.next_ms()))
            return
    try:
        client.poll(ms)
    except (OSError, MQTTError):
        client.close()


seq = client.mark  # readings accepted before the last reset
while seq < cfg["count"]:
    reading = json.dumps({"seq": seq, "reading": 20 + seq % 8 / 4}).encode()
    try:
        client.publish(topic, reading, qos=2, mark=seq + 1, timeout_ms=1000)
        seq += 1
    except QueueFull:
        pass  # every slot waits for the broker: serve the connection, then try again
    serve(cfg["interval_ms"])
while client.outstanding():
    serve(100)
print("done", seq)
client.disconnect()
