# espnow module shim for the virtual board: the ESP32 port's ESP-NOW (its C module _espnow and the frozen espnow.py
# over it, one class here), over the air the host runs (vair.py, host_bridge/vboard/air.py).
#
# As on the ESP32 port: ESPNow() is one object (every call gives the same state); active(True) allocates the
# receive buffer (`rxbuf` bytes, in the heap as the port's does); a frame is at most 250 bytes; up to 20 peers, 6
# of them encrypted; errors are OSError(code, "ESP_ERR_ESPNOW_...") with ESP-IDF's codes; send() and recv() need the
# WiFi station active (ESP_ERR_ESPNOW_IF), and send on the radio's channel: the station's (its access point's
# once associated, else what WLAN.config(channel=) set, 1 at first). A sync send answers whether every peer's radio
# acknowledged. A frame heard while the buffer is full is dropped and counted (stats()[4]), acknowledged all the
# same. What differs from a chip is listed in docs/virtual-board.md ("ESP-NOW").
import io
import struct
import sys
import time

import network
import vair
import vboard_state

MAX_DATA_LEN = 250
KEY_LEN = 16
ADDR_LEN = 6
MAX_TOTAL_PEER_NUM = 20
MAX_ENCRYPT_PEER_NUM = 6

# ESP-IDF's codes (esp_now.h): ESP_ERR_ESPNOW_BASE is ESP_ERR_WIFI_BASE (0x3000) + 100.
_ERRORS = {
    "ESP_ERR_ESPNOW_NOT_INIT": 0x3065,
    "ESP_ERR_ESPNOW_ARG": 0x3066,
    "ESP_ERR_ESPNOW_NO_MEM": 0x3067,
    "ESP_ERR_ESPNOW_FULL": 0x3068,
    "ESP_ERR_ESPNOW_NOT_FOUND": 0x3069,
    "ESP_ERR_ESPNOW_INTERNAL": 0x306A,
    "ESP_ERR_ESPNOW_EXIST": 0x306B,
    "ESP_ERR_ESPNOW_IF": 0x306C,
    "ESP_ERR_ESPNOW_CHAN": 0x306D,
}
_RXBUF = 528  # the port's default (1.29): two 250-byte frames with their headers
_TIMEOUT_MS = 300000
# What a frame takes of the receive buffer besides its bytes (the port's ring holds a header, the sender's address
# and the frame's RSSI and time): length u8, MAC 6, RSSI i8, time u32.
_ENTRY = 12
_ENCRYPTED = 1
_DEFAULT_PMK = b"PMK1233443433245"  # (any 16 bytes: both ends default to the same one, as ESP-IDF's do)
_POLLIN = 1
_POLLOUT = 4
_STREAM_POLL = 3


def _fail(name):
    raise OSError(_ERRORS[name], name)


def _mac_of(mac):
    if not isinstance(mac, (bytes, bytearray)) or len(mac) != ADDR_LEN:
        raise ValueError("invalid peer MAC address")
    return bytes(mac)


def _key(key):
    if isinstance(key, str):
        key = key.encode()
    if not isinstance(key, (bytes, bytearray)) or len(key) != KEY_LEN:
        raise ValueError("key must be bytes of length KEY_LEN")
    return bytes(key)


def _tag(pmk, lmk):
    """What the receiver's keys must match to read an encrypted frame (CCMP on a chip; a digest here)."""
    import hashlib

    return hashlib.sha256(pmk + lmk).digest()[:4]


class _State:
    """ESP-NOW's state, one for the board (C statics on a chip): made at import, before the firmware's heap is
    pinned, but for the receive buffer active(True) allocates."""

    def __init__(self):
        self.active = False
        self.rxbuf = _RXBUF
        self.timeout_ms = _TIMEOUT_MS
        self.rate = -1
        self.ring = None  # bytearray(rxbuf) while active
        self.used = 0
        self.peers = {}  # mac -> [mac, lmk, channel, ifidx, encrypt]
        self.pmk = _DEFAULT_PMK
        self.table = {}  # peers_table: mac -> [rssi, time_ms]
        self.keys = {}  # mac -> the table's key object (recv() gives that one, as the port does)
        self.stats = [0, 0, 0, 0, 0]
        self.callback = None
        self.none = (None, None)
        # The last frame recvinto() gave the firmware: its source, and the host's clock and the emulated hardware's
        # time then (an answer's turnaround, below).
        self.heard = None


