"""A newcomer's misuses of the blocking client, each run on the MicroPython Unix port (the board's interpreter):
every one ends in a DmqttError subclass whose message says what was wrong and what to do, raised before anything
is journaled or sent, never in the interpreter's internals (AttributeError on None, NotImplementedError from a
slice assignment). The journal is a file journal in a temporary folder; a broker, where one is needed, is a
transport that answers CONNECT with the CONNACK the row gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_micropython

SCRIPT = r"""
import json, sys
from dmqtt import codec
from dmqtt.client import MQTTClient
from dmqtt.errors import DmqttError
from dmqtt.journal_file import FileJournal

FOLDER = sys.argv[1]
n = [0]


class Broker:
    # A transport whose broker answers CONNECT with `connack` and takes whatever else is sent.
    def __init__(self, connack):
        self.inbox = bytearray(connack)
        self.sent = 0

    def send(self, buf, start, end):
        self.sent += end - start
        return end - start

    def readinto(self, buf):
        k = min(len(buf), len(self.inbox))
        buf[:k] = self.inbox[:k]
        self.inbox = self.inbox[k:]
        return k

    def wait(self, timeout_ms, writable=False):
        return writable or bool(self.inbox)

    def close(self):
        pass


def client(**options):
    n[0] += 1
    return MQTTClient("misuse-%d" % n[0], FileJournal(FOLDER + "/j%d" % n[0], 256), **options)


def connected(version=4):
    c = client(version=version)
    c.connect(Broker(b"\x20\x02\x00\x00" if version != 5 else b"\x20\x03\x00\x00\x00"))
    return c


def refused(code, version=4, client_id="misuse"):
    body = b"\x20\x02\x00" + bytes([code]) if version != 5 else b"\x20\x03\x00" + bytes([code]) + b"\x00"
    c = MQTTClient(client_id, FileJournal(FOLDER + "/r", 256), version=version)
    c.connect(Broker(body))


CASES = {
    "publish before open and connect, QoS 1": lambda: client().publish("t/1", b"x", 1),
    "a str payload": lambda: client().publish("t/1", "21.5 C", 1),
    "a float payload": lambda: client().publish("t/1", 21.5, 1),
    "a message larger than the journal's records": lambda: client().publish("t/1", bytes(300), 1),
    "a QoS 0 message larger than max_packet": lambda: connected().publish("t/1", bytes(2000), 0),
    "qos=3": lambda: client().publish("t/1", b"x", 3),
    "subscribe before connect": lambda: client().subscribe("cmd/#", 1),
    "subscribe at qos=3": lambda: connected().subscribe("cmd/#", 3),
    "poll before connect": lambda: client().poll(10),
    "version 6": lambda: client(version=6),
    "version '5.1'": lambda: client(version="5.1"),
    "refused 3.1.1 code 5": lambda: refused(5),
    "refused 5.0 code 0x87": lambda: refused(0x87, 5),
    "refused 3.1.1 code 2, a long id": lambda: refused(2, 4, "a-client-id-of-thirty-chars-xx"),
}
for name, case in CASES.items():
    try:
        result = case()
        print(json.dumps([name, "no error", repr(result)]))
    except DmqttError as exc:
        print(json.dumps([name, type(exc).__name__, str(exc)]))
    except Exception as exc:
        print(json.dumps([name, "not a DmqttError: " + type(exc).__name__, str(exc)]))

# What a newcomer writes and expects to work.
c = client(version="5")
assert c.version == codec.V5
for spelling, version in (("3.1", 3), ("3.1.1", 4), ("5.0", 5), (5, 5), (4, 4)):
    assert client(version=spelling).version == version, spelling
c = client()
print(json.dumps(["str payload accepted", c.publish("t/1", "21.5 C", 1) > 0, c.outstanding()]))
"""

# Each misuse: the error type, and what its message must say (what was wrong, and the fix).
EXPECTED = {
    "publish before open and connect, QoS 1": None,  # open() is implicit: journaled, no error
    "a str payload": None,
    "a float payload": ("PublishRefused", ["type float", "bytes, bytearray, memoryview or str"]),
    "a message larger than the journal's records": ("PublishRefused", ["journal's records of 256", "record_max"]),
    "a QoS 0 message larger than max_packet": ("PublishRefused", ["packet buffer of 1024", "max_packet"]),
    "qos=3": ("PublishRefused", ["QoS 3", "0, 1 or 2"]),
    "subscribe before connect": ("MQTTError", ["not connected"]),
    "subscribe at qos=3": ("CodecError", ["QoS 3 is malformed"]),
    "poll before connect": ("MQTTError", ["not connected"]),
    "version 6": ("UsageError", ["unknown MQTT version 6", '"3.1.1"']),
    "version '5.1'": ("UsageError", ["unknown MQTT version '5.1'"]),
    "refused 3.1.1 code 5": ("MQTTError", ["not authorized (code 0x05)"]),
    "refused 5.0 code 0x87": ("MQTTError", ["not authorized (code 0x87)"]),
    "refused 3.1.1 code 2, a long id": ("MQTTError", ["client identifier rejected", "30 characters", "23"]),
}  # fmt: skip


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    folder = tmp_path_factory.mktemp("misuse")
    script = folder / "misuse.py"
    script.write_text(SCRIPT)
    rows = [json.loads(line) for line in run_micropython(script, str(folder)).splitlines()]
    return {row[0]: row[1:] for row in rows}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_each_misuse_says_what_was_wrong_and_what_to_do(outcomes: dict[str, list[str]], case: str) -> None:
    kind, message = outcomes[case]
    expected = EXPECTED[case]
    if expected is None:
        assert kind == "no error", (kind, message)
        return
    assert kind == expected[0], (kind, message)
    for words in expected[1]:
        assert words in message, (words, message)


def test_a_str_payload_is_sent_as_utf8_and_the_versions_as_people_write_them(outcomes: dict[str, list[str]]) -> None:
    assert outcomes["str payload accepted"] == [True, 1]


def test_nothing_was_journaled_for_a_refused_misuse(tmp_path: Path) -> None:
    """A payload of the wrong type, a QoS of 3 and a message too large leave the journal as they found it."""
    script = tmp_path / "untouched.py"
    script.write_text(
        SCRIPT.split("CASES = {")[0]
        + """
c = client()
c.open()
for payload, qos in ((21.5, 1), (b"x", 3), (bytes(300), 1)):
    try:
        c.publish("t/1", payload, qos)
    except DmqttError:
        pass
again = MQTTClient("again", FileJournal(FOLDER + "/j1", 256))
again.open()
print(c.outstanding(), again.outstanding(), again.mark)
"""
    )
    assert run_micropython(script, str(tmp_path)).split() == ["0", "0", "0"]
