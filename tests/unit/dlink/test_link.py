"""The serial link on CPython: two endpoints over a simulated line that loses, flips and invents bytes.
Streams must arrive complete, in order and uncorrupted; restarts must be noticed."""

from __future__ import annotations

import random

import pytest

from dlink import frame
from dlink.link import UP, Link, timeout_for
from dmqtt import codec
from tools.link_sim import Line, pump


def test_handshake_brings_both_ends_up() -> None:
    a, b = Link(0x1111), Link(0x2222)
    line = Line(a, b)
    line.run(100)
    assert a.state == b.state == UP and a.peer_epoch == 0x2222 and b.peer_epoch == 0x1111


@pytest.mark.parametrize(("ber", "drop"), [(0.0, 0.0), (1e-4, 0.001)])
def test_streams_arrive_whole_and_in_order_over_a_bad_line(ber: float, drop: float) -> None:
    a, b = Link(7), Link(9)
    line = Line(a, b, ber=ber, drop=drop, seed=int(ber * 1e6) + 3)
    line.run(200)
    rng = random.Random(5)
    up = bytes(rng.randrange(256) for _ in range(20000))
    down = bytes(rng.randrange(256) for _ in range(8000))
    assert pump(line, a, b, frame.MQTT, up, 60000) == up
    assert pump(line, b, a, frame.MQTT, down, 60000) == down
    if ber:
        assert a.retransmissions + b.retransmissions > 0 and a.decoder.crc_errors + b.decoder.crc_errors > 0


def test_a_very_bad_line_is_slow_but_never_corrupts() -> None:
    # BER 1e-3: nine full frames in ten are damaged. What gets through is exact and in order.
    a, b = Link(7), Link(9)
    line = Line(a, b, ber=1e-3, drop=0.005, seed=11)
    line.run(200)
    data = bytes(random.Random(2).randrange(256) for _ in range(20000))
    got = pump(line, a, b, frame.MQTT, data, 20000)
    assert 0 < len(got) and got == data[: len(got)]
    assert b.decoder.crc_errors > 100


def test_channels_are_separate_streams() -> None:
    a, b = Link(1), Link(2)
    line = Line(a, b)
    line.run(100)
    a.send(frame.CONTROL, b"O 127.0.0.1:1883")
    a.send(frame.MQTT, b"\x10\x0c")
    line.run(50)
    buf = bytearray(64)
    assert bytes(buf[: b.readinto(frame.CONTROL, buf)]) == b"O 127.0.0.1:1883"
    assert bytes(buf[: b.readinto(frame.MQTT, buf)]) == b"\x10\x0c"


def test_a_restarted_peer_is_noticed_and_streams_start_over() -> None:
    a, b = Link(1), Link(2)
    line = Line(a, b)
    line.run(100)
    a.send(frame.MQTT, b"old session bytes")
    line.run(50)
    reborn = Link(3)  # b reboots: new epoch
    line.ends = (a, reborn)
    line.run(300)
    assert a.peer_resets == 1 and a.peer_epoch == 3 and reborn.state == UP
    assert a.available(frame.MQTT) == 0  # nothing of the old peer survives the reset
    assert pump(line, reborn, a, frame.MQTT, b"new session", 1000) == b"new session"


def test_console_text_between_frames_is_passed_on_by_line() -> None:
    a, b = Link(1), Link(2)
    line = Line(a, b)
    line.run(60)
    line.queues[0].extend(b"Traceback (most recent call last):\r\n  boot.py line 3\n")
    line.run(60)
    assert b.lines == ["Traceback (most recent call last):", "  boot.py line 3"]
    assert pump(line, a, b, frame.MQTT, b"x" * 1000, 2000) == b"x" * 1000