_state = _State()


def _heard(frame):
    """vair's receiver: a frame heard (source 6, RSSI i8, channel, flags, key tag 4, payload) goes into the receive
    buffer, or is dropped when it does not fit (or cannot be decrypted)."""
    s = _state
    s.stats[3] += 1
    n = len(frame) - 13
    if frame[8] & _ENCRYPTED:
        peer = s.peers.get(bytes(frame[:6]))
        if peer is None or not peer[4] or _tag(s.pmk, peer[1]) != bytes(frame[9:13]):
            s.stats[4] += 1  # not ours to read (no key for it, or not the sender's)
            return
    if s.used + _ENTRY + n > len(s.ring):
        s.stats[4] += 1
        return
    ring, at = s.ring, s.used
    ring[at] = n
    ring[at + 1 : at + 7] = frame[:6]
    ring[at + 7] = frame[6]
    struct.pack_into("<I", ring, at + 8, time.ticks_ms() & 0xFFFFFFFF)
    ring[at + _ENTRY : at + _ENTRY + n] = frame[13:]
    s.used = at + _ENTRY + n


def _need_active():
    if not _state.active:
        _fail("ESP_ERR_ESPNOW_NOT_INIT")


def _need_interface():
    if not network.WLAN(network.STA_IF).active():
        _fail("ESP_ERR_ESPNOW_IF")


def _peer_args(mac, args, kwargs, peer):
    names = ("lmk", "channel", "ifidx", "encrypt")
    if len(args) > len(names):
        raise TypeError("too many peer parameters")
    values = {}
    for i in range(len(args)):
        values[names[i]] = args[i]
    for name, value in kwargs.items():
        if name not in names:
            raise ValueError("unknown peer parameter")
        values[name] = value
    if "lmk" in values:
        lmk = values["lmk"]
        peer[1] = _key(lmk) if lmk else b""
        if "encrypt" not in values:
            peer[4] = bool(peer[1])
    if "channel" in values:
        if not 0 <= values["channel"] <= 14:
            raise ValueError("channel must be 0 to 14")
        peer[2] = values["channel"]
    if "ifidx" in values:
        if values["ifidx"] not in (network.STA_IF, network.AP_IF):
            raise ValueError("ifidx must be STA_IF or AP_IF")
        peer[3] = values["ifidx"]
    if "encrypt" in values:
        peer[4] = bool(values["encrypt"])
    if peer[4] and not peer[1]:
        raise ValueError("an encrypted peer needs its lmk")
    if peer[4] and mac[0] & 1:
        _fail("ESP_ERR_ESPNOW_ARG")  # (no encryption to broadcast or multicast addresses)


