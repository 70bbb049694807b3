# A node's radio for ESP-NOW (docs/nodes.md): set up once a boot for its gateway, off before a deep sleep. Its own
# module, small: both a node's usual wake (dlink/now_node.py) and the client's transport (dlink/now_transport.py)
# need it, and neither loads the other.

import espnow
import network

if False:  # type checkers only: MicroPython has no typing module
    from typing import Any

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


# The receive buffer: a node hears only its gateway's answers, a few acknowledgements each (the port's default,
# 526 bytes, holds two full frames; this, one).
_RXBUF = const(270)
_radio: "list[Any]" = [None]  # the ESPNow object, set up once a boot


def radio(gateway, channel, lmk=None):
    """ESP-NOW up on `channel` with the gateway as its peer (encrypted with `lmk`, 16 bytes, when given): the
    station active and not joined, as a node's radio is. Once a boot; returns the ESPNow object."""
    e = _radio[0]
    if e is None:
        sta = network.WLAN(network.STA_IF)
        sta.active(True)
        sta.config(channel=channel)
        e = espnow.ESPNow()
        e.config(rxbuf=_RXBUF)
        e.active(True)
        if lmk:
            e.add_peer(gateway, lmk, encrypt=True)
        else:
            e.add_peer(gateway)
        _radio[0] = e
    return e


def off():
    """The radio off before a deep sleep (ESP-NOW's docs: the WiFi interface inactive before any sleep)."""
    e = _radio[0]
    if e is not None:
        e.active(False)
        network.WLAN(network.STA_IF).active(False)
        _radio[0] = None
