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
import time

import machine

PLAN = 1  # the plan's format (the JSON object's "v")
SAMPLE = b"S"  # the next wake journals its reading
SEND = b"T"  # the next wake runs the application, which sends


def keep(found, now):
    """The plan into RTC memory, headed by what the next wake (found["every"] ms from now) is: a sending one at
    every readings_per_send-th wake, once queue_limit readings wait (its own included), or once the oldest waiting is
    max_reading_age_s old."""
    due = (
        found["taken"] + 1 >= found["per_send"]
        or found["queued"] + 1 >= found["limit"]
        or (found["max_age"] and found["queued"] and now + found["every"] // 1000 - found["oldest"] >= found["max_age"])
    )
    machine.RTC().memory((SEND if due else SAMPLE) + json.dumps(found).encode())


def after(board, seq, now):
    """At the end of a wake that ran the application (duty.py): the plan for the wakes that follow, seq the next
    reading's. Readings left waiting are counted from this wake (their own times are in their payloads)."""
    cfg = board.cfg
    sleep = cfg["sleep"]
    queued = board.client.outstanding()
    found = {
        "v": PLAN,
        "dev": cfg["client_id"],
        "topic": cfg["topic"],
        "qos": cfg["qos"],
        "version": cfg["version"],
        "slots": sleep["queue_limit"],
        "count": cfg["count"],
        "size": cfg["payload_bytes"],
        "every": sleep["every_s"] * 1000,
        "per_send": sleep["readings_per_send"],
        "limit": sleep["queue_limit"],
        "max_age": sleep["max_reading_age_s"],
        "confirm": cfg["confirm"] and cfg["confirm"]["hold"],
        "boot": board.boot,
        "seq": seq,
        "taken": 0,
        "queued": queued,
        "oldest": now if queued else 0,
    }
    keep(found, now)


def run():
    """A sampling wake: it ends in deep sleep and does not return. Returns when the application must run
    instead: no plan it can read, every reading of the run taken, or the journal's slots full."""
    began = time.ticks_ms()
    try:
        found = json.loads(machine.RTC().memory()[1:])
    except ValueError:
        return
    if not isinstance(found, dict) or found.get("v") != PLAN:
        return
    now = time.time()
    from dboard import console
    from dmqtt.errors import QueueFull
    from dmqtt.journal import open_journal

    # The client's session, its slots and Receive Maximum (dmqtt.client's 16) as the application makes them.
    if found["confirm"] is None:
        from dmqtt.session import Session

        session = Session(open_journal(), found["version"], 0, found["slots"], 16)
    else:
        # The confirmation's journal records (the epochs, the confirmed point) kept as the client keeps them. Its
        # module holds the confirming client too, which brings the client's module and the codec: a sampling wake
        # with confirmation loads them (a module of its own for the session cost the boards that stay awake
        # their margin of heap at boot: tests/integration/test_boot_heap.py).
        from dmqtt.confirm import ConfirmingSession

        session = ConfirmingSession(open_journal(), found["version"], 0, found["slots"], 16)
        session._current = found["boot"]  # the epoch of this boot's readings, journaled at its first
        session.hold = found["confirm"]
    for note in session.open():
        print(note)
    if session.mark >= found["count"]:
        return  # every reading of the run is taken: the application sends what is left and ends the run
    boot, seq = found["boot"], found["seq"]
    try:
        session.accept(found["topic"].encode(), console.payload(found["dev"], boot, seq, found["size"]),
                       found["qos"], False, session.mark + 1)  # fmt: skip
    except QueueFull:
        return  # the journal's slots are full: the application sends first
    print(console.ACCEPTED % (boot, seq))  # the witness, as the application prints it
    found["seq"] = seq + 1
    found["taken"] += 1
    if not found["queued"]:
        found["oldest"] = now
    found["queued"] += 1
    keep(found, now)
    ms = max(1, found["every"] - time.ticks_diff(time.ticks_ms(), began))
    print(console.SLEEP % (ms, session.outstanding()))
    machine.deepsleep(ms)
