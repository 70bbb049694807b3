# WiFi supervision for a board on TCP: join a network, notice when the link drops, rejoin with a capped
# exponential backoff, and tell the application (hooks, counters), without ever blocking: an application that
# wants to wait for the link calls check() until it says True (docs/client.md).
# mqtt_as does the same inside its client; here it is a helper of its own, so that both faces of the client and
# an application of one's own share it (docs/client.md, "WiFi").
#
# The ESP32 port's station rejoins by itself after it loses its access point (WLAN.config(reconnects=...),
# unlimited by default): check() gives it `attempt_ms` to do so, then starts the attempt again itself, after the
# backoff. A station that loses its access point notices only after the beacon timeout (6 s on ESP-IDF); until
# then its link looks up and its sockets simply get no answer.
#
# A module, not a class: a chip has one station interface (docs/firmware-style.md, rule 1).

import time

if False:  # type checkers only: MicroPython has no typing module
    from typing import Any, Callable

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


_BACKOFF_MS = const(1000)  # the first wait after a failed attempt; doubled at each failure
_BACKOFF_CAP_MS = const(30000)

# Hooks, each None or a callable: on_up(outage_ms) once joined (outage_ms None for the first join, else how long
# the link was down); on_down() once when the link drops.
on_up: "Callable[[Any], None] | None" = None
on_down: "Callable[[], None] | None" = None
# Counters since start(): joins, outages, milliseconds offline of the outages that ended (offline_now() is the
# current one's).
joins = outages = offline_ms = 0
up = False  # joined, as last checked
attempt_ms = 15000  # how long an attempt may take before the next one is started (after the backoff)
sta = None  # the station: network.WLAN(STA_IF)

_network = None  # (ssid, password, ip, bssid)
_failures = 0  # failed attempts since the last join: the backoff's exponent
# ticks: when the current outage began (None while up, and before the first join), when the current attempt
# began (None before the first), when the next may begin after a failed one (None: not waiting).
_down_at = _attempt_at = _retry_at = None


def start(ssid, password="", ip=None, bssid=None):
    """Supervise the station's link to `ssid` from now on (check() makes the first attempt). `ip`: (ip, mask,
    gateway, dns) for a static address (no DHCP); `bssid`: the access point's 6 bytes, which spares the scan of
    every channel. With both, a chip rejoins in a fraction of the time a join with DHCP takes."""
    global sta, _network, joins, outages, offline_ms, up, _failures, _down_at, _attempt_at, _retry_at
    import network

    sta = network.WLAN(network.STA_IF)
    _network = (ssid, password, ip, bssid)
    joins = outages = offline_ms = _failures = 0
    up = False
    _down_at = _attempt_at = _retry_at = None


def check():
    """Never blocks: True when joined. Notices a drop (on_down, once), a return (on_up), and starts a new
    attempt when the last one has failed and its backoff has passed."""
    global joins, outages, offline_ms, up, _failures, _down_at, _attempt_at, _retry_at
    now = time.ticks_ms()
    if sta.isconnected():  # type: ignore[union-attr]
        if not up:
            up = True
            joins += 1
            _failures = 0
            _attempt_at = _retry_at = None
            outage = _down_at
            if outage is not None:
                outage = time.ticks_diff(now, outage)
                offline_ms += outage
                _down_at = None
            if on_up is not None:
                on_up(outage)
        return True
    down = None
    if up:
        up = False
        down = _attempt_at = now  # the station is rejoining by itself already
    elif _attempt_at is None or (_retry_at is not None and time.ticks_diff(now, _retry_at) >= 0):
        ssid, password, ip, bssid = _network  # type: ignore[misc]
        try:
            if _attempt_at is not None:
                sta.disconnect()  # the station's own attempt failed: it scans again
            sta.active(True)  # type: ignore[union-attr]
            if ip is not None:
                sta.ifconfig(ip)  # type: ignore[union-attr]
            sta.connect(ssid, password, bssid=bssid)  # type: ignore[union-attr]
        except OSError:
            pass  # the WiFi driver refused (busy, not started): this attempt fails by its timeout
        _attempt_at = now
        _retry_at = None
    elif _retry_at is None and time.ticks_diff(now, _attempt_at) >= attempt_ms:
        _retry_at = time.ticks_add(now, min(_BACKOFF_CAP_MS, _BACKOFF_MS << min(_failures, 5)))
        _failures += 1
        if _down_at is None and not joins:
            down = _attempt_at  # no join yet: offline since the first attempt
    if down is not None:
        outages += 1
        _down_at = down
        if on_down is not None:
            on_down()
    return False


def refused():
    """The station's status when the network said no, 0 else (joined, or still trying): STAT_WRONG_PASSWORD (the
    password), STAT_NO_AP_FOUND (no network of that name, or BSSID, in range) or STAT_ASSOC_FAIL. A station goes on
    trying; an application on a battery stops waiting instead (its radio listens at about 100 mA meanwhile) and
    tries again later (docs/low-power.md, "A join that cannot work")."""
    status = sta.status()  # type: ignore[union-attr]
    return status if 201 <= status <= 203 else 0  # network.STAT_NO_AP_FOUND, STAT_WRONG_PASSWORD, STAT_ASSOC_FAIL


def offline_now():
    """Milliseconds of the outage under way (0 when up)."""
    return 0 if _down_at is None else time.ticks_diff(time.ticks_ms(), _down_at)
