"""The link's window: frames in flight bounded by a count (what the selective ack can name) and by the bytes of
one send buffer, whatever the frames' sizes; frames held past a gap in one buffer of the same size, packed down
when full; a selective ack of up to two bytes, of which a peer that knows one byte reads the first eight
frames right (docs/link-protocol.md)."""

from __future__ import annotations

from dlink import frame
from dlink.link import WINDOW, Link
from tests.unit.dlink.test_link import write_all, written
from tools.link_sim import Line, pump

BUFFER = 1920  # dlink/link.py _BUFFER: eight full frames


def up_pair(baud: int = 921600, **options: int) -> tuple[Link, Link, int]:
    a, b = Link(7, baud=baud, **options), Link(9, baud=baud, **options)
    line = Line(a, b, baud=baud)
    line.run(100)
    return a, b, line.now


def received(end: Link) -> bytes:
    """Everything the endpoint has passed on on the MQTT channel, read until none is left."""
    out = bytearray()
    buf = bytearray(512)
    while n := end.readinto(frame.MQTT, buf):
        out += buf[:n]
    return bytes(out)


def sack_of(ack_frame: bytes) -> tuple[int, bytes]:
    dec = frame.Decoder()
    pos = 0
    while pos < len(ack_frame):
        pos += dec.feed(ack_frame, pos)
        if dec.ready == frame.Decoder.FRAME:
            assert dec.ftype == frame.ACK
            return int(dec.ack), bytes(dec.raw[6 : 6 + dec.payload_len])
    raise AssertionError("no frame")


def test_small_frames_fill_a_window_of_more_than_eight_frames() -> None:
    # A noisy line shrinks frames to 32 bytes: eight of them would leave a 921600-baud line idle for most of a
    # round trip through a host. The window counts up to WINDOW frames while their bytes fit the buffer.
    a, _, now = up_pair(min_payload=32)
    a.tx.payload = 32
    frames, sent = write_all(a, bytes(5000), now)
    assert WINDOW > 8 and len(frames) == WINDOW and a.pending() == WINDOW
    assert sent == 32 * WINDOW  # each frame cut at 32 bytes, and nothing more taken


def test_full_frames_are_bounded_by_the_buffer_not_the_count() -> None:
    a, _, now = up_pair()
    a.tx.payload = frame.MAX_PAYLOAD
    frames, sent = write_all(a, bytes(20000), now)
    assert len(frames) == BUFFER // frame.MAX_PAYLOAD == a.pending()
    assert sent == BUFFER
    assert not a.can_send() and a.send(frame.MQTT, b"x") == 0


def test_the_send_buffer_is_reused_round_its_end_as_acks_free_it() -> None:
    # Frames of 200 bytes: 14 fit, the 15th needs the ring's start, free only when the first frames are acked.
    a, b, now = up_pair(rx_size=4096)  # (room for everything the test feeds b before reading it)
    a.tx.payload = 200
    a.tx.min_payload = 200
    data = bytes(i % 251 for i in range(40000))
    first, sent = write_all(a, data, now)
    assert len(first) == BUFFER // 200 and sent == len(first) * 200
    for f in first[:3]:
        b.feed(f, now + 5000)
    got = bytearray(600)
    assert b.readinto(frame.MQTT, got) == 600 and bytes(got) == data[:600]
    for f in written(b, now + 5001):
        a.feed(f, now + 5002)
    a.tx.payload = 200  # (the acks grew it: frames of the same size, for the count below)
    more, sent2 = write_all(a, data[sent:], now + 5003)
    assert len(more) == 3 and sent2 == 600  # the three acked frames' room, at the ring's start
    for f in first[3:] + more:
        b.feed(f, now + 9000)
    assert received(b) == data[600 : sent + sent2]


def test_a_gap_more_than_eight_frames_back_is_named_in_a_two_byte_selective_ack() -> None:
    a, b, now = up_pair(min_payload=32)
    a.tx.payload = 32
    frames, _ = write_all(a, bytes(range(256)) * 20, now)
    assert len(frames) == WINDOW
    for f in frames[1:]:  # the first frame is lost on the line
        b.feed(f, now + 30000)
    acks = written(b, now + 30001)
    ack, held = sack_of(acks[0])
    assert ack == 0 and len(held) == 2
    assert int.from_bytes(held, "little") == ((1 << WINDOW) - 1) & ~1  # every frame but the first is held
    for f in acks:
        a.feed(f, now + 30002)
    again = written(a, now + 30003)
    assert again == [frames[0]] and a.retransmissions == 1 and a.timeouts == 0


def test_a_one_byte_selective_ack_from_an_older_peer_is_read() -> None:
    a, _, now = up_pair(min_payload=32)
    a.tx.payload = 32
    frames, _ = write_all(a, bytes(2000), now)
    out = bytearray(frame.WIRE_MAX)
    n = frame.encode(out, frame.ACK, 0, 0, 0, a.peer_epoch, bytes([0b110]))  # holds frames 1 and 2, not 0
    a.feed(out[:n], now + 30000)
    assert written(a, now + 30001) == [frames[0]]  # frame 0, written before frames it holds, was lost


