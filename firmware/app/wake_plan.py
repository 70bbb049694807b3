# The end of a wake that ran the application (after(), called by duty.py before the deep sleep): why it sleeps
# unjoined, if it does, the library's hint for the sampling wakes (dmqtt.wake.keep) and the plan in RTC memory
# (sampler.py) made from the whole session; and the session a sampling wake with end-to-end confirmation opens
# (confirming()). Loaded by those wakes only, past a sending wake's heap low, so that neither a sampling wake nor
# the application's run carries its code (docs/low-power.md, what a wake loads).


try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


# After a join the network refused, the sending wakes come every readings_per_send << refused wakes: twice as far
# apart at each refusal in a row, up to this many doublings (a day of one-minute wakes with readings_per_send 10 is
# about 2 << 6), until a join succeeds or the board is reset (a new config.json).
_BACKOFF_MAX = const(6)


def after(board, seq, now):
    """At the end of a wake that ran the application (duty.py): the plan for the wakes that follow, seq the next
    reading's. Readings left waiting are counted from this wake (their own times are in their payloads)."""
    cfg = board.cfg
    sleep = cfg["sleep"]
    refused = 0  # sending wakes in a row whose join the network refused: the next ones come further apart
    if board.wifi is not None and not board.wifi.up:
        gave_up(board.wifi.sta.status(), sleep["awake_s"])
        if board.wifi.refused():
            import machine
            from sampler import plan

            last = plan() if machine.reset_cause() == machine.DEEPSLEEP_RESET else None
            refused = min((last or {}).get("refused", 0) + 1, _BACKOFF_MAX)
    elif board.client.outstanding() and cfg["espnow"]:
        # A node whose gateway did not answer: its readings wait on flash, sent when the gateway hears it again.
        print("espnow: the gateway did not answer: %d wait on flash for a wake it answers" % board.client.outstanding())
    elif board.client.outstanding():
        # Unacknowledged at the sleep: sent again at the next sending wake, as every message a wake sleeps on
        # without settle() is (docs/low-power.md). A note, as gave_up()'s is.
        print("settle: %d unacknowledged when sleep.awake_s (%d s) ran out: sent again at the next sending wake"
              % (board.client.outstanding(), sleep["awake_s"]))  # fmt: skip
    link = cfg["espnow"]  # a node: each wake journals its reading and sends it (sampler.py), at the hint
    if link is not None:
        # Its radio off and its link's modules dropped before the plan's modules load: the connection leaves the
        # heap in pieces (about 23 KB free in runs of 512 bytes at most, measured on a deployed node's power-on),
        # where dmqtt.wake's import wants a run longer than that.
        __import__("node_wake").end()
    from dmqtt import wake

    wake.keep(board.client)  # the hint: a sampling wake appends at it (None with confirmation, or the file journal)
    if sleep["readings_per_send"] == 1 and link is None:
        if wake.memory()[:1] == b"S":  # sampler.SAMPLE: a plan a config with readings_per_send left
            from sampler import NONE, write

            write(NONE)
        return
    from sampler import keep

    queued = board.client.outstanding()
    found = {
        "dev": cfg["client_id"],
        "topic": cfg["topic"],
        "qos": cfg["qos"],
        "version": cfg["version"],
        "slots": sleep["queue_limit"],
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
        "sensor": cfg["sensor"],
        "refused": refused,
        # The node's gateway, channel and key, as sampler.link() reads them back ("" for any other board).
        "link": "%s%02d%s" % (link["gateway"], link["channel"], link["lmk"] or "") if link else "",
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


def confirming(found):
    """The session a sampling wake with end-to-end confirmation opens the journal whole into (dmqtt.wake.journal's
    `session`): its epochs and confirmed point kept as the client keeps them, which a hint cannot carry."""
    # Its module holds the confirming client too, which brings the client's module and the codec: a sampling
    # wake with confirmation loads them (a module of its own for the session cost the boards that stay awake
    # their margin of heap at boot: tests/integration/test_boot_heap.py).
    from dmqtt.confirm import ConfirmingSession
    from dmqtt.journal import open_journal

    def make(slots):
        session = ConfirmingSession(open_journal(), found["version"], 0, slots, 16)
        session.current_epoch = found["boot"]  # the epoch of this boot's readings, journaled at its first
        session.hold = found["confirm"]
        return session

    return make
