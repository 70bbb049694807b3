"""Property tests of the codec on CPython: round trips of every packet kind, any chunking of a stream, and
fuzzing of the decoder. Plus the board's hot-path allocation, measured on the MicroPython Unix port."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmqtt import codec_host as codec
from tests.conftest import VECTORS, run_micropython

VERSIONS = st.sampled_from([codec.V31, codec.V311, codec.V5])
TOPIC_CHARS = st.characters(blacklist_characters="+#\x00", blacklist_categories=["Cs"])
topics = st.text(TOPIC_CHARS, min_size=1, max_size=40).filter(lambda t: len(t.encode()) <= 65535)
payloads = st.binary(max_size=300)
pids = st.integers(1, 65535)
utf8 = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=["Cs"]), max_size=20)
user_props = st.lists(st.tuples(utf8, utf8), min_size=1, max_size=3)
publish_props = st.fixed_dictionaries(
    {},
    optional={
        0x01: st.integers(0, 1),
        0x02: st.integers(0, 2**32 - 1),
        0x03: utf8,
        0x08: topics,
        0x09: st.binary(max_size=20),
        0x0B: st.lists(st.integers(1, 268435455), min_size=1, max_size=2),
        0x26: user_props,
    },
)
ack_props = st.fixed_dictionaries({}, optional={0x1F: utf8, 0x26: user_props})


def one_packet(data: bytes, version: int, max_size: int = 1 << 20) -> codec.Packet:
    packets = list(codec.PacketDecoder(version, max_size).packets(data))
    assert len(packets) == 1
    return packets[0]


@given(topics, payloads, st.integers(0, 2), pids, st.booleans(), st.booleans(), VERSIONS, publish_props)
def test_publish_round_trip(
    topic: str, payload: bytes, qos: int, pid: int, retain: bool, dup: bool, version: int, props: dict[int, Any]
) -> None:
    dup = dup and qos > 0  # DUP must be 0 on QoS 0 [MQTT-3.3.1-2]
    wire_props = props if version == codec.V5 else None
    data = codec.encode_publish(topic, payload, qos, pid if qos else 0, retain, dup, version, wire_props)
    p = one_packet(data, version)
    assert (p.topic, p.payload, p.qos, p.retain, p.dup) == (topic, payload, qos, retain, dup)
    assert p.pid == (pid if qos else 0)
    if version == codec.V5:
        assert p.props == props


@given(payloads, st.integers(0, 2), pids, st.integers(1, 65535), publish_props)
def test_a_topic_alias_given_apart_is_the_property_it_stands_for(
    payload: bytes, qos: int, pid: int, alias: int, props: dict[int, Any]
) -> None:
    """codec.write_publish's `alias` (the session's Topic Alias, written without the general property encoder)
    gives the bytes of the same PUBLISH with a Topic Alias property [MQTT-3.3.2-8], alone or beside others."""
    out = bytearray(2048)
    pid = pid if qos else 0
    n = codec.write_publish(b"", payload, qos << codec.QOS_SHIFT, pid, codec.V5, props or None, out, 0, alias)
    assert bytes(out[:n]) == codec.encode_publish("", payload, qos, pid, False, False, codec.V5, {**props, 0x23: alias})
    p = one_packet(bytes(out[:n]), codec.V5)
    assert p.props[0x23] == alias and p.payload == payload
    with pytest.raises(codec.CodecError):
        codec.write_publish(b"t", payload, qos << codec.QOS_SHIFT, pid, codec.V311, None, out, 0, alias)


@given(st.sampled_from([codec.PUBACK, codec.PUBREC, codec.PUBREL, codec.PUBCOMP]), pids, st.data())
def test_v5_ack_round_trip(ptype: int, pid: int, data: st.DataObject) -> None:
    reasons = [0x00, 0x92] if ptype >= codec.PUBREL else [0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99]
    reason = data.draw(st.sampled_from(reasons))
    props = data.draw(ack_props)
    wire = codec.encode_ack(ptype, pid, reason, codec.V5, props)
    # Short form exactly when Success and no properties (MQTT 5.0 3.4.2.1).
    assert (len(wire) == 4) == (reason == 0 and not props)
    p = one_packet(wire, codec.V5)
    assert (p.type, p.pid, p.reason, p.props or {}) == (ptype, pid, reason, props)


@given(
    VERSIONS,
    st.text(TOPIC_CHARS, max_size=23),
    st.integers(0, 65535),
    st.booleans(),
    st.one_of(st.none(), utf8),
    st.one_of(st.none(), st.binary(max_size=20)),
    st.one_of(st.none(), topics),
    st.integers(0, 2),
)
def test_connect_round_trip(
    version: int,
    client_id: str,
    keepalive: int,
    clean: bool,
    username: str | None,
    password: bytes | None,
    will_topic: str | None,
    will_qos: int,
) -> None:
    if version != codec.V5 and password is not None and username is None:
        username = "u"  # 3.1.1 forbids a password without a user name [MQTT-3.1.2-22]
    will_qos = will_qos if will_topic is not None else 0
    props = {codec.SESSION_EXPIRY_INTERVAL: 300, codec.RECEIVE_MAXIMUM: 8} if version == codec.V5 else None
    wire = codec.encode_connect(
        client_id, version, keepalive, clean, username, password, will_topic, b"bye", will_qos, props=props
    )
    p = one_packet(wire, version)
    assert (p.version, p.client_id, p.keepalive, p.clean) == (version, client_id, keepalive, clean)
    assert (p.username, p.password, p.will_topic, p.will_qos) == (username, password, will_topic, will_qos)
    assert p.props == props


filters = st.lists(st.sampled_from(["a", "b", "+", "sensors", "ü"]), min_size=1, max_size=4).map("/".join)


@given(VERSIONS, pids, st.lists(st.tuples(filters, st.integers(0, 2)), min_size=1, max_size=4))
def test_subscribe_suback_unsubscribe_round_trip(version: int, pid: int, topics: list[tuple[str, int]]) -> None:
    p = one_packet(codec.encode_subscribe(pid, topics, version), version)
    assert (p.pid, p.topics) == (pid, topics)
    codes = [qos for _, qos in topics]
    assert one_packet(codec.encode_suback(pid, codes, version), version).codes == codes
    names = [t for t, _ in topics]
    assert one_packet(codec.encode_unsubscribe(pid, names, version), version).filters == names


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(topics, payloads, st.integers(0, 2)), min_size=1, max_size=6), st.data())
def test_any_chunking_gives_the_same_packets(messages: list[tuple[str, bytes, int]], data: st.DataObject) -> None:
    stream = b"".join(codec.encode_publish(t, p, q, 7 if q else 0) for t, p, q in messages)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=20)))
    decoder = codec.PacketDecoder(codec.V311, 1 << 16)
    got = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=False):
        got += [(p.topic, p.payload, p.qos) for p in decoder.packets(stream[start:end])]
    assert got == messages


@settings(max_examples=500)
@given(st.binary(max_size=200), VERSIONS)
def test_decoder_fuzz_raises_only_codec_errors(data: bytes, version: int) -> None:
    decoder = codec.PacketDecoder(version, 256)
    try:
        for _ in decoder.packets(data):
            pass
    except codec.CodecError as exc:
        assert 0x80 <= exc.reason_code <= 0xA2
    assert len(decoder._buf) <= 256  # bounded by the maximum packet size, whatever the bytes claim


def test_decoder_stays_failed_after_an_error() -> None:
    decoder = codec.PacketDecoder(codec.V311)
    with pytest.raises(codec.CodecError):
        decoder.feed(b"\x36")  # QoS 3 [MQTT-3.3.1-4]
    with pytest.raises(codec.CodecError):
        decoder.feed(codec.encode_empty(codec.PINGRESP))


@pytest.mark.parametrize(
    "call",
    [
        lambda: codec.encode_publish("a/#", b""),  # [MQTT-3.3.2-2]
        lambda: codec.encode_publish("a", b"", qos=0, dup=True),  # [MQTT-3.3.1-2]
        lambda: codec.encode_publish("a", b"", qos=3, pid=1),  # [MQTT-3.3.1-4]
        lambda: codec.encode_publish("a", b"", qos=1, pid=0),  # [MQTT-2.3.1-1]
        lambda: codec.encode_publish("", b""),  # [MQTT-4.7.3-1]
        lambda: codec.encode_ack(codec.PUBACK, 1, 0x92, codec.V5),  # not in the PUBACK table
        lambda: codec.encode_ack(codec.PUBACK, 1, 0x10, codec.V311),  # reason codes need 5.0
        lambda: codec.encode_subscribe(1, [("a/#/b", 0)]),  # [MQTT-4.7.1-2]
        lambda: codec.encode_connect("c", codec.V311, password=b"p"),  # [MQTT-3.1.2-22]
        lambda: codec.encode_publish("t", b"x" * 10, into=bytearray(5)),
    ],
)
def test_encoders_refuse_what_the_spec_forbids(call: Any) -> None:
    with pytest.raises(codec.CodecError):
        call()


def test_hot_path_allocates_nothing_per_packet_on_micropython() -> None:
    out = run_micropython(VECTORS / "alloc_check.py")
    per_packet = float(out.split()[-1])
    # Below one byte per packet: a per-packet object would cost at least 16 bytes each time.
    assert per_packet < 1.0, out
