"""The decoder's fast path for a publisher's acknowledgements (StreamDecoder.short_ack): a whole PUBACK, PUBREC or
PUBCOMP in its short form, between packets, is read in place; anything else is left to feed(), which checks it."""

from __future__ import annotations

import pytest

from dmqtt import codec_host as codec
from dmqtt.errors import CodecError


@pytest.mark.parametrize("version", [codec.V311, codec.V5])
@pytest.mark.parametrize("ptype", [codec.PUBACK, codec.PUBREC, codec.PUBCOMP])
def test_a_short_ack_is_read_in_place(version: int, ptype: int) -> None:
    wire = b"\x00" + codec.encode_ack(ptype, 0x1234, 0, version) + b"\x30"
    assert len(wire) == 6  # the 2-byte form: 3.1.1, or 5.0 Success without properties (5.0 section 3.4.2.1)
    assert codec.StreamDecoder(version).short_ack(wire, 1, len(wire)) == ptype << 16 | 0x1234


def test_anything_else_is_left_to_feed() -> None:
    decoder = codec.StreamDecoder(codec.V5)
    long_form = codec.encode_ack(codec.PUBACK, 7, 0x10, codec.V5)  # a reason code: 3 bytes of body
    pubrel = codec.encode_ack(codec.PUBREL, 7, 0, codec.V5)  # an incoming flow's: the session's other path
    for wire in (long_form, pubrel, b"\x40\x02\x00", b"\x41\x02\x00\x07", b"\x40\x02\x00\x00"):
        assert decoder.short_ack(wire, 0, len(wire)) == 0, wire
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
