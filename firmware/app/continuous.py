# The run of a board that stays awake (no "sleep" in config.json), loaded only by such a board: `count` telemetry
# messages, resuming a run that a reset or a power cut interrupted (the number accepted so far is journaled with
# each message), then, when every QoS 1/2 message is acknowledged, the summary line.
#
# With group_commit N, up to N messages are staged in RAM and programmed together: a power cut loses the
# staged ones, and the journaled mark with them, so the run republishes them (under the new boot).

import time

from dboard import console
from dmqtt.errors import MQTTError, PublishRefused, QueueFull

_HEAP_EVERY = 32


def run(board, heap_at_boot):
    """The run: its messages published, then every one acknowledged, then (with confirmation) stored by the
    recorder, then the summary line (heap_at_boot: main.py's measure, for it)."""
    done_before = board.client.mark  # accepted in earlier boots of this run
    start = time.ticks_ms()
    board.try_connect()
    seq = publish_all(board, done_before, max(0, board.cfg["count"] - done_before))
    drain(board)
    if board.cfg["confirm"]:
        await_confirmation(board)
    from board_app import finish

    finish(board, seq, done_before + seq, start, heap_at_boot)


def publish_all(board, done_before, todo):
    """Publish the run's `todo` messages left, one every interval_ms; returns how many were accepted. A message
    publish() refuses outright (too large for this broker) is skipped, a QoS 0 one taken during a WiFi outage
    dropped; both are counted, neither retried."""
    cfg = board.cfg
    client = board.client
    topic = cfg["topic"].encode()
    dev, size = cfg["client_id"], cfg["payload_bytes"]
    seq = 0
    skipped = 0
    dropped = 0
    while seq + skipped + dropped < todo:
        if cfg["qos"] == 0 and not ensure_connected(board, True):
            dropped += 1
            board.dropped += 1
            idle(board, cfg["interval_ms"])
            continue
        value = cfg["sensor"] and __import__("sensor_hook").read(cfg["sensor"])  # (None: the stand-in)
        if value is False:
            skipped += 1  # the sensor failed (said): no message for this reading
            idle(board, cfg["interval_ms"])
            continue
        try:
            # QoS 1/2 while disconnected: accepted into the journal (the offline queue) and sent on reconnect.
            wait = 30000 if client.connected else 0
            client.publish(
                topic,
                console.payload(dev, board.boot, seq, size, time.ticks_ms(), value),
                cfg["qos"],
                mark=done_before + seq + 1,
                timeout_ms=wait,
            )
        except QueueFull:
            print(console.QUEUE_FULL % client.outstanding())
            ensure_connected(board)
            continue
        except PublishRefused as exc:
            skipped += 1  # counted by the client (client.refused)
            print(console.PUBLISH_REFUSED % exc)
            continue
        except (OSError, MQTTError):
            client.close()  # said by on_disconnect
            continue
        seq += 1  # counted when publish() has accepted it
        group = cfg["group_commit"]
        if cfg["qos"] and not group:
            print(console.ACCEPTED % (board.boot, seq - 1))  # the witness: on the console before any cut
        heap_checkpoint(board, seq)
        if not group or seq % group == 0 or seq == todo:
            client.flush()  # with group commit: the group is made durable here
            if cfg["qos"] and group:
                print(console.ACCEPTED % (board.boot, seq - 1))
            idle(board, cfg["interval_ms"])
    if cfg["qos"] and cfg["group_commit"] and seq % cfg["group_commit"] and seq != todo:
        client.flush()  # a last group cut short by refused messages
        print(console.ACCEPTED % (board.boot, seq - 1))
    return seq


def drain(board):
    """Until every QoS 1/2 message is acknowledged, connecting again as often as it takes."""
    client = board.client
    while client.outstanding():
        ensure_connected(board)
        try:
            client.wait_idle(60000)
        except (OSError, MQTTError):
            client.close()  # said by on_disconnect


def await_confirmation(board):
    """Until the recorder has stored every message (sending again what it lacks), while it makes progress: three
    timeouts without a confirmation moving the floor end the wait (a recorder down or catching up on a backlog
    takes longer than that to come back). What is still unconfirmed then is counted in the summary and stays in
    the journal, for the next boot."""
    client = board.client
    patience = 3000 * board.cfg["confirm"]["timeout_s"]
    left = client.unconfirmed()
    until = time.ticks_add(time.ticks_ms(), patience)
    while (left or client.outstanding()) and time.ticks_diff(until, time.ticks_ms()) > 0:
        idle(board, 100)
        now_left = client.unconfirmed()
        if now_left < left:
            left = now_left
            until = time.ticks_add(time.ticks_ms(), patience)


def idle(board, ms):
    """Serve the connection (acks, keep-alive, reconnects) for ms milliseconds."""
    client = board.client
    deadline = time.ticks_add(time.ticks_ms(), ms)
    while True:
        left = time.ticks_diff(deadline, time.ticks_ms())
        if board.try_connect():
            try:
                client.poll(max(0, min(100, left)))
            except (OSError, MQTTError):
                client.close()  # said by on_disconnect
        elif left > 0:
            time.sleep_ms(min(left, 50))
        if time.ticks_diff(deadline, time.ticks_ms()) <= 0:
            return


def heap_checkpoint(board, seq):
    """Every _HEAP_EVERY accepted messages, and with heap_log_every N a line every N (so that a long run shows
    whether the heap holds: no leak, no fragmentation that grows)."""
    every = board.cfg["heap_log_every"]
    logged = every and seq % every == 0
    if logged or seq % _HEAP_EVERY == 0:
        import board_app

        free = board_app.heap_check()
        if logged:
            print(console.HEAP % (seq, free, board_app.largest_block(free)))


def ensure_connected(board, qos0=False):
    """Until connected (True). For a QoS 0 message (`qos0`: it is not queued), not through a WiFi outage: False
    then, and the message is dropped (counted)."""
    wifi = board.wifi
    while not board.try_connect():
        if qos0 and wifi and not wifi.up:
            return False
        time.sleep_ms(max(1, min(50, board.backoff.due())))
    return True