def test_full_receive_buffer_is_flow_control_not_loss() -> None:
    a, b = Link(1), Link(2, rx_size=300)
    line = Line(a, b)
    line.run(100)
    data = bytes(range(256)) * 8
    sent = 0
    for _ in range(200):
        sent += a.send(frame.MQTT, data[sent:])
        line.step()
    assert b.available(frame.MQTT) <= 300  # the reader is slow: frames are refused, not buffered without bound
    got = bytearray()
    buf = bytearray(100)
    for _ in range(20000):
        if sent < len(data):
            sent += a.send(frame.MQTT, data[sent:])
        line.step()
        got += buf[: b.readinto(frame.MQTT, buf)]
        if len(got) == len(data):
            break
    assert bytes(got) == data
    assert a.retransmissions == 0  # held by the reader, never resent as lost (at most probed)


def written(end: Link, now: int) -> list[bytes]:
    """Everything the endpoint writes now, frame by frame."""
    out = []
    while (chunk := end.poll(now)) is not None:
        out.append(bytes(chunk))
    return out


def write_all(end: Link, data: bytes, now: int) -> tuple[list[bytes], int]:
    """Hand `data` to the link for 40 ms at 921600 baud, writing every frame the pacing lets go (all that the window
    takes, well before a timeout could resend one): the frames, and how many bytes the link took."""
    frames: list[bytes] = []
    sent = 0
    for t in range(now, now + 40):
        sent += end.send(frame.MQTT, data[sent:])
        frames += written(end, t)
    return frames, sent


def test_a_lost_frame_alone_is_sent_again_at_once_without_a_timeout() -> None:
    a, b = Link(7), Link(9)
    line = Line(a, b)
    line.run(100)
    a.tx.payload = frame.MAX_PAYLOAD
    data = bytes(random.Random(6).randrange(256) for _ in range(900))
    now = line.now
    frames: list[bytes] = []
    sent = 0
    for t in range(now, now + 200):  # written at the pace the baud rate allows
        sent += a.send(frame.MQTT, data[sent:])
        frames += written(a, t)
    data_frames = len(frames)
    assert data_frames >= 3 and sent == len(data)
    for f in frames[1:]:  # the first frame is lost on the line
        b.feed(f, now + 200)
    acks = written(b, now + 201)
    assert acks, "the receiver says at once that it holds frames past a gap"
    for f in acks:
        a.feed(f, now + 202)
    again = written(a, now + 300)
    assert len(again) == 1 and again[0] == frames[0]  # selective repeat: that frame, not the window
    assert a.retransmissions == 1 and a.timeouts == 0
    b.feed(again[0], now + 301)
    got = bytearray()
    buf = bytearray(300)
    while n := b.readinto(frame.MQTT, buf):  # the held frames follow as reading makes room (512-byte buffer)
        got += buf[:n]
    assert bytes(got) == data


def test_small_writes_share_frames_while_the_line_is_busy() -> None:
    a, b = Link(7), Link(9)
    line = Line(a, b)
    line.run(100)
    packet = bytes(range(74))  # a 64-byte telemetry PUBLISH with a topic alias, written one at a time
    frames_before = a.frames_out
    got = bytearray()
    buf = bytearray(512)
    data = packet * 200
    sent = 0
    while len(got) < len(data) and line.now < 20000:
        while sent < len(data) and (n := a.send(frame.MQTT, data[sent : sent + 74 - sent % 74])):
            sent += n
        line.step()
        got += buf[: b.readinto(frame.MQTT, buf)]
    assert bytes(got) == data
    frames = a.frames_out - frames_before
    # 14,800 bytes in 240-byte frames would be 62; a frame per write would be 200. Pure ACKs are few.
    assert frames < 80, frames
    assert a.retransmissions == 0


def test_pacing_keeps_at_most_a_frame_and_a_half_waiting_in_the_uart() -> None:
    a, b = Link(7), Link(9)
    line = Line(a, b)
    line.run(100)
    a.tx.payload = frame.MAX_PAYLOAD
    data = bytes(5000)
    sent = 0

    def fill() -> None:
        nonlocal sent
        while a.can_send():
            sent += a.send(frame.MQTT, data[sent:])

    fill()
    assert len(written(a, line.now)) == 1  # one full frame; the next is cut but held back
    fill()
    assert written(a, line.now + 10) == []  # 10 ms later more than half of it (22 ms at 115200) is still going out
    assert len(written(a, line.now + 13)) == 1  # less than half: the next one joins the queue


