"""The decoder's fast path for a publisher's acknowledgements (StreamDecoder.short_ack): a whole PUBACK, PUBREC or
PUBCOMP that reports a success without properties, between packets, is read in place; anything else is left to
feed(), which checks it."""

from __future__ import annotations

import pytest

from dmqtt import codec_host as codec
from dmqtt.errors import CodecError


@pytest.mark.parametrize("version", [codec.V311, codec.V5])
@pytest.mark.parametrize("ptype", [codec.PUBACK, codec.PUBREC, codec.PUBCOMP])
def test_a_short_ack_is_read_in_place(version: int, ptype: int) -> None:
    wire = b"\x00" + codec.encode_ack(ptype, 0x1234, 0, version) + b"\x30"
    assert len(wire) == 6  # the 2-byte form: 3.1.1, or 5.0 Success without properties (5.0 section 3.4.2.1)
    assert codec.StreamDecoder(version).short_ack(wire, 1, len(wire)) == 2 << 20 | ptype << 16 | 0x1234


@pytest.mark.parametrize(
    ("ptype", "reason"), [(codec.PUBACK, 0x10), (codec.PUBREC, 0x10), (codec.PUBACK, 0), (codec.PUBCOMP, 0)]
)
def test_a_5_0_success_with_its_reason_code_is_read_in_place(ptype: int, reason: int) -> None:
    # The 3-byte form: a reason code, no properties (what Mosquitto sends for a message no one subscribes to).
    wire = bytes((ptype << 4, 3, 0x12, 0x34, reason)) + b"\x30"
    assert codec.StreamDecoder(codec.V5).short_ack(wire, 0, len(wire)) == reason << 24 | 3 << 20 | ptype << 16 | 0x1234


def test_anything_else_is_left_to_feed() -> None:
    decoder = codec.StreamDecoder(codec.V5)
    pubrel = codec.encode_ack(codec.PUBREL, 7, 0, codec.V5)  # an incoming flow's: the session's other path
    refused = codec.encode_ack(codec.PUBACK, 7, codec.NOT_AUTHORIZED, codec.V5)  # a refusal: the checked path
    no_match_comp = b"\x70\x03\x00\x07\x10"  # 0x10 is no PUBCOMP reason: check_ack() refuses it
    with_props = codec.encode_ack(codec.PUBACK, 7, 0x10, codec.V5, {codec.REASON_STRING: "r"})
    cut = b"\x40\x03\x00\x07"  # the 3-byte form, its reason code not here yet
    for wire in (
        pubrel,
        refused,
        no_match_comp,
        with_props,
        cut,
        b"\x40\x02\x00",
        b"\x41\x02\x00\x07",
        b"\x40\x02\x00\x00",
    ):
        assert decoder.short_ack(wire, 0, len(wire)) == 0, wire
    # 3.1.1 has no reason codes: its acknowledgements are 2 bytes, and feed() refuses a third.
    assert codec.StreamDecoder(codec.V311).short_ack(b"\x40\x03\x00\x07\x00", 0, 5) == 0
    # Between packets only: the same four bytes inside a packet being fed are not an acknowledgement.
    publish = codec.encode_publish("t", b"\x40\x02\x00\x07", 0, 0, False, False, codec.V311)
    decoder = codec.StreamDecoder(codec.V311)
    decoder.feed(publish, 0, 3)
    assert decoder.short_ack(publish, 5, len(publish)) == 0
    # What the fast path leaves is refused on the usual path: flags other than 0000 by feed() [MQTT-2.2.2-2],
    # packet id 0 by check_ack() [MQTT-2.3.1-1], which the session's handle() calls.
    with pytest.raises(CodecError):
        codec.StreamDecoder(codec.V311).feed(b"\x41\x02\x00\x07")
    decoder = codec.StreamDecoder(codec.V311)
    decoder.feed(b"\x40\x02\x00\x00")
    with pytest.raises(CodecError):
        codec.check_ack(decoder.ptype, decoder.body, codec.V311)
