# An asyncio sensor app: a sensor sampled every 10 ms, a reading published at QoS 2 every interval_ms, and
# commands received at QoS 2 on cmd/<client id>, in one event loop. The client connects, reconnects and reads
# acknowledgements in a task of its own, so nothing here blocks; with "wifi" in the settings it keeps the WiFi
# link up too, and says each outage. Settings: example.json (examples/README.md).
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
if "wifi" in cfg:  # join, and rejoin with backoff whenever the link drops
    from dmqtt import wifi

    wifi.start(cfg["wifi"]["ssid"], cfg["wifi"].get("password", ""))
# Flows a reset interrupted resume; with WiFi, no connection is tried while the link is down.
client = AsyncClient(me, open_journal(), version=5, wifi=wifi if "wifi" in cfg else None)
latest = 0.0


async def sensor():
    """Sample every 10 ms, and say when a sample comes later than ever (the event loop was held)."""
    global latest
    worst = 0
    due = time.ticks_ms()
    while True:
        due = time.ticks_add(due, 10)
        await asyncio.sleep_ms(max(0, time.ticks_diff(due, time.ticks_ms())))
        late = time.ticks_diff(time.ticks_ms(), due)
        if late > worst:
            worst = late
            print("late", worst)
        latest = 20 + time.ticks_diff(time.ticks_ms(), 0) % 1000 / 250  # stand-in for reading a sensor


async def commands():
    # A command is done when the loop comes back for the next one: after a power cut before that, it comes
    # again with dup set (docs/client.md, Receiving).
    async for _topic, payload, _qos, _retain, dup in client.messages():
        print("command", payload.decode(), "dup" if dup else "new")


async def outages():
    """The connection's events: down when it is lost (the broker, or the WiFi under it), up when it is back."""
    while True:
        await client.down.wait()
        client.down.clear()
        print("down:", client.last_error)
        client.up.clear()
        await client.up.wait()
        print("up")


async def main():
    asyncio.create_task(sensor())
    asyncio.create_task(commands())
    await client.connect(lambda: TCPTransport(host, int(port)))
    asyncio.create_task(outages())
    await client.subscribe("cmd/" + me, 2)
    print("listening on cmd/" + me)
    for seq in range(client.client.mark, cfg["count"]):  # from where the last reset stopped it
        reading = json.dumps({"seq": seq, "reading": latest}).encode()
        await client.publish("sensors/%s/reading" % me, reading, qos=2, mark=seq + 1)  # on flash when it returns
        await asyncio.sleep_ms(cfg["interval_ms"])
    await client.wait_idle()
    print("done", cfg["count"])
    await client.close()


asyncio.run(main())