def test_timeout_follows_the_baud_rate() -> None:
    assert timeout_for(115200) > timeout_for(921600)
    # 254-byte frames at 115200: 22 ms each; a window of 4 out and back, twice, plus the margin
    assert timeout_for(115200) == 2 * 5 * 22 + 60


def test_frames_shrink_on_a_bad_line_and_grow_back_on_a_clean_one() -> None:
    a, b = Link(7), Link(9)
    line = Line(a, b, ber=1e-3, drop=5e-4, seed=4)
    line.run(200)
    data = bytes(random.Random(4).randrange(256) for _ in range(40000))
    got = pump(line, a, b, frame.MQTT, data[:4000], 60000)
    assert got == data[:4000]
    assert a.tx.payload <= 64  # halved at timeouts, towards MIN_PAYLOAD
    line.ber = line.drop = 0.0
    got = pump(line, a, b, frame.MQTT, data[4000:], 60000)
    assert got == data[4000:]
    assert a.tx.payload == frame.MAX_PAYLOAD  # eight bytes more per acknowledged frame


def test_fixed_frames_when_min_payload_is_the_maximum() -> None:
    a, b = Link(7, min_payload=frame.MAX_PAYLOAD), Link(9)
    line = Line(a, b, ber=1e-3, drop=5e-4, seed=4)
    line.run(200)
    got = pump(line, a, b, frame.MQTT, bytes(3000), 30000)
    assert got == bytes(len(got)) and a.retransmissions > 0 and a.tx.payload == frame.MAX_PAYLOAD
    with pytest.raises(ValueError):
        Link(7, min_payload=0)


def test_timeout_comes_down_to_the_round_trip_and_backs_off_when_nothing_comes_back() -> None:
    a, b = Link(7), Link(9)
    line = Line(a, b)
    line.run(200)
    ceiling = timeout_for(115200)
    assert a.timer.ms == ceiling  # no sample yet
    data = bytes(random.Random(5).randrange(256) for _ in range(20000))
    assert pump(line, a, b, frame.MQTT, data, 20000) == data
    assert a.timer.min_ms <= a.timer.ms < ceiling // 2, a.timer.ms  # a clean line's round trip
    line.drop = 1.0  # the cable goes dead: every timeout doubles the next one, up to the ceiling
    a.send(frame.MQTT, bytes(100))
    line.run(3000)
    assert a.timer.ms == ceiling and a.retransmissions >= 3


def test_a_damaged_frame_is_noise_never_console_text() -> None:
    """A frame whose first byte the line damaged is not a frame; it must not come out as console text either,
    since it may carry a CONNECT's password. Real console text still does."""
    a, b = Link(1), Link(2)
    line = Line(a, b)
    line.run(100)
    password = b"hunter2-secret"
    connect = codec.encode_connect("board-1", username="u", password=password, version=codec.V311)
    wire = bytearray()
    a.send(frame.MQTT, connect)
    while (chunk := a.poll(line.now)) is not None:
        wire += chunk
    assert wire.count(b"\x00\x01") >= 1
    damaged = bytearray(wire)
    damaged[damaged.index(b"\x00\x01") + 1] ^= 0x40  # the frame's leading 0x01 is hit
    b.feed(b"booting...\n" + bytes(damaged) + b"\x00" + b"console after\n", line.now)
    assert b.lines == ["booting...", "console after"]
    assert all(password.decode() not in text for text in b.lines)
    assert sum(b.noise) >= len(connect) and b.decoder.noise_bytes == sum(b.noise)


