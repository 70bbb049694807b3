# The board application's WiFi, for a board on tcp with "wifi" in config.json: dmqtt.wifi's events said on the
# console (docs/console-protocol.md) (board_open.open_board starts the supervision; board_app.finish puts
# dmqtt.wifi's counters in the summary).
# Loaded only by such a board: what it interns (names are a board's for good) and its code (a deployed board's
# heap) others are spared.

import time

from dboard import console
from dmqtt import wifi

if False:  # type checkers only: MicroPython has no typing module
    from typing import Any

began: "Any" = 0  # ticks: when the supervision began (board_open.open_board), for the first join's time


def say(outage_ms=-1):
    """The hooks of dmqtt.wifi, both: on_up(None) the first join, on_up(ms) the link back, on_down() it dropped."""
    if outage_ms is None:
        address = wifi.sta.ifconfig()[0]  # type: ignore[union-attr]
        print(console.WIFI_JOINED % (address, time.ticks_diff(time.ticks_ms(), began)))
    elif outage_ms < 0:
        print(console.WIFI_DOWN % wifi.sta.status())  # type: ignore[union-attr]
    else:
        print(console.WIFI_UP % outage_ms)
