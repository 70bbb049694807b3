# The energy figure's workload (tools/bench_energy.py): one wake of a board that sends, its phases timed on the
# virtual board. /flash/config.json: {"kind", "client_id", "host", "port", "topic", "size", "readings"}.
#   "umqtt"  umqtt.simple's round: import it, connect (clean session), publish one reading at QoS 1 (it waits for
#            the PUBACK), disconnect
#   "prep"   this client journals readings - 1 readings with no connection and ends (the sampling wakes before a
#            sending wake; not timed)
#   "dmqtt"  this client's sending wake, as examples/battery_sensor's: import it, open the journal from the hint
#            the last wake left (dmqtt.wake.resume(); what earlier wakes journaled is replayed), journal this wake's
#            reading, connect (the session the broker kept), settle() (the batch sent, every acknowledgement read,
#            DISCONNECT), and leave the next wakes their hint (dmqtt.wake.keep(), counted in the journal's phase)
# One JSON line: each phase's microseconds, and what went out. No WiFi here: the join is the model's.
import json

from phase_clock import now, since

cfg = json.load(open("/flash/config.json"))
kind = cfg["kind"]
payload = b"x" * cfg["size"]
topic = cfg["topic"].encode()
out = {"kind": kind}
t = now()
if kind == "umqtt":
    from umqtt_simple import MQTTClient

    out["import_us"] = since(t)
    t = now()
    client = MQTTClient(cfg["client_id"], cfg["host"], cfg["port"], keepalive=60)
    client.connect()
    # TCP_NODELAY, as figure 1 gives it: without it Nagle's algorithm holds the PUBLISH's second write for the
    # broker's delayed acknowledgement (40 ms here), time this model would scale as if it were the interpreter's.
    client.sock.setsockopt(6, 1, 1)
    out["connect_us"] = since(t)
    t = now()
    client.publish(topic, payload, qos=1)
    out["publish_us"] = since(t)
    t = now()
    client.disconnect()
    out["disconnect_us"] = since(t)
    out["sent"] = 1
else:
    from dmqtt import wake
    from dmqtt.client import MQTTClient
    from dmqtt.journal import open_journal
    from dmqtt.transport import TCPTransport

    out["import_us"] = since(t)
    t = now()
    client = MQTTClient(cfg["client_id"], open_journal(resume=wake.resume()), version=5, max_messages=64)
    client.open()
    if kind == "prep":
        for _ in range(cfg["readings"] - 1):
            client.publish(topic, payload, 1)
        out["sent"] = 0
    else:
        client.publish(topic, payload, 1)
        out["journal_us"] = since(t)
        waiting = client.outstanding()
        t = now()
        client.connect(TCPTransport(cfg["host"], cfg["port"]))
        out["connect_us"] = since(t)
        t = now()
        left = client.settle(10000)
        out["publish_us"] = since(t)
        t = now()
        wake.keep(client)
        out["journal_us"] += since(t)
        out["sent"] = waiting - left
print(json.dumps(out))