def test_a_board_about_to_erase_hushes_its_peer_until_it_resumes() -> None:
    """Before a sector erase the board hushes the link: it writes PAUSE and then nothing; the peer answers QUIET,
    its last frame, and then writes nothing at all, not a frame it holds nor an ack nor a retransmission however
    overdue, until the board's next frame (RESUME); a pause whose RESUME was lost ends by itself."""
    board, bridge = Link(7), Link(9)
    line = Line(board, bridge)
    line.run(100)
    now = line.now
    assert bridge.send(frame.MQTT, b"x" * 40) == 40
    lost = written(bridge, now)  # in flight to the board, and lost on the line
    assert len(lost) == 1
    board.hush()
    pause = written(board, now + 1)
    assert [kind(f) for f in pause] == [frame.PAUSE] and not board.quiet
    assert written(board, now + 2) == []  # hushed: nothing more, not even an ack
    assert bridge.send(frame.MQTT, b"for later") > 0
    bridge.feed(pause[0], now + 2)
    quiet = written(bridge, now + 3)
    assert [kind(f) for f in quiet] == [frame.QUIET]  # ahead of the frame it holds
    board.feed(quiet[0], now + 4)
    assert board.quiet
    # The first frame is long overdue (its timeout is at most 280 ms): the paused side writes nothing.
    assert written(bridge, now + 400) == [] and bridge.pauses == 1
    board.unhush(now + 450)
    resume = written(board, now + 450)
    assert kind(resume[0]) == frame.RESUME
    bridge.feed(resume[0], now + 451)
    after = written(bridge, now + 452)
    assert frame_payloads(after) == [b"for later"]  # and the lost frame after its own timeout, from now on
    assert bridge.timeouts == 0
    board.hush()  # a pause whose RESUME never comes
    bridge.feed(written(board, now + 500)[0], now + 500)
    assert [kind(f) for f in written(bridge, now + 501)] == [frame.QUIET]
    assert written(bridge, now + 999) == []
    assert bridge.next_wakeup(now + 999) == 2  # resumed by itself 500 ms after it paused: the two frames
    written(bridge, now + 1001)
    assert frame_payloads(written(bridge, now + 1001 + bridge.timer.clean_ms)) == [b"x" * 40]  # go again in time


def kind(wire: bytes) -> int:
    """The type of the one frame in these bytes."""
    dec = frame.Decoder()
    pos = 0
    while pos < len(wire):
        pos += dec.feed(wire, pos)
        if dec.ready == frame.Decoder.FRAME:
            return int(dec.ftype)
    raise AssertionError(f"no frame in {wire.hex()}")


def frame_payloads(frames: list[bytes]) -> list[bytes]:
    """The payloads of the DATA frames among these."""
    dec = frame.Decoder()
    out = []
    for f in frames:
        pos = 0
        while pos < len(f):
            pos += dec.feed(f, pos)
            if dec.ready == frame.Decoder.FRAME and dec.ftype == frame.DATA:
                out.append(bytes(dec.raw[6 : 6 + dec.payload_len]))
    return out


def measured_pair() -> tuple[Link, Link, int]:
    """Two endpoints at 921600 baud, the first with its round trips measured (20 frames acknowledged), and the
    time then."""
    a, b = Link(7, baud=921600), Link(9, baud=921600)
    line = Line(a, b, baud=921600)
    line.run(100)
    for _ in range(20):
        a.send(frame.MQTT, b"m" * 100)
        line.run(10)
        b.readinto(frame.MQTT, bytearray(512))
    return a, b, line.now


def measured_link() -> tuple[Link, int]:
    a, _, now = measured_pair()
    return a, now


def damage(end: Link, now: int) -> None:
    """A frame with its CRC broken reaches `end`: its line has damaged a frame just now."""
    bad = bytearray(frame.WIRE_MAX)
    n = frame.encode(bad, frame.ACK, 0, 0, 0, 9)
    bad[n - 3] ^= 0xFF
    end.feed(bytes(bad[:n]), now)


