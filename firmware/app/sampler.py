# The sampling wake of a board that sleeps between readings and sends them in batches (config.json "sleep" with
# readings_per_send above 1, docs/low-power.md): boot.py runs it at a wake from deep sleep that the plan marks as one.
# It takes the reading (the sensor hook's: sensor_hook.read()), journals it through the library's cheap wake
# (dmqtt.wake.journal(): the durability point, as publish() is; the message goes at the next sending wake, through
# any reset or power cut) and sleeps again, the radio off. It loads what journaling a record needs, not the
# client, the codec, TLS or the network.
#
# What it needs to know lives in RTC memory, which keeps its bytes through deep sleep, in the application's part
# of it (dmqtt.wake.memory(): the library's hint comes first): the plan, written at the end of every wake (after()
# at one that ran the application), says what a reading is, the boot whose readings these are (a sampling wake
# does not count a boot: its reading's seq follows the last one) and where the queue stands. Its first byte says
# what the next wake is, decided before the sleep: SAMPLE, or SEND (main.py runs the application), so that a
# sending wake runs the application without this module and loads it only at its end, past the heap's low point,
# when wake_plan writes the next plan with it (what a module interns, a board keeps for good). RTC memory is lost with
# the power: a power-on runs the application.

import sys

# The built-ins by their u-names: MicroPython looks for `struct`, `time` and `machine` on the filesystem before it
# takes the built-in (they are extensible modules), a search a u-name skips (dmqtt/wake.py says what it costs).
import umachine as machine
import ustruct as struct
import utime as time

from dmqtt import wake

if False:  # type checkers only: MicroPython has no typing module
    from typing import Any

PLAN = 4  # the plan's format (its first byte)
SAMPLE = b"S"  # the next wake journals its reading
SEND = b"T"  # the next wake runs the application, which sends
# The application's part of RTC memory: a kind byte (SAMPLE, SEND, or NONE), the plan's length (u16, big-endian),
# the plan, and what follows is the sensor hook's own (app_memory()).
NONE = b"-"
# The plan (docs/low-power.md, "RTC memory: the hint and the plan"): its format, these numbers big-endian, then
# the client id, the topic, the sensor hook's "module.function" and a node's link to its gateway (link()), each a
# length byte and UTF-8. Binary, not
# JSON: it is written at the end of a sending wake, on a heap its imports and connection left in pieces, and a
# JSON plan took a handful of copies of 400 bytes there.
_LAYOUT = ">BBBHiHIHHIBIIHHIB"
_NUMBERS = ("qos", "version", "slots", "left", "size", "every", "per_send", "limit", "max_age", "confirm", "boot",
            "seq", "taken", "queued", "oldest", "refused")  # fmt: skip
_TEXTS = ("dev", "topic", "sensor", "link")
# "confirm" on flash: 0 without end-to-end confirmation, else 1 + its hold (in the plan: None, False or True).


def keep(found, now):
    """The plan into RTC memory, headed by what the next wake (found["every"] ms from now) is: a sending one at
    every readings_per_send-th wake, once queue_limit readings wait (its own included), or once the oldest waiting is
    max_reading_age_s old. After joins the network refused (found["refused"] in a row), at every
    readings_per_send << refused-th wake only: a full queue then refuses the readings (said) rather than have every
    wake try a join that cannot work."""
    refused = found["refused"]  # (after joins the network refused: sending wakes further apart, nothing else)
    due = (
        found["left"] <= 0
        if found["link"]
        else (
            found["left"] <= 0  # the run's last reading is taken: the next wake sends what is left and ends the run
            or found["taken"] + 1 >= found["per_send"] << refused
            or not refused
            and (
                found["queued"] + 1 >= found["limit"]
                or (
                    found["max_age"]
                    and found["queued"]
                    and now + found["every"] // 1000 - found["oldest"] >= found["max_age"]
                )
            )
        )
    )  # (a node sends at each wake, here: the application runs only to end the run)
    numbers = [found[key] for key in _NUMBERS]
    numbers[_NUMBERS.index("confirm")] = 0 if found["confirm"] is None else 1 + found["confirm"]
    plan = struct.pack(_LAYOUT, PLAN, *numbers)
    for key in _TEXTS:
        text = (found[key] or "").encode()
        plan += bytes((len(text),)) + text
    write(SEND if due else SAMPLE, plan)


def write(kind, plan=b""):
    """The plan's part of RTC memory, the hook's kept. A plan that leaves the rest no room is not kept: the next
    wake sends (and makes a new one)."""
    hook = app_memory()
    try:
        wake.memory(kind + bytes((len(plan) >> 8, len(plan) & 0xFF)) + plan + hook)
    except ValueError:
        wake.memory(SEND + b"\0\0" + hook)


