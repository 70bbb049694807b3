# Figure 14's baseline (d), a forgetful batch as a careful developer writes it (tools/bench_energy.py):
# umqtt.simple, each wake's AHT20 reading kept in RTC memory, and every PER_SEND-th wake the batch sent in one QoS 1
# message (ONE_MESSAGE; else one message a reading, the variant the figure keeps as a row). A failed connection
# keeps the readings for the next sending wake and sleeps, as (c) does. A power cut (a battery swapped, a
# brownout) loses what RTC memory held; the figure counts those readings.
# settings.py, written by the bench: CLIENT_ID, HOST, PORT, TOPIC, SIZE, PER_SEND, WAKES, PERIOD_MS, ONE_MESSAGE.
# RTC memory: one byte, the wakes since the power-on (the run ends at the WAKES-th), then 6 bytes a reading held:
# its identity (4, for the bench's count) and the temperature in hundredths of a degree (2). Each reading goes out
# as SIZE bytes (its identity in hex, the temperature, padding), as (c)'s payloads are SIZE bytes.
# Console: "taken ID sample|send" at each wake once the reading is in RTC memory; a sending wake's phases as a JSON
# line; {"forgetful": wakes} at the end.
import os

import aht20
import machine
from settings import ONE_MESSAGE, PER_SEND, PERIOD_MS, WAKES


def run():
    rtc = machine.RTC()
    held = rtc.memory() or b"\x00"
    reading = os.urandom(4)
    centi = int(aht20.temperature() * 100) & 0xFFFF
    held = bytes((held[0] + 1,)) + held[1:] + reading + bytes((centi >> 8, centi & 0xFF))
    rtc.memory(held)
    wakes = held[0]
    send = len(held) - 1 >= 6 * PER_SEND or wakes >= WAKES
    print("taken", reading.hex(), "send" if send else "sample")
    if send and sent(held):
        rtc.memory(bytes((wakes,)))
    if wakes >= WAKES:
        print('{"forgetful": %d}' % wakes)
    else:
        machine.deepsleep(PERIOD_MS)


def sent(held):
    """The readings held, sent; False (they stay held) when the broker cannot be reached."""
    import json

    from phase_clock import now, since
    from settings import CLIENT_ID, HOST, PORT, SIZE, TOPIC

    out = {"kind": "forgetful", "sent": (len(held) - 1) // 6}
    t = now()
    from umqtt_simple import MQTTClient

    out["import_us"] = since(t)
    payloads = []
    for at in range(1, len(held), 6):
        body = b"%s %d " % (held[at : at + 4].hex().encode(), (held[at + 4] << 8) | held[at + 5])
        payloads.append(body + b"x" * (SIZE - len(body)))
    try:
        t = now()
        client = MQTTClient(CLIENT_ID, HOST, PORT, keepalive=60)
        client.connect()
        client.sock.setsockopt(6, 1, 1)  # TCP_NODELAY, as for (a) (tools/bench_apps/energy/main.py says why)
        out["connect_us"] = since(t)
        t = now()
        if ONE_MESSAGE:
            client.publish(TOPIC, b"".join(payloads), qos=1)
        else:
            for payload in payloads:
                client.publish(TOPIC, payload, qos=1)
        out["publish_us"] = since(t)
        t = now()
        client.disconnect()
        out["disconnect_us"] = since(t)
    except OSError as exc:
        print("broker unreachable (%s): the readings stay in RTC memory" % exc)
        return False
    print(json.dumps(out))
    return True
