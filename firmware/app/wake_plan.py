# The end of a wake that ran the application (after(), called by duty.py before the deep sleep): why it sleeps
# unjoined, if it does, and the plan in RTC memory (sampler.py) made from the whole session; and a sampling wake
# whose hint the flash did not bear out (accept(): the journal opened whole, as at a power-on). Loaded by those
# wakes only, past a sending wake's heap low, so that neither a sampling wake whose hint holds nor the
# application's run carries its code (docs/low-power.md, what a wake loads).

import machine


def after(board, seq, now):
    """At the end of a wake that ran the application (duty.py): the plan for the wakes that follow, seq the next
    reading's. Readings left waiting are counted from this wake (their own times are in their payloads)."""
    cfg = board.cfg
    sleep = cfg["sleep"]
    if board.wifi is not None and not board.wifi.up:
        gave_up(board.wifi.sta.status(), sleep["awake_s"])
    elif board.client.outstanding():
        # Unacknowledged at the sleep: sent again at the next sending wake, as every message a wake sleeps on
        # without settle() is (docs/low-power.md). A note, as gave_up()'s is.
        print("settle: %d unacknowledged when sleep.awake_s (%d s) ran out: sent again at the next sending wake"
              % (board.client.outstanding(), sleep["awake_s"]))  # fmt: skip
    if sleep["readings_per_send"] == 1:
        if machine.RTC().memory()[:1] == b"S":  # sampler.SAMPLE: a plan a config with readings_per_send left
            from sampler import NONE, write

            write(NONE)
        return
    from sampler import PLAN, keep

    queued = board.client.outstanding()
    found = {
        "v": PLAN,
        "dev": cfg["client_id"],
        "topic": cfg["topic"],
        "qos": cfg["qos"],
        "version": cfg["version"],
        "slots": sleep["queue_limit"],
        "count": cfg["count"],
        "left": cfg["count"] - board.client.mark,  # readings of the run still to take
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
        "ring": hint_of(board.client.session),
    }
    keep(found, now)


def gave_up(status, awake_s):
    """A sending wake goes back to sleep without having joined: why, from the station's status, with what to
    check (said even when awake_s ran out before the join could finish)."""
    import network

    if status == network.STAT_NO_AP_FOUND:
        why = "no network of that name (or BSSID) found: check wifi.ssid and wifi.bssid"
    elif status == network.STAT_WRONG_PASSWORD:
        why = "the password was refused: check wifi.password"
    else:
        why = "no join within sleep.awake_s (%d s)" % awake_s
    # A note for the reader, not a line of the console protocol: a format in dboard/console.py is heap on every board.
    print("wifi: not joined (status %d): %s" % (status, why))


def hint_of(session):
    """The next sampling wake's hint (dmqtt/ring_tail.py), or None: without end-to-end confirmation (whose epochs
    the whole session keeps) and on the ring journal only; that wake opens the whole journal then."""
    if getattr(session, "hold", None) is not None:
        return None
    from dmqtt import ring_tail

    return ring_tail.hint(session)


def accept(found, boot, seq, console):
    """The reading journaled through the whole session (its journal opened and replayed): the power-on's way, and
    the way when the hint fails. Returns the messages left in flight, or None when the application must run
    instead (every reading taken, the slots full). Leaves the next wake its hint."""
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
        session.current_epoch = found["boot"]  # the epoch of this boot's readings, journaled at its first
        session.hold = found["confirm"]
    for note in session.open():
        print(note)
    if session.mark >= found["count"]:
        return None  # every reading of the run is taken: the application sends what is left and ends the run
    try:
        session.accept(found["topic"].encode(), console.payload(found["dev"], boot, seq, found["size"]),
                       found["qos"], False, session.mark + 1)  # fmt: skip
    except QueueFull:
        return None  # the journal's slots are full: the application sends first
    found["ring"] = hint_of(session)
    return session.outstanding()
