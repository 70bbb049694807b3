"""A node's frames (firmware/dlink/now.py): the PUBLISH a node's wake encodes without the codec is byte for byte the
codec's, on every version, at the sizes a frame takes; a gateway's answer reads back as the acknowledgements it
holds; the gateway's records on the serial link (firmware/dlink/nodes.py) cut back into what was written, whatever
the bytes' split, and bytes that are no record are refused."""

from __future__ import annotations

import pytest

from dlink import nodes, now
from dmqtt import codec_host as codec


@pytest.mark.parametrize("version", [3, 4, 5])
@pytest.mark.parametrize(("qos", "payload_size"), [(0, 10), (1, 60), (2, 60), (1, 100), (1, 200)])
def test_a_node_s_publish_is_the_codec_s(version: int, qos: int, payload_size: int) -> None:
    topic = b"sensors/node-1/telemetry"
    payload = bytes(range(256))[:payload_size]
    frame = bytearray(now.MAX_FRAME)
    start = now.start(frame, version)
    end = now.publish(frame, start, version, qos, 513, topic, payload, retain=qos == 2)
    want = codec.encode_publish(topic.decode(), payload, qos, 513 if qos else 0, qos == 2, False, version)
    assert bytes(frame[start:end]) == bytes(want)
    assert now.version_of(frame[:end]) == version
    assert now.packet_end(frame, start, end) == end
    assert now.packet_end(frame, start, end - 1) == -1  # cut short: not whole yet


def test_a_publish_that_passes_a_frame_is_not_written() -> None:
    frame = bytearray(now.MAX_FRAME)
    start = now.start(frame, 4)
    assert now.publish(frame, start, 4, 1, 1, b"t" * 40, b"x" * 210) == -1
    assert frame[start] == 0  # nothing written


def test_a_gateway_s_answer_reads_as_its_acknowledgements() -> None:
    for version in (4, 5):
        frame = bytearray(now.MAX_FRAME)
        at = now.start(frame, version)
        for kind, pid in ((codec.PUBACK, 7), (codec.PUBREC, 8), (codec.PUBCOMP, 9)):
            ack = codec.encode_ack(kind, pid, 0, version)
            frame[at : at + len(ack)] = ack
            at += len(ack)
        assert list(now.acks(frame[:at])) == [(4, 7), (5, 8), (7, 9)]
    with pytest.raises(now.FrameError):
        now.version_of(b"\x20\x04")  # another format's header


def test_node_records_cut_back_whatever_the_split() -> None:
    written = [
        (nodes.OPEN, 0, b"24d7eb00bb01"),
        (nodes.DATA, 3, bytes(range(256)) * 4),
        (nodes.CLOSE, 254, b""),
        (nodes.OPENED, 1, b""),
    ]
    stream = b"".join(nodes.record(k, n, b) for k, n, b in written)
    for step in (1, 3, 7, 1000, len(stream)):
        got: list[tuple[int, int, bytes]] = []

        def take(kind: int, node: int, body: memoryview, into: list[tuple[int, int, bytes]] = got) -> None:
            into.append((kind, node, bytes(body)))

        records = nodes.Records()
        for at in range(0, len(stream), step):
            chunk = stream[at : at + step]
            records.feed(chunk, 0, len(chunk), take)
        assert got == written, step


def test_bytes_that_are_no_record_are_refused() -> None:
    records = nodes.Records()
    with pytest.raises(nodes.RecordError):
        records.feed(b"\x00\x01\x00\x02ab", 0, 6, lambda k, n, b: None)  # kind 0
    with pytest.raises(nodes.RecordError):
        records.feed(b"D\x01\xff\xff", 0, 4, lambda k, n, b: None)  # a body longer than MAX_BODY
    with pytest.raises(nodes.RecordError):
        nodes.record(nodes.DATA, 0, bytes(nodes.MAX_BODY + 1))
