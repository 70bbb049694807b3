# Figure 14's baseline (d), a forgetful batch (tools/bench_energy.py): umqtt.simple, with each wake's reading kept
# in RTC memory and the batch sent every PER_SEND-th wake, as a battery board does without a journal. A power cut
# (a battery swapped, a brownout) loses what RTC memory held; the figure counts those readings.
# settings.py, written by the bench: CLIENT_ID, HOST, PORT, TOPIC, SIZE, PER_SEND, WAKES, PERIOD_MS.
# RTC memory: one byte, the wakes since the power-on (the run ends at the WAKES-th), then 4 bytes a reading held (its
# identity, for the bench's count; sent padded to SIZE bytes).
# Console: "taken ID sample|send" at each wake once the reading is in RTC memory; a sending wake's phases as a JSON
# line; {"forgetful": wakes} at the end.
import os

import machine
from settings import PER_SEND, PERIOD_MS, WAKES

rtc = machine.RTC()
held = rtc.memory() or b"\x00"
reading = os.urandom(4)
held = bytes((held[0] + 1,)) + held[1:] + reading
rtc.memory(held)
wakes = held[0]
send = len(held) - 1 >= 4 * PER_SEND or wakes >= WAKES
print("taken", reading.hex(), "send" if send else "sample")
if send:
    import json

    from phase_clock import now, since
    from settings import CLIENT_ID, HOST, PORT, SIZE, TOPIC

    out = {"kind": "forgetful", "sent": (len(held) - 1) // 4}
    t = now()
    from umqtt_simple import MQTTClient

    out["import_us"] = since(t)
    t = now()
    client = MQTTClient(CLIENT_ID, HOST, PORT, keepalive=60)
    client.connect()
    client.sock.setsockopt(6, 1, 1)  # TCP_NODELAY, as for (a) (tools/bench_apps/energy/main.py says why)
    out["connect_us"] = since(t)
    t = now()
    for at in range(1, len(held), 4):
        payload = held[at : at + 4].hex().encode()
        client.publish(TOPIC, payload + b"x" * (SIZE - len(payload)), qos=1)
    out["publish_us"] = since(t)
    t = now()
    client.disconnect()
    out["disconnect_us"] = since(t)
    rtc.memory(bytes((wakes,)))
    print(json.dumps(out))
if wakes >= WAKES:
    print('{"forgetful": %d}' % wakes)
else:
    machine.deepsleep(PERIOD_MS)
