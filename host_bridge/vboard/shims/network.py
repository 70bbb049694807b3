# network module shim for the virtual board: a WiFi station (WLAN(STA_IF)) that joins the virtual access point
# the host runs (host_bridge/vboard/wifi.py), with the ESP32 port's API and statuses.
#
# The host owns the access point: whether it is up, and its generation, which moves on when its stations lose it
# (the AP has been down for longer than the beacon timeout). It writes "UP GEN SINCE" (SINCE: when it last came
# up or went down, host time) to a small file the station reads at each call, so this module keeps only the
# station's side: asked to connect or not, when the current attempt began, the generation it joined, the reason
# of its last disconnection. A join takes the time of the model the host gives (VBOARD_AP: a full join with DHCP,
# a fast one with a static IP and a known BSSID, a scan that finds nothing; times scaled by its "scale"), counted
# in host time from the attempt, or from the AP's return when it was down. As on an ESP32 the station rejoins by
# itself after it loses the AP, for ever (config(reconnects=N): N attempts), and status() says why it is not
# connected: STAT_NO_AP_FOUND, STAT_WRONG_PASSWORD, else STAT_CONNECTING while it tries.
#
# Sockets of a station go through the access point (socket.py, the shim beside this one): route() gives the
# relay's port and the generation joined, epoch() moves on at each loss so that a socket can tell it was cut.
import json
import time

import vair
import vboard_state
from esp_errno import EHOSTUNREACH

STA_IF = 0
AP_IF = 1

STAT_IDLE = 1000
STAT_CONNECTING = 1001
STAT_GOT_IP = 1010
STAT_BEACON_TIMEOUT = 200
STAT_NO_AP_FOUND = 201
STAT_WRONG_PASSWORD = 202
STAT_ASSOC_FAIL = 203
STAT_HANDSHAKE_TIMEOUT = 204
_ASSOC_LEAVE = 8  # ESP-IDF's reason after the station's own disconnect()

AUTH_OPEN = 0
AUTH_WPA2_PSK = 3


_model = json.loads(vboard_state.env("VBOARD_AP", "{}"))
_SCALE = float(_model.get("scale", 1.0))


def _seconds(key, default_ms):
    return _model.get(key, default_ms) * _SCALE / 1000


_JOIN_S = _seconds("join_ms", 1750)
_FAST_S = _seconds("fast_ms", 660)
_SCAN_S = _seconds("scan_ms", 2040)
_BEACON_MS = _model.get("beacon_ms", 6000)
_CHANNEL = _model.get("channel", 6)
_BSSID = bytes(int(_model.get("bssid", "02000000aa01")[i : i + 2], 16) for i in range(0, 12, 2))
_SUBNET = _model.get("subnet", "192.168.4")

_hostname = "mpy-esp32"


def _now():
    return time._port.time()  # host time, as the access point's file counts it (not the board's slept clock)


def _ap():
    """(up, generation, since) as the host last wrote them; an access point always up without a host (VBOARD_AP
    unset: the station joins at once)."""
    path = _model.get("state")
    if path is None:
        return True, 0, 0.0
    try:
        with open(path) as f:
            up, gen, since = f.read().split()
        return up == "1", int(gen), float(since)
    except (OSError, ValueError):
        return True, 0, 0.0  # the host is replacing it this instant: take it as it was


class _Station:
    """The station's state: made at import, before the firmware's heap is pinned, with every attribute it will
    have, so that what the firmware does to it allocates nothing in the firmware's heap (C state on a chip)."""

    def __init__(self):
        self.active = False
        self.requested = False  # connect() asked for, and no disconnect() since
        self.ssid = None
        self.key = None
        self.bssid = None
        self.static = None  # (ip, mask, gateway, dns) from ifconfig() before a join: no DHCP
        self.attempt_at = 0.0  # host time the current attempt began
        self.attempts = 0
        self.reconnects = -1  # config(reconnects=N): N attempts more after a failed one (-1, the default: for ever)
        self.pm = 1  # config(pm=): WLAN.PM_PERFORMANCE, ESP-IDF's default (WIFI_PS_MIN_MODEM)
        self.joined = -1  # the access point's generation the station joined; -1: not associated
        self.reason = 0
        self.epoch = 0  # moves on at every loss of the association: sockets of an earlier one are dead
        self.channel = 1  # config(channel=): the radio's channel while not associated (ESP-NOW's home channel)


_sta = _Station()


