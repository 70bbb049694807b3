# A battery sensor: one AHT20 reading a wake. A wake that does not send journals its reading at the hint the last
# wake left in RTC memory (dmqtt.wake: one record programmed, the journal not opened), with the radio off, and
# deep-sleeps: on flash, the reading is as safe as sent. Every readings_per_send-th wake joins WiFi and sends the
# batch in one connection, and settle() reads every acknowledgement before the board sleeps again. What a sending
# wake cannot deliver waits in the journal for the next one; nothing the broker acknowledged goes twice. A
# power-on sends at once. A network that refuses the board (a wrong password, no such network) ends the join at
# once and says why, and the sending wakes after it come ever further apart (twice as far each time, up to 64
# times) until one joins, or the board is reset (with a new example.json, say).
# Settings: example.json (examples/README.md), with every_s, readings_per_send, awake_s and wifi. docs/low-power.md.
# main.py calls run(): a module whose body only defines can be frozen into an image like the library.
import json
import time

import aht20
import machine

from dmqtt import wake

SLOTS = 64  # the journal's slots: the readings that may wait (the client's max_messages)


def run():
    began = time.ticks_ms()
    try:
        with open("example.json") as f:
            cfg = json.load(f)
    except OSError as exc:
        raise OSError("example.json: %s; put it beside main.py (examples/README.md)" % exc) from None
    topic = "sensors/%s/reading" % cfg["client_id"]
    every_ms = cfg.get("every_s", 60) * 1000
    kept = wake.memory()  # the example's part of RTC memory, lost with the power: a power-on sends
    wakes_left, refusals = kept if len(kept) == 2 else (1, 0)  # before the next sending wake; refused joins in a row
    if machine.reset_cause() == machine.DEEPSLEEP_RESET and wakes_left > 1:
        seq = wake.mark()  # readings journaled so far, from the hint
        if seq < cfg["count"] - 1:  # (the run's last reading is a sending wake's)
            message = reading(seq)
            try:
                if message is not None:
                    wake.journal(topic, message, 1, SLOTS)  # on flash now: a later sending wake sends it
                    print("reading %d on flash" % seq)
            except Exception as exc:  # QueueFull: every slot holds a reading that waits
                if type(exc).__name__ != "QueueFull":
                    raise
                print("reading %d refused: the journal's %d slots are full" % (seq, SLOTS))
                wakes_left = wakes_left if refusals else 0  # sends now, unless the network refused the last join
            if wakes_left:
                sleep(began, every_ms, wakes_left - 1, refusals)
    # A sending wake. The client opens the journal from where the hint says the last wake left it.
    from dmqtt.client import MQTTClient
    from dmqtt.errors import MQTTError
    from dmqtt.journal import open_journal
    from dmqtt.transport import TCPTransport

    awake_ms = cfg.get("awake_s", 10) * 1000
    client = MQTTClient(cfg["client_id"], open_journal(resume=wake.resume()), version=5, max_messages=SLOTS)
    seq = client.mark
    if seq < cfg["count"] and (message := reading(seq)) is not None:
        client.publish(topic, message, qos=1, mark=seq + 1)  # on flash now
        print("reading %d on flash" % seq)
        seq += 1
    joined, refused = True, 0  # (dmqtt.wifi: with a static address and the access point's BSSID when given, the
    if "wifi" in cfg:  # join takes a fraction of the time)
        from dmqtt import wifi

        net = cfg["wifi"]
        bssid = bytes.fromhex(net["bssid"].replace(":", "")) if "bssid" in net else None
        wifi.start(net["ssid"], net.get("password", ""), net.get("ip"), bssid)
        while not wifi.check():
            refused = wifi.refused()  # the network said no (201 no such network, 202 the password): at once
            if refused or time.ticks_diff(time.ticks_ms(), began) > awake_ms:
                print("wifi: not joined (status %d): check wifi.ssid and wifi.password in example.json" % refused)
                joined = False
                break
            time.sleep_ms(20)
    left = client.outstanding()
    if joined:
        refusals = 0
        try:
            host, port = cfg["broker"].rsplit(":", 1)
            client.connect(TCPTransport(host, int(port)))
            left = client.settle(max(1, awake_ms - time.ticks_diff(time.ticks_ms(), began)))
        except (OSError, MQTTError) as exc:
            print("broker unreachable (%s)" % exc)
    elif refused:
        refusals = min(refusals + 1, 6)
    print("sent: %d readings left for the next sending wake" % left)
    wake.keep(client)  # the hint for the wakes that journal without sending
    if seq >= cfg["count"] and not left:
        print("done", seq)
    else:
        sleep(began, every_ms, cfg.get("readings_per_send", 10) << refusals, refusals)


def reading(seq):
    # The message of reading `seq`, or None when the sensor fails (said: this wake takes no reading).
    try:
        return json.dumps({"seq": seq, "reading": aht20.temperature()}).encode()
    except OSError as exc:
        print("sensor: %s" % exc)
        return None


def sleep(began, every_ms, wakes_left, refusals):
    # Deep sleep until the next wake, keeping in the example's part of RTC memory (dmqtt.wake.memory) the wakes
    # left before the next sending one and how many joins in a row the network refused.
    wake.memory(bytes((min(wakes_left, 255), refusals)))
    machine.deepsleep(max(1, every_ms - time.ticks_diff(time.ticks_ms(), began)))
