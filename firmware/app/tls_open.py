# A TLS connection to the broker, for a board with "tls" in config.json (loaded only by such a board: a deployed
# board pays a module's code in heap): the warning when verification is off, the clock set before a certificate's
# dates are checked, and the heap a connection holds at its largest (of MicroPython's: mbedTLS's own buffers are in
# ESP-IDF's heap on a chip).

import time

import board_app

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


_TLS_SESSION = const(3)  # board_app.heap's index (board_app._TLS_SESSION)

CLOCK_VALID_FROM = 2024  # a year before which the clock cannot be right: certificates are newer than that


def connect(board):
    from dmqtt.transport import TCPTransport

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
    transport = TCPTransport(cfg["host"], cfg["port"], tls=board.tls_ctx, server_hostname=tls["server_hostname"])
    held = free - board_app.collected()  # the connection's
    board_app.heap[_TLS_SESSION] = max(board_app.heap[_TLS_SESSION], held)
    return transport