def _update():
    s = _sta
    up, gen, since = _ap()
    if s.joined >= 0 and gen != s.joined:
        _lose(STAT_BEACON_TIMEOUT)
    if s.joined >= 0 or not (s.requested and s.active):
        return
    if 0 <= s.reconnects < s.attempts:
        return  # the first attempt and N reconnects have failed: the ESP32 port gives up (status() says why)
    now = _now()
    found = up and s.bssid in (None, _BSSID) and _model.get("ssid") in (None, s.ssid)
    if not found:
        # Each attempt is a scan that finds nothing; the station scans again at once.
        tried = int((now - s.attempt_at) / _SCAN_S) if _SCAN_S else 1
        if tried:
            s.reason = STAT_NO_AP_FOUND
            s.attempts += tried
            s.attempt_at += tried * _SCAN_S
        return
    join = _FAST_S if s.static is not None else _JOIN_S
    ready = max(s.attempt_at, since) + join
    if now < ready:
        return
    if _model.get("password") not in (None, s.key or ""):
        s.reason = STAT_WRONG_PASSWORD
        s.attempts += 1
        s.attempt_at = ready
        return
    s.joined = gen
    s.reason = 0
    s.attempts = 0
    _radio()
    if vboard_state.watches("joined"):
        vboard_state.event("joined")


def _lose(reason):
    s = _sta
    s.joined = -1
    _radio()
    s.epoch += 1
    s.reason = reason
    s.attempts = 0
    s.attempt_at = _now()  # the ESP32 port reconnects by itself while a connection is requested


def channel():
    """The radio's channel: its access point's while associated (the station follows it), else config(channel=)'s
    (ESP-NOW sends and hears there)."""
    return _CHANNEL if _sta.joined >= 0 else _sta.channel


def _radio():
    """Tell the ESP-NOW air (vair) which channel the radio is on: 0 while the interface is inactive."""
    vair.radio(channel() if _sta.active else 0)


def radio_off(ms):
    """A light sleep of `ms`: longer than the beacon timeout, the station has lost its access point on waking."""
    _update()
    if _sta.joined >= 0 and ms >= _BEACON_MS:
        _lose(STAT_BEACON_TIMEOUT)


def on_wifi():
    """The station is active: the board's sockets go through the access point."""
    return _sta.active


def route():
    """(relay port, generation) for a new socket of the associated station; OSError(EHOSTUNREACH) when there is
    no association, as lwIP fails a connect with no route."""
    _update()
    if _sta.joined < 0:
        raise OSError(EHOSTUNREACH)
    return _model["port"], _sta.joined


def epoch():
    _update()
    return _sta.epoch


def associated():
    _update()
    return _sta.joined >= 0


def hostname(name=None):
    global _hostname
    if name is None:
        return _hostname
    _hostname = name
    return None


def country(code=None):
    return "01" if code is None else None


def _mac():
    uid = vboard_state.env("VBOARD_UID", "24d7eb000001")
    return bytes(int(uid[i : i + 2], 16) for i in range(0, 12, 2))


