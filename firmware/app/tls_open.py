# A TLS connection to the broker, for a board with "tls" in config.json (loaded only by such a board: a deployed
# board pays a module's code in heap): the warning when verification is off, the clock set before a certificate's
# dates are checked, and the heap the connection holds (ESP-IDF's on a chip, MicroPython's on the Unix port).

import time

import board_app

CLOCK_VALID_FROM = 2024  # a year before which the clock cannot be right: certificates are newer than that


def connect(board):
    cfg = board.cfg
    tls = cfg["tls"]
    if tls["insecure"]:
        print("tls: WARNING: certificate verification is off (tls.insecure): anyone on the path can pose as the broker")
    elif time.gmtime()[0] < CLOCK_VALID_FROM:
        # Certificate validity is checked against the board's clock: an ESP32 without a set RTC starts in 2000.
        # (The virtual board has the host's clock.)
        import realboard

        realboard.set_clock(CLOCK_VALID_FROM)
    free = board_app.collected()
    transport = board.transport_class(
        cfg["host"], cfg["port"], tls=board.tls_ctx, server_hostname=tls["server_hostname"]
    )
    board_app.heap[3] = max(board_app.heap[3], free - board_app.collected())  # the TLS session's, at its largest
    return transport