def test_held_frames_are_packed_down_when_the_held_buffer_is_full_and_never_dropped() -> None:
    # The reader is slow (a 256-byte buffer): in-order frames wait in the held buffer, which fills up to its
    # top while frames below leave; new frames then need the held frames packed down. A frame that found no
    # room would be dropped and sent again: there must be none.
    a, b = Link(7, baud=921600), Link(9, baud=921600, rx_size=256)
    line = Line(a, b, baud=921600)
    line.run(100)
    a.tx.payload = a.tx.min_payload = 200
    data = bytes((i * 7) % 253 for i in range(30000))
    got = bytearray()
    buf = bytearray(60)
    sent = 0
    while len(got) < len(data) and line.now < 100000:
        while sent < len(data) and (n := a.send(frame.MQTT, data[sent:])):
            sent += n
        line.step()
        got += buf[: b.readinto(frame.MQTT, buf)]  # 60 bytes a millisecond: slower than the line
    assert bytes(got) == data
    assert a.retransmissions == 0 and a.timeouts == 0


def test_a_peer_with_a_window_of_eight_gets_every_stream_whole_over_a_noisy_line() -> None:
    # An older receiver (window 8) holds at most 7 frames past a gap and drops later ones: they are found lost
    # or probed, and written again; nothing is corrupted, nothing missing.
    a, b = Link(7, baud=921600), Link(9, baud=921600, window=8)
    line = Line(a, b, baud=921600, ber=1e-4, drop=5e-5, seed=8)
    line.run(100)
    a.tx.payload = a.tx.min_payload = 32
    data = bytes((i * 13) % 256 for i in range(20000))
    assert pump(line, a, b, frame.MQTT, data, 60000) == data
    assert a.retransmissions > 0


def test_a_waiting_frame_grows_with_the_payload_size_but_never_into_an_unacknowledged_one() -> None:
    a, b, now = up_pair(rx_size=4096)  # (room for everything the test feeds b before reading it)
    a.tx.payload = a.tx.min_payload = 200
    data = bytes(i % 249 for i in range(6000))
    first, sent = write_all(a, data, now)
    assert len(first) == BUFFER // 200  # 9 frames, 120 bytes left at the ring's end
    b.feed(first[0], now + 100)
    for f in written(b, now + 101):
        a.feed(f, now + 102)  # the first frame acknowledged: 200 bytes free at the ring's start
    a.tx.payload = 200
    assert a.send(frame.MQTT, data[sent : sent + 150]) == 150  # a new frame at the ring's start, not yet written
    sent += 150
    a.tx.payload = 100  # (an ack's growth would not shrink it: the size now allows less than it holds)
    assert a.send(frame.MQTT, data[sent:]) == 0
    a.tx.payload = 240  # acks came while it waited: it may grow, but only to the second frame's start (200)
    assert a.send(frame.MQTT, data[sent:]) == 50 and not a.can_send()
    sent += 50
    last = written(a, now + 103)
    assert len(last) == 1
    for f in first[1:] + last:
        b.feed(f, now + 200)
    assert received(b) == data[:sent]


def test_the_simulated_line_delays_each_way_by_its_delay() -> None:
    # tools/link_sim.Line(delay_ms=...) models the hosts' round trip in tools/bench_link.py's window table.
    arrival = []
    for delay in (0, 5):
        a, b = Link(7, baud=921600), Link(9, baud=921600)
        line = Line(a, b, baud=921600, delay_ms=delay)
        line.run(300)
        a.send(frame.MQTT, b"x" * 40)
        start = line.now
        while not b.available(frame.MQTT):
            line.step()
        arrival.append(line.now - start)
    assert arrival[1] - arrival[0] == 5


def test_a_frame_waiting_for_the_line_wakes_its_writer_as_soon_as_the_line_is_free() -> None:
    # The board's transport polls the link, finds the line busy, then asks next_wakeup() how long it may sleep.
    # If the line has freed up in between, the answer is now: a board once slept a whole second (its wait's
    # limit) with a frame ready and the line idle (figure 3's clean 512-byte QoS 0 run at 115200 baud).
    a, b, now = up_pair(baud=115200)
    a.tx.payload = frame.MAX_PAYLOAD
    first, _ = write_all(a, bytes(240), now)
    for f in first:
        b.feed(f, now + 50)
    for f in written(b, now + 51):
        a.feed(f, now + 52)  # acknowledged: nothing in flight, no timer
    assert a.send(frame.MQTT, bytes(240)) == 240
    assert len(written(a, now + 60)) == 1  # written at once: the line was free
    assert a.send(frame.MQTT, bytes(240)) == 240
    assert written(a, now + 61) == []  # queued: the first frame (22 ms at 115200) still leaves the UART
    assert a.next_wakeup(now + 61) > 0
    assert a.next_wakeup(now + 75) == 0  # the line has freed up since that poll: write now, not at some timeout
