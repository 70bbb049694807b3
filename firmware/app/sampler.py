# The sampling wake of a board that sleeps between readings and sends them in batches (config.json "sleep" with
# readings_per_send above 1, docs/low-power.md): boot.py runs it at a wake from deep sleep that the plan marks as one.
# It takes the reading, journals it (the durability point, as publish() is: the message goes at the next sending
# wake, through any reset or power cut) and sleeps again, the radio off. It loads what journaling a record needs
# (the journal, the session's state), not the client, the codec, TLS or the network.
#
# What it needs to know lives in RTC memory, which keeps its bytes through deep sleep: the plan, written at the
# end of every wake (after() at one that ran the application), says what a reading is, the boot whose readings
# these are (a sampling wake does not count a boot: its reading's seq follows the last one) and where the queue
# stands. Its first byte says what the next wake is, decided before the sleep: SAMPLE, or SEND (main.py runs the
# application), so that a sending wake loads none of this module (what a module interns, a board keeps for
# good). RTC memory is lost with the power: a power-on runs the application.

import json
import sys
import time

import machine

PLAN = 1  # the plan's format (the JSON object's "v")
SAMPLE = b"S"  # the next wake journals its reading
SEND = b"T"  # the next wake runs the application, which sends
# RTC memory holds the plan first, then the application's own bytes (app_memory()): a kind byte (SAMPLE, SEND, or
# NONE), the plan's length (u16, big-endian), the plan (JSON), and what follows is the application's.
NONE = b"-"
RTC_BYTES = 2048  # an ESP32's RTC memory for MicroPython (machine.RTC().memory())


def keep(found, now):
    """The plan into RTC memory, headed by what the next wake (found["every"] ms from now) is: a sending one at
    every readings_per_send-th wake, once queue_limit readings wait (its own included), or once the oldest waiting is
    max_reading_age_s old."""
    due = (
        found["left"] <= 0  # the run's last reading is taken: the next wake sends what is left and ends the run
        or found["taken"] + 1 >= found["per_send"]
        or found["queued"] + 1 >= found["limit"]
        or (found["max_age"] and found["queued"] and now + found["every"] // 1000 - found["oldest"] >= found["max_age"])
    )
    write(SEND if due else SAMPLE, json.dumps(found).encode())


def write(kind, plan=b""):
    """The plan's part of RTC memory, the application's part kept. A plan that leaves the application's part no
    room is not kept: the next wake sends (and makes a new one)."""
    rtc = machine.RTC()
    app = app_memory()
    if 3 + len(plan) + len(app) > RTC_BYTES:
        kind, plan = SEND, b""
    rtc.memory(kind + bytes((len(plan) >> 8, len(plan) & 0xFF)) + plan + app)


def plan_size(memory):
    return 3 + ((memory[1] << 8) | memory[2]) if len(memory) >= 3 else len(memory)


def app_memory(data=None):
    """The application's part of RTC memory, after the plan: what it holds, or, given `data`, that written and
    the plan kept (ValueError when the two pass RTC memory's 2,048 bytes). Lost at a power cut, as the plan is."""
    rtc = machine.RTC()
    memory = rtc.memory()
    if data is None:
        return memory[plan_size(memory) :]
    rtc.memory((memory[: plan_size(memory)] or NONE + b"\0\0") + data)


def run():
    """A sampling wake: it ends in deep sleep and does not return. Returns when the application must run
    instead (no plan it can read, every reading of the run taken, the journal's slots full), with what it loaded
    that the application does not use dropped: its code would take the application's heap."""
    _sample()
    for name in ("wake_plan", "dmqtt.ring_tail"):
        sys.modules.pop(name, None)


def _sample():
    began = time.ticks_ms()
    try:
        memory = machine.RTC().memory()
        found = json.loads(memory[3 : plan_size(memory)])
    except ValueError:
        return
    if not isinstance(found, dict) or found.get("v") != PLAN:
        return
    now = time.time()
    from dboard import console

    boot, seq = found["boot"], found["seq"]
    hint = found.get("ring")
    if hint is not None:
        # The least code that keeps the promise: one record appended at the head the hint names, once the flash
        # says what the hint says (dmqtt/ring_tail.py); the whole journal is opened only when it does not.
        from esp32 import Partition

        from dmqtt import ring_tail

        payload = console.payload(found["dev"], boot, seq, found["size"])
        part = Partition.find(Partition.TYPE_DATA, label="mqttlog")
        try:
            topic = found["topic"].encode()
            left = ring_tail.append(part[0], hint, found["slots"], topic, payload, found["qos"]) if part else 0
        except OSError:
            left = 0  # the whole journal's open says what the flash did, as a journal error
        if left < 0:
            print("sampler: the journal is not where the last wake left it: opening it whole")
        if left <= 0:
            hint = None
    if hint is None:
        import wake_plan

        left = wake_plan.accept(found, boot, seq, console)
        if left is None:
            return
    print(console.ACCEPTED % (boot, seq))  # the witness, as the application prints it
    found["seq"] = seq + 1
    found["taken"] += 1
    found["left"] -= 1
    if not found["queued"]:
        found["oldest"] = now
    found["queued"] += 1
    keep(found, now)
    ms = max(1, found["every"] - time.ticks_diff(time.ticks_ms(), began))
    print(console.SLEEP % (ms, left))
    machine.deepsleep(ms)
