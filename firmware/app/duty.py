# The duty cycle of a board that deep-sleeps between readings (config.json "sleep"), loaded only by such a board.
# This is the wake that runs the application: a power-on, or a sending wake (with readings_per_send above 1 the
# others are sampler.py's sampling wakes, which only journal their reading). It takes its reading, journals it,
# sends what the journal holds and reads every acknowledgement within sleep.awake_s (MQTTClient.settle), leaves
# the sampling wakes their plan in RTC memory, and deep-sleeps until the next wake. A deep sleep is a reset to the
# journal: what the broker has not acknowledged stays on flash and goes at the next sending wake, and nothing it
# has acknowledged goes again.

import time

from dboard import console
from dmqtt.errors import MQTTError, PublishRefused, QueueFull


def run(board, heap_at_boot):
    """One wake of `board` (a board_app.Board, its journal open): its reading published, then everything in the
    journal sent and acknowledged, then deep sleep. A QoS 1/2 reading is journaled at once (the witness line
    printed). A QoS 0 reading is not journaled: it goes over the wake's connection once the WiFi has joined, or is
    dropped and counted when no connection comes within the awake time (the run's progress journaled all the
    same). The wake that finds the run's last reading acknowledged ends the run with the summary line instead
    (heap_at_boot: main.py's measure, for it)."""
    cfg = board.cfg
    sleep = cfg["sleep"]
    client = board.client
    qos = cfg["qos"]
    start = time.ticks_ms()
    deadline = time.ticks_add(start, sleep["awake_s"] * 1000)
    seq = 0
    reading = None  # the wake's reading, until published (QoS 0: until the connection is made)
    if client.mark < cfg["count"]:  # (else every reading of the run is taken: this wake only sends what is left)
        # The sensor hook's reading (None without one: the stand-in; False: it failed, said, and this wake only
        # sends).
        value = cfg["sensor"] and __import__("sensor_hook").read(cfg["sensor"])
        if value is not False:
            reading = console.payload(cfg["client_id"], board.boot, 0, cfg["payload_bytes"], time.ticks_ms(), value)
    # Until everything is acknowledged (and, with confirmation, the recorder's retained confirmation read), or
    # the awake time is spent; a connection lost meanwhile is made again.
    while time.ticks_diff(deadline, time.ticks_ms()) > 0:
        if reading is not None and (qos or board.try_connect()):  # (QoS 1/2: journaled before any connection)
            try:
                client.publish(cfg["topic"].encode(), reading, qos, mark=client.mark + 1)
                seq = 1
                if qos:
                    print(console.ACCEPTED % (board.boot, 0))
            except QueueFull:
                print(console.QUEUE_FULL % client.outstanding())  # the journal is full of unacknowledged readings
            except PublishRefused as exc:
                print(console.PUBLISH_REFUSED % exc)
            except (OSError, MQTTError):
                client.close()  # QoS 0 met a lost connection: this reading is lost
            reading = None
        if board.try_connect():
            # The DISCONNECT that ends settle() is ours (the broker keeps the session): not said as a lost
            # connection, nor is one lost during settle() (the next wake sends what is left).
            told, client.on_disconnect = client.on_disconnect, None
            left = client.settle(time.ticks_diff(deadline, time.ticks_ms()))
            client.on_disconnect = told
            if not left:
                break
        elif reading is None and not client.outstanding() and not cfg["confirm"]:
            break  # everything acknowledged at an earlier wake: nothing to wait for
        elif board.wifi is not None and board.wifi.refused():
            break  # the network refused the board: no waiting for awake_s (wake_plan.after says why, backs off)
        elif cfg["espnow"] is not None:
            break  # a node whose gateway does not answer: its readings wait on flash for the next wake
        else:
            time.sleep_ms(20)
    if reading is not None:
        board.dropped += 1
        client.session.note_mark(client.mark + 1)
        client.mark = client.session.mark
    if client.mark >= cfg["count"] and not client.outstanding():
        from board_app import finish

        finish(board, seq, client.mark, start, heap_at_boot)
        return
    client.close()  # (the deadline came during a connection attempt)
    # The wake's connections are over: the client's output buffer (max_packet, a kilobyte in one block) goes back to
    # the heap before the plan's code loads into a heap the wake has cut up (a node's wake under load met a
    # MemoryError of 422 bytes importing dmqtt.wake there).
    client.tx_buf = None
    import machine
    import wake_plan  # (loaded now, past the wake's heap low)

    wake_plan.after(board, seq, time.time())
    ms = max(1, sleep["every_s"] * 1000 - time.ticks_diff(time.ticks_ms(), start))
    print(console.SLEEP % (ms, client.outstanding()))
    machine.deepsleep(ms)