class ESPNow(io.IOBase):
    """The board's ESP-NOW interface: every instance shares its one state. A stream to select.poll and asyncio's
    IOQueue (ioctl), as the port's object is."""

    _data = [None, bytearray(MAX_DATA_LEN)]  # irecv()'s result, used again at every call (as the port's)

    @property
    def peers_table(self):
        return _state.table

    def active(self, flag=None):
        s = _state
        if flag is None:
            return s.active
        if flag and not s.active:
            s.ring = bytearray(s.rxbuf)
            s.used = 0
            s.active = True
            vair.receiver(_heard)
        elif not flag and s.active:
            vair.receiver(None)
            s.active = False
            s.ring = None
            s.used = 0
            s.peers.clear()  # (esp_now_deinit forgets the peers)
        return s.active

    def config(self, *args, **kwargs):
        s = _state
        if args and kwargs:
            raise TypeError("either one parameter or key=value pairs")
        for name, value in kwargs.items():
            if name == "rxbuf":
                s.rxbuf = int(value)
            elif name == "timeout_ms":
                s.timeout_ms = int(value)
            elif name == "rate":
                _need_active()
                s.rate = int(value)
            else:
                raise ValueError("unknown config param")
        if not args:
            return None
        if args[0] == "rxbuf":
            return s.rxbuf
        if args[0] == "timeout_ms":
            return s.timeout_ms
        raise ValueError("unknown config param")

    def set_pmk(self, pmk):
        _state.pmk = _key(pmk)

    # -- peers -------------------------------------------------------------------------------------------------

    def add_peer(self, mac, *args, **kwargs):
        _need_active()
        mac = _mac_of(mac)
        s = _state
        if mac in s.peers:
            _fail("ESP_ERR_ESPNOW_EXIST")
        if len(s.peers) >= MAX_TOTAL_PEER_NUM:
            _fail("ESP_ERR_ESPNOW_FULL")
        peer = [mac, b"", 0, network.STA_IF, False]
        _peer_args(mac, args, kwargs, peer)
        if peer[4] and self.peer_count()[1] >= MAX_ENCRYPT_PEER_NUM:
            _fail("ESP_ERR_ESPNOW_FULL")
        s.peers[mac] = peer

    def del_peer(self, mac):
        _need_active()
        mac = _mac_of(mac)
        if _state.peers.pop(mac, None) is None:
            _fail("ESP_ERR_ESPNOW_NOT_FOUND")

    def mod_peer(self, mac, *args, **kwargs):
        _need_active()
        mac = _mac_of(mac)
        peer = _state.peers.get(mac)
        if peer is None:
            _fail("ESP_ERR_ESPNOW_NOT_FOUND")
        changed = list(peer)
        _peer_args(mac, args, kwargs, changed)
        if changed[4] and not peer[4] and self.peer_count()[1] >= MAX_ENCRYPT_PEER_NUM:
            _fail("ESP_ERR_ESPNOW_FULL")
        peer[:] = changed

    def get_peer(self, mac):
        _need_active()
        peer = _state.peers.get(_mac_of(mac))
        if peer is None:
            _fail("ESP_ERR_ESPNOW_NOT_FOUND")
        return tuple(peer)

    def get_peers(self):
        _need_active()
        return tuple(tuple(p) for p in _state.peers.values())

    def peer_count(self):
        _need_active()
        peers = _state.peers.values()
        return (len(peers), sum(1 for p in peers if p[4]))

    # -- sending -----------------------------------------------------------------------------------------------

    def send(self, mac, msg=None, sync=True):
        # The whole call is the emulation's time (C and the radio's on a chip), its Python bookkeeping included.
        began = time.ticks_us()
        try:
            if msg is None:
                msg, mac = mac, None  # send(msg): to every registered peer
            _need_active()
            _need_interface()
            if isinstance(msg, str):
                msg = msg.encode()
            if len(msg) > MAX_DATA_LEN:
                raise ValueError("msg too long")
            s = _state
            if mac is None:
                ok = True
                for peer in list(s.peers.values()):
                    if not peer[0][0] & 1:
                        ok = self._send_to(peer, msg, sync, began) and ok
                return ok
            peer = s.peers.get(_mac_of(mac))
            if peer is None:
                _fail("ESP_ERR_ESPNOW_NOT_FOUND")
            return self._send_to(peer, msg, sync, began)
        finally:
            vboard_state.emulated_us += time.ticks_diff(time.ticks_us(), began)

    def _send_to(self, peer, msg, sync, began):
        s = _state
        home = network.channel()
        if peer[2] and peer[2] != home:
            _fail("ESP_ERR_ESPNOW_CHAN")  # "Peer channel is not equal to the home channel, send fail!"
        heard = s.heard
        if heard is not None and heard[0] == peer[0]:
            # An answer to the frame last taken from this peer: the interpreter's work between them (the emulated
            # hardware's, a journal's flash programs among it, left out), which the air keeps for the bench.
            s.heard = None
            vair.turnaround(time.ticks_diff(began, heard[1]) - (vboard_state.emulated_us - heard[2]))
        encrypted = peer[4]
        tag = _tag(s.pmk, peer[1]) if encrypted else b"\0\0\0\0"
        s.stats[0] += 1
        acked = vair.send(peer[0], _ENCRYPTED if encrypted else 0, tag, msg, sync)
        if sync and not peer[0][0] & 1:
            s.stats[1 if acked else 2] += 1
        return acked if sync else True

    # -- receiving ---------------------------------------------------------------------------------------------

    def any(self):
        _need_active()
        vair.pump(0)
        return _state.used > 0

    def recvinto(self, data, timeout_ms=None):
        # The whole call is the emulation's time: C on a chip, and the radio's wait, when the CPU waits on an event.
        began = time.ticks_us()
        try:
            return self._recvinto(data, timeout_ms)
        finally:
            vboard_state.emulated_us += time.ticks_diff(time.ticks_us(), began)
            if _state.heard is not None and _state.heard[1] is None:
                _state.heard[1:] = [time.ticks_us(), vboard_state.emulated_us]

    def _recvinto(self, data, timeout_ms):
        _need_active()
        _need_interface()
        s = _state
        if timeout_ms is None:
            timeout_ms = s.timeout_ms
        began = time.ticks_ms()
        vair.pump(0)
        while not s.used:
            left = -1 if timeout_ms < 0 else timeout_ms - time.ticks_diff(time.ticks_ms(), began)
            if timeout_ms >= 0 and left <= 0:
                return 0
            _wait(1000 if left < 0 else min(left, 1000))
        ring = s.ring
        n = ring[0]
        mac = ring_mac = bytes(ring[1:7])
        entry = s.table.get(mac)
        if entry is None:
            s.table[mac] = entry = [0, 0]
            s.keys[mac] = mac
        else:
            mac = s.keys[mac]
        entry[0] = struct.unpack_from("b", ring, 7)[0]
        entry[1] = struct.unpack_from("<I", ring, 8)[0]
        msg = data[1]
        msg[:] = memoryview(ring)[_ENTRY : _ENTRY + n]
        data[0] = mac
        if len(data) >= 4:
            data[2], data[3] = entry[0], entry[1]
        size = _ENTRY + n
        ring[: s.used - size] = memoryview(ring)[size : s.used]
        s.used -= size
        s.heard = [ring_mac, None, None]  # (its times once the call ends: recvinto())
        return n

    def irecv(self, timeout_ms=None):
        n = self.recvinto(self._data, timeout_ms)
        return self._data if n else _state.none

    def recv(self, timeout_ms=None):
        n = self.recvinto(self._data, timeout_ms)
        return [bytes(x) for x in self._data] if n else _state.none

    def irq(self, callback):
        """`callback(self)` runs soon after a frame is heard: in the board's next wait (as Pin.irq's handlers)."""
        _state.callback = (callback, self) if callback is not None else None
        machine = sys.modules.get("machine")
        if callback is not None and machine is not None:
            machine.watch(_look)

    def on_recv(self, callback, arg=None):
        _state.callback = (callback, self if arg is None else arg) if callback is not None else None
        machine = sys.modules.get("machine")
        if callback is not None and machine is not None:
            machine.watch(_look)

    def stats(self):
        return tuple(_state.stats)

    def __iter__(self):
        return self

    def __next__(self):
        return self.irecv()

    def ioctl(self, request, arg):
        if request != _STREAM_POLL:
            return -1
        ready = arg & _POLLOUT
        if arg & _POLLIN and _state.active:
            vair.pump(0)
            if _state.used:
                ready |= _POLLIN
        return ready


def _wait(ms):
    """Wait for a frame up to `ms`: in slices, as the board's other waits, so that a watchdog or a handler runs."""
    machine = sys.modules.get("machine")
    if machine is not None and machine.watched():
        machine.look()
        vair.pump(min(ms, 10))
    else:
        vair.pump(ms)


def _look():
    """In the board's waits (machine.watch): the irq() callback runs while frames are waiting."""
    s = _state
    if s.callback is None or not s.active:
        return
    vair.pump(0)
    if s.used:
        callback, arg = s.callback
        callback(arg)
