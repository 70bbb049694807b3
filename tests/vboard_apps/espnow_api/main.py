# ESP-NOW's rules on one board, alone on the air: each line says what a call did (its error's name, or its result).
import espnow
import network


def said(what, call, *args, **kwargs):
    try:
        result = call(*args, **kwargs)
    except OSError as exc:
        result = exc.args[1] if len(exc.args) > 1 else exc.args[0]
    except ValueError:
        result = "ValueError"
    print(what, result)


e = espnow.ESPNow()
peer = b"\x24\xd7\xeb\x00\x00\x99"
said("inactive send", e.send, peer, b"x")
said("inactive add", e.add_peer, peer)
print("singleton", espnow.ESPNow() is not None and espnow.ESPNow().active() == e.active())
e.active(True)
said("no interface", e.send, peer, b"x")
sta = network.WLAN(network.STA_IF)
sta.active(True)
said("unregistered", e.send, peer, b"x")
e.add_peer(peer)
said("again", e.add_peer, peer)
said("too long", e.send, peer, b"x" * 251)
said("nobody there", e.send, peer, b"x" * 250)
said("not waiting", e.send, peer, b"x", False)
bcast = b"\xff" * 6
e.add_peer(bcast)
said("broadcast", e.send, bcast, b"hello")
said("broadcast encrypted", e.mod_peer, bcast, b"0123456789abcdef", encrypt=True)
print("stats", e.stats())
for i in range(18):
    e.add_peer(bytes((2, 0, 0, 0, 1, i)))
said("full", e.add_peer, bytes((2, 0, 0, 0, 2, 0)))
print("count", e.peer_count())
for i in range(18):
    e.del_peer(bytes((2, 0, 0, 0, 1, i)))
for i in range(6):
    e.add_peer(bytes((2, 0, 0, 0, 3, i)), b"0123456789abcdef")
said("encrypted full", e.add_peer, bytes((2, 0, 0, 0, 3, 9)), lmk=b"0123456789abcdef", encrypt=True)
print("count", e.peer_count())
said("deleted twice", e.del_peer, bytes((2, 0, 0, 0, 4, 0)))
print("peer", e.get_peer(peer))
sta.config(channel=6)
e.mod_peer(peer, channel=3)
said("other channel", e.send, peer, b"x")
print("channel", sta.config("channel"))
print("nothing", e.recv(0), e.irecv(50), e.recvinto([None, bytearray(250)], 0), e.any())
e.config(timeout_ms=20, rxbuf=1024)
print("config", e.config("timeout_ms"), e.config("rxbuf"))
print("iterated", next(iter(e)))
print(
    "constants",
    espnow.MAX_DATA_LEN,
    espnow.KEY_LEN,
    espnow.ADDR_LEN,
    espnow.MAX_TOTAL_PEER_NUM,
    espnow.MAX_ENCRYPT_PEER_NUM,
)
e.active(False)
said("after", e.get_peers)
