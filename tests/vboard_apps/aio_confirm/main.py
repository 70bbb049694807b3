# An asyncio board with end-to-end confirmation (tests/integration/test_aio_confirmation.py): publishes
# `count` telemetry messages at QoS `qos`, one every `interval_ms`, through dmqtt.aio with confirm_topic, then
# waits until the recorder has confirmed every one (or `wait_s` passes) and prints how many stay unconfirmed.
import asyncio
import json
import time

from dmqtt.aio import AsyncClient
from dmqtt.journal import open_journal
from dmqtt.transport import TCPTransport

with open("example.json") as f:
    cfg = json.load(f)
host, port = cfg["broker"].rsplit(":", 1)
me = cfg["client_id"]
client = AsyncClient(
    me, open_journal(), version=cfg["version"], confirm_topic="confirm/" + me, epoch=1, timeout_s=cfg["timeout_s"]
)


async def main():
    await client.connect(lambda: TCPTransport(host, int(port)))
    for seq in range(cfg["count"]):
        body = json.dumps({"dev": me, "boot": 1, "seq": seq, "t": seq, "reading": 20.5})
        await client.publish("sensors/%s/telemetry" % me, body, qos=cfg["qos"])
        print("accepted", seq)
        await asyncio.sleep_ms(cfg["interval_ms"])
    end = time.ticks_add(time.ticks_ms(), cfg["wait_s"] * 1000)
    while client.unconfirmed() and time.ticks_diff(end, time.ticks_ms()) > 0:
        await asyncio.sleep_ms(100)
    print("unconfirmed", client.unconfirmed(), "resent", client.client.session.resent)
    await client.close()


asyncio.run(main())
