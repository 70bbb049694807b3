# The benchmark workload on a virtual board: one MQTT client publishes to a broker for a while and reports its
# rate and its heap. /flash/config.json says which client and how:
#   {"client": "dmqtt" | "dmqtt-ram" | "dmqtt-aio" | "umqtt", "host", "port", "qos", "size",
#    "window" (dmqtt: "auto" or N),
#    "seconds", "max", "nodelay" (umqtt: set TCP_NODELAY, which umqtt.simple does not), "version" (dmqtt: 4 or 5)}
# "dmqtt" journals on the emulated flash partition (the emulator's Python flash costs time a real chip's does
# not); "dmqtt-ram" journals on a RAM partition with the same block interface, to take that cost out;
# "dmqtt-aio" is the asyncio face (dmqtt.aio) on the emulated flash, each publish awaited in one task.
# umqtt.simple (micropython-lib, fetched from PyPI at bench time, compiled to .mpy like the firmware) is
# stop-and-wait: each QoS 1 publish waits for its PUBACK; it has no QoS 2 and no journal.
import gc
import json
import time

cfg = json.load(open("/flash/config.json"))
payload = b"x" * cfg["size"]
topic = b"bench/t"
qos = cfg["qos"]
limit_ms = int(cfg["seconds"] * 1000)
# The RAM partition first, while the heap is still in one piece: 64 KiB in one block (the bench adds
# RAM_PARTITION_HEAP for it). Made after the client's modules, it may find no block that large.
ram_partition = None
if cfg["client"] == "dmqtt-ram":
    from ram_partition import RamPartition

    ram_partition = RamPartition(16)


def run_umqtt():
    from umqtt_simple import MQTTClient

    gc.collect()
    base = gc.mem_alloc()
    client = MQTTClient("bench-u", cfg["host"], cfg["port"])
    client.connect()
    if cfg["nodelay"]:
        client.sock.setsockopt(6, 1, 1)  # IPPROTO_TCP, TCP_NODELAY
    start = time.ticks_ms()
    n = 0
    while n < cfg["max"] and time.ticks_diff(time.ticks_ms(), start) < limit_ms:
        client.publish(topic, payload, qos=qos)  # QoS 1: returns after its PUBACK
        n += 1
    ms = time.ticks_diff(time.ticks_ms(), start)
    gc.collect()
    heap = gc.mem_alloc() - base
    client.disconnect()
    return n, ms, heap, 1


def run_dmqtt():
    from dmqtt.client import MQTTClient
    from dmqtt.transport import TCPTransport

    record = cfg["size"] + 64
    if ram_partition is not None:
        from dmqtt.journal_ring import RingJournal

        part = ram_partition
        gc.collect()
        base = gc.mem_alloc()  # the RAM partition is the stand-in for flash, not the client's heap
        journal = RingJournal(part, record)
    else:
        from dmqtt.journal import open_journal

        gc.collect()
        base = gc.mem_alloc()
        journal = open_journal(record_max=record)
    client = MQTTClient("bench-d", journal, version=cfg["version"], window=cfg["window"], max_packet=record)
    client.open()
    client.connect(TCPTransport(cfg["host"], cfg["port"]))
    start = time.ticks_ms()
    n = 0
    while n < cfg["max"] and time.ticks_diff(time.ticks_ms(), start) < limit_ms:
        client.publish(topic, payload, qos=qos, timeout_ms=60000)
        n += 1
    client.wait_idle(120000)  # the rate counts only completed flows
    ms = time.ticks_diff(time.ticks_ms(), start)
    gc.collect()
    heap = gc.mem_alloc() - base
    window = client.window
    client.disconnect()
    return n, ms, heap, window


def run_aio():
    import asyncio

    from dmqtt.aio import AsyncClient
    from dmqtt.journal import open_journal
    from dmqtt.transport import TCPTransport

    record = cfg["size"] + 64
    gc.collect()
    base = gc.mem_alloc()
    client = AsyncClient(
        "bench-a", open_journal(record_max=record), version=cfg["version"], window=cfg["window"], max_packet=record
    )

    async def run():
        await client.connect(lambda: TCPTransport(cfg["host"], cfg["port"]))
        start = time.ticks_ms()
        n = 0
        while n < cfg["max"] and time.ticks_diff(time.ticks_ms(), start) < limit_ms:
            await client.publish(topic, payload, qos)
            n += 1
        await client.wait_idle()  # the rate counts only completed flows
        ms = time.ticks_diff(time.ticks_ms(), start)
        gc.collect()
        heap = gc.mem_alloc() - base
        window = client.client.window
        # Then idle, connected, nothing in flight: how often the connection's tasks wake (each wake is CPU a
        # board on battery pays for).
        wakes = client.wakes
        await asyncio.sleep_ms(limit_ms)
        idle["wakes_per_s"] = (client.wakes - wakes) * 1000 / limit_ms
        await client.close()
        return n, ms, heap, window

    return asyncio.run(run())


idle = {}  # the asyncio face's idle wakes
runs = {"umqtt": run_umqtt, "dmqtt-aio": run_aio}
n, ms, heap, window = runs.get(cfg["client"], run_dmqtt)()
idle.update({"total": n, "ms": ms, "heap": heap, "window": window})
print(json.dumps(idle))