def plan_size(memory):
    return 3 + ((memory[1] << 8) | memory[2]) if len(memory) >= 3 else len(memory)


def plan():
    """The plan in RTC memory (a dict), or None: none, or one of another format."""
    memory = wake.memory()
    end = plan_size(memory)
    at = 3 + struct.calcsize(_LAYOUT)
    if end < at or end > len(memory) or memory[3] != PLAN:
        return None
    found = dict(zip(_NUMBERS, struct.unpack_from(_LAYOUT, memory, 3)[1:]))
    found["confirm"] = None if not found["confirm"] else found["confirm"] == 2
    for key in _TEXTS:
        if at >= end:
            return None  # (cut short: RTC memory another writer spoiled)
        n = memory[at]
        found[key] = memory[at + 1 : at + 1 + n].decode()
        at += 1 + n
    found["sensor"] = found["sensor"] or None  # (no hook: the stand-in reading)
    return found if at == end else None


def app_memory(data=None):
    """The sensor hook's part of RTC memory, after the plan: what it holds, or, given `data`, that written and
    the plan kept (ValueError when the hint, the plan and `data` pass RTC memory's 2,048 bytes). Lost at a power
    cut, as the plan is."""
    memory = wake.memory()
    if data is None:
        return memory[plan_size(memory) :]
    wake.memory((memory[: plan_size(memory)] or NONE + b"\0\0") + data)


def run():
    """A sampling wake: it ends in deep sleep and does not return. Returns when the application must run
    instead (no plan it can read, every reading of the run taken, the journal's slots full), with what it loaded
    that the application does not use dropped (a node's radio turned off): its code would take the application's
    heap."""
    _sample()
    radio = sys.modules.get("dlink.now_radio")
    if radio is not None:
        radio.off()  # (a node whose gateway answers again: the application sets its radio up anew)
    from dmqtt.errors import forget  # (the application loads it anyway)

    for name in ("wake_plan", "dmqtt.wake", "node_wake", "dlink.now_node", "dlink.now_radio", "dlink.now"):
        forget(name)


def _sample():
    began = time.ticks_ms()
    found = plan()
    if found is None or found["left"] <= 0:
        return  # no plan, or every reading of the run taken: the application sends what is left
    now = time.time()
    from dboard import console

    boot, seq = found["boot"], found["seq"]
    node: "Any" = None
    if found["link"]:  # a node (docs/nodes.md): its reading goes to its gateway at once, here
        node = __import__("node_wake")
        if found["queued"] and node.gateway_back(found):
            return  # readings wait, and the gateway answers again: the application sends them all, in order
    # The sensor hook's reading (None without one: the stand-in; False: it failed, said, and this wake takes none).
    value = found["sensor"] and __import__("sensor_hook").read(found["sensor"])
    left = found["queued"]
    if value is not False:
        maker = None
        if found["confirm"] is not None:
            import wake_plan

            maker = wake_plan.confirming(found)
        try:
            payload = console.payload(found["dev"], boot, seq, found["size"], time.ticks_ms(), value)
            left = wake.journal(found["topic"], payload, found["qos"], found["slots"], maker)
        except Exception as exc:
            # QueueFull, from the whole open, which loaded dmqtt.errors (a wake that appends at the hint does not).
            errors = sys.modules.get("dmqtt.errors")
            if errors is None or not isinstance(exc, errors.QueueFull):
                raise
            if not found["refused"]:
                return  # the journal's slots are full: the application sends first
            print(console.QUEUE_FULL % left)  # (and no join: the network refused the last ones)
            value = False
        if value is not False:
            print(console.ACCEPTED % (boot, seq))  # the witness, as the application prints it
            found["seq"] = seq + 1
            found["left"] -= 1
            if not found["queued"]:
                found["oldest"] = now
            found["queued"] += 1
            if node is not None and found["queued"] == 1:
                # The plan with this reading counted, before it goes: a reset in the send or in its DONE record
                # (RTC memory kept) must not take the next reading under this one's seq.
                keep(found, now)
                if node.send(found, payload):
                    found["queued"] -= 1
                    left -= 1  # on the gateway's flash, and done in the journal
    found["taken"] += 1
    keep(found, now)
    ms = max(1, found["every"] - time.ticks_diff(time.ticks_ms(), began))
    print(console.SLEEP % (ms, left))
    machine.deepsleep(ms)