class WLAN:
    """network.WLAN(STA_IF): the station, one object made at import as the port's is static. (AP_IF is accepted
    and stays inactive: the virtual board is no access point.)"""

    IF_STA = STA_IF
    IF_AP = AP_IF
    PM_NONE = 0  # ESP-IDF's WIFI_PS_NONE
    PM_PERFORMANCE = 1  # WIFI_PS_MIN_MODEM, the default
    PM_POWERSAVE = 2  # WIFI_PS_MAX_MODEM

    def __new__(cls, interface=STA_IF):
        if interface not in (STA_IF, AP_IF):
            raise ValueError("invalid WLAN interface identifier")
        return _INTERFACES[interface]

    def __init__(self, interface=STA_IF):
        pass  # made once, at import (_interface)

    def active(self, is_active=None):
        if not self._sta:
            return False if is_active is None else None
        if is_active is None:
            return _sta.active
        if _sta.active and not is_active:
            self.disconnect()
        _sta.active = bool(is_active)
        _radio()
        return None

    def connect(self, ssid=None, key=None, *, bssid=None):
        self._need_sta()
        if not _sta.active:
            raise OSError("Wifi Not Started")
        if bssid is not None and len(bssid) != 6:
            raise ValueError
        if ssid is not None:
            _sta.ssid, _sta.key, _sta.bssid = ssid, key, bssid
        if _sta.joined >= 0:
            _lose(_ASSOC_LEAVE)
        _sta.requested = True
        _sta.attempts = 0
        _sta.attempt_at = _now()
        if vboard_state.watches("join"):
            vboard_state.event("join")  # a cut here lands inside the join

    def disconnect(self):
        _sta.requested = False
        if _sta.joined >= 0:
            _lose(_ASSOC_LEAVE)
        _sta.reason = _ASSOC_LEAVE

    def isconnected(self):
        if not self._sta:
            return False
        return associated()

    def status(self, param=None):
        self._need_sta()
        if param == "rssi":
            if not associated():
                raise OSError("Wifi Not Connected")
            return -55
        if param is not None:
            raise ValueError("unknown status param")
        _update()
        s = _sta
        if s.joined >= 0:
            return STAT_GOT_IP
        if s.reason in (STAT_NO_AP_FOUND, STAT_WRONG_PASSWORD):
            return s.reason
        if s.reason == _ASSOC_LEAVE or not s.requested:
            return STAT_IDLE
        return STAT_CONNECTING

    def ifconfig(self, config=None):
        self._need_sta()
        if config is not None:
            if len(config) != 4:
                raise ValueError("ifconfig needs (ip, mask, gateway, dns)")
            _sta.static = tuple(config)
            return None
        if not associated():
            return _sta.static or ("0.0.0.0", "0.0.0.0", "0.0.0.0", "0.0.0.0")
        if _sta.static is not None:
            return _sta.static
        gateway = _SUBNET + ".1"
        return ("%s.%d" % (_SUBNET, 2 + _mac()[5] % 250), "255.255.255.0", gateway, gateway)

    def ipconfig(self, *args, **kwargs):
        """The interface's IPv4 settings as MicroPython 1.24 on names them: ipconfig("addr4") -> (address, mask),
        "gw4", "dhcp4"; ipconfig(addr4=..., gw4=...) sets a static address (ifconfig()'s, with DNS from
        network.ipconfig(dns=...))."""
        self._need_sta()
        if args and kwargs:
            raise TypeError("either pos or kw args are allowed")
        ip, mask, gateway, dns = self.ifconfig()
        if kwargs:
            for name, value in kwargs.items():
                if name == "addr4":
                    ip, mask = value if isinstance(value, tuple) else _split_cidr(value)
                elif name == "gw4":
                    gateway = value
                elif name not in ("dhcp4", "autoconf6"):
                    raise ValueError("unexpected key")
            _sta.static = None if kwargs.get("dhcp4") else (ip, mask, gateway, _resolver() or dns)
            return None
        if len(args) != 1:
            raise TypeError("one parameter or key=value pairs")
        name = args[0]
        if name == "addr4":
            return (ip, mask)
        if name == "gw4":
            return gateway
        if name == "dhcp4":
            return _sta.static is None
        if name == "has_dhcp4":
            return True
        if name == "addr6":
            return []
        raise ValueError("unexpected key")

    def config(self, *args, **kwargs):
        if args and kwargs:
            raise TypeError("either pos or kw args are allowed")
        for name, value in kwargs.items():
            if name == "reconnects":
                _sta.reconnects = max(-1, int(value))
            elif name == "pm":
                if value not in (WLAN.PM_NONE, WLAN.PM_PERFORMANCE, WLAN.PM_POWERSAVE):
                    raise ValueError("invalid power management mode")
                _sta.pm = value
            elif name in ("dhcp_hostname", "hostname"):
                hostname(value)
            elif name == "channel":
                if not 1 <= value <= 14:
                    raise ValueError("invalid channel")
                if _sta.joined >= 0:
                    raise OSError("the station follows its access point's channel while connected")
                _sta.channel = value
                _radio()
            elif name not in ("txpower", "mac", "ssid", "security", "key"):
                raise ValueError("unknown config param")
        if not args:
            return None
        name = args[0]
        if name == "mac":
            return _mac()
        if name in ("ssid", "essid"):
            return _sta.ssid or ""
        if name == "channel":
            _update()
            return channel()
        if name in ("dhcp_hostname", "hostname"):
            return _hostname
        if name == "reconnects":
            return _sta.reconnects
        if name == "txpower":
            return 20
        if name == "pm":
            return _sta.pm
        raise ValueError("unknown config param")

    def scan(self):
        """What an all-channel scan finds: the access point while it is up (the scan takes its time)."""
        self._need_sta()
        if not _sta.active:
            raise OSError("STA must be active")
        time.sleep_ms(int(_SCAN_S * 1000))
        up, _gen, _since = _ap()
        if not up:
            return []
        ssid = _model.get("ssid") or _sta.ssid or "vboard"
        return [(ssid.encode(), _BSSID, _CHANNEL, -55, AUTH_WPA2_PSK, False)]

    def _need_sta(self):
        if not self._sta:
            raise OSError("STA required")


def _interface(sta):
    made = object.__new__(WLAN)
    made._sta = sta
    return made


def _split_cidr(text):
    """ "192.168.4.50/24" -> ("192.168.4.50", "255.255.255.0")."""
    ip, _, bits = text.partition("/")
    n = int(bits or 32)
    mask = (0xFFFFFFFF << (32 - n)) & 0xFFFFFFFF
    return ip, ".".join(str((mask >> shift) & 0xFF) for shift in (24, 16, 8, 0))


_dns = ["0.0.0.0"]  # network.ipconfig(dns=...): the system's resolver


def _resolver():
    """The resolver network.ipconfig(dns=...) set, or None."""
    return _dns[0] if _dns[0] != "0.0.0.0" else None


def ipconfig(*args, **kwargs):
    """network.ipconfig(): the settings of the whole stack (MicroPython 1.24 on): "dns" and "prefer"."""
    if args and kwargs:
        raise TypeError("either pos or kw args are allowed")
    for name, value in kwargs.items():
        if name == "dns":
            _dns[0] = value
        elif name != "prefer":
            raise ValueError("unexpected key")
    if not args:
        return None
    if args[0] == "dns":
        return _resolver() or WLAN(STA_IF).ifconfig()[3]
    if args[0] == "prefer":
        return 4
    raise ValueError("unexpected key")


_INTERFACES = (_interface(True), _interface(False))
