"""The codec's refusal texts (firmware/dmqtt/codec_text.py): one per rule number of codec.py, in order; looked up
for a refusal and, on MicroPython, dropped again so that a deployed board keeps none of them in its heap."""

from __future__ import annotations

import re

from dmqtt import codec, codec_text
from tests.conftest import FIRMWARE, run_micropython


def test_every_rule_number_names_its_own_text() -> None:
    rules = dict(re.findall(r"^_R_(\w+) = const\((\d+)\)$", (FIRMWARE / "dmqtt" / "codec.py").read_text(), re.M))
    commented = re.findall(r"^    .*,  # _R_(\w+)$", (FIRMWARE / "dmqtt" / "codec_text.py").read_text(), re.M)
    assert len(commented) == len(codec_text.TEXT) == len(rules)
    assert {name: int(number) for name, number in rules.items()} == {name: i for i, name in enumerate(commented)}
    used = set(re.findall(r"refused\(_R_(\w+)", (FIRMWARE / "dmqtt" / "codec.py").read_text()))
    assert used == set(rules), "a rule no refusal cites, or a refusal of an unknown rule"


def test_a_refusal_says_the_rule_in_words() -> None:
    try:
        codec.check_topic("a/#")
    except codec.CodecError as exc:
        assert (str(exc), exc.reason, exc.reason_code) == (
            "topic name must not contain wildcards [MQTT-3.3.2-2]",
            "topic name must not contain wildcards [MQTT-3.3.2-2]",
            codec.MALFORMED_PACKET,
        )
    refusal = codec.refused(0, 300000000)  # a %-field filled in
    assert refusal.reason == "variable byte integer out of range: 300000000"


SCRIPT = """
import gc, sys
from dmqtt import codec
try:
    codec.StreamDecoder(5).feed(b"\\x36")  # PUBLISH with both QoS bits set
except codec.CodecError as exc:
    print(exc.reason_code, exc)
import dmqtt
print("loaded" if "dmqtt.codec_text" in sys.modules or hasattr(dmqtt, "codec_text") else "dropped")
"""


def test_on_micropython_the_texts_are_dropped_after_a_refusal(tmp_path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "refusal.py"
    script.write_text(SCRIPT)
    out = run_micropython(script).splitlines()
    assert out == ["129 PUBLISH with both QoS bits set [MQTT-3.3.1-4]", "dropped"]
