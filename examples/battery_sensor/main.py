# A battery sensor: one reading a wake, journaled at once (on flash it is as safe as sent) with the radio off; only
# every readings_per_send-th wake joins WiFi and sends the batch in one connection, and settle() reads every
# acknowledgement before the board deep-sleeps again. What a sending wake cannot deliver (no WiFi, no broker)
# waits in the journal for the next one; nothing the broker acknowledged goes twice. A power-on sends at once.
# Settings: example.json (examples/README.md), with every_s, readings_per_send, awake_s and wifi. docs/low-power.md.
import json
import time

import machine

from dmqtt.client import MQTTClient
from dmqtt.errors import MQTTError
from dmqtt.journal import open_journal
from dmqtt.transport import TCPTransport

began = time.ticks_ms()
with open("example.json") as f:
    cfg = json.load(f)
host, port = cfg["broker"].rsplit(":", 1)
awake_ms = cfg.get("awake_s", 10) * 1000
client = MQTTClient(cfg["client_id"], open_journal(), version=5, max_messages=64)
client.open()
seq = client.mark  # readings taken so far: the mark journaled with each one outlives sleeps and power cuts
if seq < cfg["count"]:
    reading = json.dumps({"seq": seq, "reading": 20 + seq % 8 / 4}).encode()
    client.publish("sensors/%s/reading" % cfg["client_id"], reading, qos=1, mark=seq + 1)  # on flash now
    seq += 1


def joined():
    """Join the network (dmqtt.wifi, with a static address and the access point's BSSID when given: the join
    then takes a fraction of the time); False when it is not there within the awake time."""
    from dmqtt import wifi

    net = cfg["wifi"]
    bssid = bytes.fromhex(net["bssid"].replace(":", "")) if "bssid" in net else None
    wifi.start(net["ssid"], net.get("password", ""), net.get("ip"), bssid)
    while not wifi.check():
        if time.ticks_diff(time.ticks_ms(), began) > awake_ms:
            return False
        time.sleep_ms(20)
    return True


woke = machine.reset_cause() == machine.DEEPSLEEP_RESET
if not woke or seq % cfg.get("readings_per_send", 10) == 0 or seq >= cfg["count"]:
    left = client.outstanding()
    try:
        if "wifi" not in cfg or joined():
            client.connect(TCPTransport(host, int(port)))
            left = client.settle(max(1, awake_ms - time.ticks_diff(time.ticks_ms(), began)))
    except (OSError, MQTTError) as exc:
        print("broker unreachable (%s)" % exc)
    print("sent: %d readings left for the next sending wake" % left)
if seq >= cfg["count"] and not client.outstanding():
    print("done", seq)
else:
    machine.deepsleep(max(1, cfg.get("every_s", 60) * 1000 - time.ticks_diff(time.ticks_ms(), began)))