@pytest.mark.parametrize("damaged", [False, True])
def test_a_slow_peer_on_a_clean_line_is_not_probed_but_on_a_damaging_one_it_is(damaged: bool) -> None:
    """The tail loss probe sends the oldest frame in flight again when its ack is late. On a line that has damaged
    nothing lately no frame is lost, and a late ack is a slow peer or a loaded host: a probe would be a spurious
    retransmission, and the timeout is the answer. On a line that has just damaged a frame the probe goes."""
    a, now = measured_link()
    if damaged:
        damage(a, now)
    assert a.send(frame.MQTT, b"late") == 4
    assert len(written(a, now)) == 1  # its ack will be late: the peer is slow
    probe_at = now + 2 * (a.timer.srtt8 // 8) + a.timer.frame_ms + 1
    assert probe_at < now + a.timer.ms  # before the timeout
    assert len(written(a, probe_at)) == (1 if damaged else 0)
    assert a.retransmissions == (1 if damaged else 0) and a.timeouts == 0


@pytest.mark.parametrize("damaged", [False, True])
def test_a_late_ack_times_out_at_the_measured_timeout_only_on_a_damaging_line(damaged: bool) -> None:
    """The timeout comes down to the measured round trip (RFC 6298) where frames are being lost, so that a lost
    one is found soon; on a line that has damaged nothing lately a late ack is a slow peer or a loaded host (a
    garbage collection, a core it waited for), and the timeout is a second at least (RFC 6298's floor, above
    the line's ceiling at 115200 baud): no spurious retransmission for a pause shorter than that."""
    a, now = measured_link()
    if damaged:
        damage(a, now)
    assert a.timer.ms < a.timer.max_ms  # measured
    a.send(frame.MQTT, b"late")
    assert len(written(a, now)) == 1  # the peer will be slow to acknowledge it
    written(a, now + a.timer.ms + 1)  # (on the damaging line a tail loss probe went before)
    assert a.timeouts == (1 if damaged else 0)
    written(a, now + a.timer.max_ms + 1)
    assert damaged or a.timeouts == 0  # a host that did not run the peer for the line's 280 ms: still waited for
    written(a, now + a.timer.clean_ms + 1)
    assert a.timer.clean_ms == 1000 and a.timeouts >= 1  # the peer may be gone


def six_frames(a: Link, now: int) -> list[bytes]:
    """Six frames of 100 bytes written by `a` at the pace of its line, from `now` on."""
    a.tx.payload = a.tx.min_payload = 100
    frames, sent = write_all(a, bytes(range(200)) * 3, now)
    assert len(frames) == 6 and sent == 600 and a.pending() == 6
    return frames


@pytest.mark.parametrize("together", [True, False])
def test_a_timeout_on_a_clean_line_whose_acks_were_only_late_sends_one_frame_again(together: bool) -> None:
    """A loaded host (the peer's, or a relay's) holds the peer's acks past the timeout: the oldest frame goes
    again, then the late acks come, each confirming the frames the peer had by then. The one that confirms the
    resent frame is its first copy's ack (it comes sooner than the copy could have been answered), so the
    frames written after that first copy are not lost, and nothing more is sent again; what the counter counts
    is what went on the line again. Late acks read together (a UART buffer) and one at a time."""
    a, b, now = measured_pair()
    frames = six_frames(a, now)
    late_acks = []
    for f in frames:  # the peer has them all, and acknowledges each as it comes
        b.feed(f, now + 10)
        b.readinto(frame.MQTT, bytearray(512))
        late_acks += written(b, now + 10)
    late_acks += written(b, now + 30)  # (what its pacing held back)
    assert len(late_acks) > 1
    resent_at = now + a.timer.clean_ms + 20
    assert written(a, resent_at) == [frames[0]] and a.timeouts == 1  # a clean line: the timeout's turn
    if together:
        for ack in late_acks:
            a.feed(ack, resent_at + 1)
        assert written(a, resent_at + 2) == []
    else:
        for i, ack in enumerate(late_acks):
            a.feed(ack, resent_at + 1 + i)
            assert written(a, resent_at + 1 + i) == [], f"after late ack {i}"
    assert a.retransmissions == 1 and a.pending() == 0


def test_frames_lost_behind_a_timed_out_one_are_found_by_the_selective_ack_of_the_next_frame() -> None:
    """The same timeout when the frames were lost (a clean line's first loss, the whole window): the resent
    frame's confirmation cannot say which copy it answers, so it declares nothing lost; the next frame written,
    held by the peer past the gap, shows the gap, and the lost frames go again at once, without a timeout each."""
    a, b, now = measured_pair()
    frames = six_frames(a, now)  # all lost on the line
    resent_at = now + a.timer.clean_ms + 20
    assert written(a, resent_at) == [frames[0]]
    answered = resent_at + a.timer.srtt8 // 8  # a round trip later
    b.feed(frames[0], answered - 1)
    for ack in written(b, answered - 1):
        a.feed(ack, answered)
    assert written(a, answered) == []  # which copy was answered? Nothing declared lost on that
    a.send(frame.MQTT, b"next")
    (fresh,) = written(a, answered + 1)
    b.feed(fresh, answered + 2)
    for ack in written(b, answered + 2):
        a.feed(ack, answered + 3)
    again: list[bytes] = []
    t = answered + 3
    while len(again) < 5 and t < answered + 20:  # at the pace of the line
        again += written(a, t)
        t += 1
    assert again == frames[1:]
    assert a.retransmissions == 6 and a.timeouts == 1


def test_a_lost_probe_is_probed_again_after_twice_the_wait_then_the_timeout_has_its_turn() -> None:
    """On a damaging line a tail loss probe is lost as often as any frame, and this side does not see its loss
    (the damage is at the peer): the probe goes again after twice the last wait, three probes in all, then only
    the timeout."""
    a, now = measured_link()
    damage(a, now)  # the line is damaging
    a.timer.ms = a.timer.max_ms  # (so that only probes go in the window looked at)
    a.send(frame.MQTT, b"lost")
    assert len(written(a, now)) == 1  # and it, and every copy of it, is lost on the way
    wait = 2 * (a.timer.srtt8 // 8) + a.timer.frame_ms
    probes_at = []
    for t in range(now + 1, now + a.timer.max_ms - 1):
        if written(a, t):
            probes_at.append(t)
    assert len(probes_at) == 3 and a.timeouts == 0, probes_at
    gaps = [probes_at[0] - now, probes_at[1] - probes_at[0], probes_at[2] - probes_at[1]]
    assert gaps == [wait, 2 * wait, 4 * wait], (gaps, wait)


def kinds(chunks: list[bytes]) -> list[int]:
    """The frame type of each chunk an endpoint wrote (one frame each)."""
    out = []
    for chunk in chunks:
        decoder = frame.Decoder()
        decoder.feed(chunk, 0)
        assert decoder.ready == frame.Decoder.FRAME
        out.append(decoder.ftype)
    return out


def test_a_first_frame_from_the_known_peer_completes_the_handshake_its_reset_ack_late() -> None:
    """An end is up once its peer's RESET_ACK names it; the peer may then send at once. When that peer's own
    RESET_ACK to this end is late or lost (a bridge starting 256 boards answered some 0.3 s late), its first
    frame is taken as the handshake's end, not dropped: dropped, it cost the sender a timeout and a
    retransmission on a clean line."""
    a, b = Link(0x1111), Link(0x2222)
    b.feed(b"".join(written(a, 0)), 0)  # a's RESET: b knows a
    a.feed(b"".join(written(b, 0)), 0)  # b's RESET_ACK naming a, and its RESET: a is up
    assert a.state == UP and b.state != UP
    late = written(a, 0)
    assert frame.RESET_ACK in kinds(late)  # a's RESET_ACK to b, which the line loses
    a.send(frame.MQTT, b"\x10\x0c")
    first = written(a, 1)
    assert kinds(first) == [frame.DATA]
    b.feed(b"".join(first), 2)
    assert b.state == UP
    buf = bytearray(16)
    assert bytes(buf[: b.readinto(frame.MQTT, buf)]) == b"\x10\x0c"
    a.feed(b"".join(written(b, 3)), 3)  # b's ack
    for t in range(4, 3 * a.timer.clean_ms):
        written(a, t)
    assert a.retransmissions == 0 and a.timeouts == 0
