# The duty cycle of a board that deep-sleeps between readings (config.json "sleep"), loaded only by such a board:
# a wake takes its reading, journals it, sends what the journal holds and reads every acknowledgement (within
# sleep.awake_s), then deep-sleeps until the next wake. A deep sleep is a reset to the journal: what the broker
# has not acknowledged stays on flash and goes at the next wake, and nothing it has acknowledged goes again.

import time

from dboard import console
from dmqtt.errors import MQTTError, PublishRefused, QueueFull


def run(board):
    """One wake of `board` (board_app.Board, its journal open): its reading published (QoS 1/2: journaled, the
    witness line printed; QoS 0 needs the connection within the awake time, or the reading is dropped and
    counted, the run's progress journaled all the same), then everything in the journal sent and acknowledged,
    then deep sleep. The wake that finds the run's last reading acknowledged ends the run with the summary line
    instead."""
    cfg = board.cfg
    client = board.client
    start = time.ticks_ms()
    deadline = time.ticks_add(start, cfg["sleep"]["awake_s"] * 1000)
    seq = 0
    if client.mark >= cfg["count"]:
        pass  # every reading of the run is taken: this wake only sends what is left
    elif cfg["qos"] == 0 and not board.ensure_connected(True, deadline):
        board.dropped += 1
        client.session.note_mark(client.mark + 1)
        client.mark = client.session.mark
    else:
        try:
            client.publish(cfg["topic"].encode(), board.payload(0), cfg["qos"], mark=client.mark + 1)
            seq = 1
            if cfg["qos"]:
                print(console.ACCEPTED % (board.boot, 0))
        except QueueFull:
            print(console.QUEUE_FULL % client.outstanding())  # the journal is full of unacknowledged readings
        except PublishRefused as exc:
            print(console.PUBLISH_REFUSED % exc)
        except (OSError, MQTTError):
            client.close()  # QoS 0 met a lost connection: this reading is lost
    while client.outstanding() and time.ticks_diff(deadline, time.ticks_ms()) > 0:
        if board.try_connect():
            try:
                client.wait_idle(max(1, min(100, time.ticks_diff(deadline, time.ticks_ms()))))
            except (OSError, MQTTError):
                client.close()  # said by on_disconnect
        else:
            time.sleep_ms(20)
    if client.mark >= cfg["count"] and not client.outstanding():
        board.finish(seq, client.mark, start)
        return
    if client.connected:
        board.finished = True  # the DISCONNECT is ours: the broker keeps the session and discards the will
        client.disconnect()
    ms = max(1, cfg["sleep"]["every_s"] * 1000 - time.ticks_diff(time.ticks_ms(), start))
    print(console.SLEEP % (ms, client.outstanding()))
    import machine

    machine.deepsleep(ms)
