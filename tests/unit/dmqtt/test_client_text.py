"""The client's and the session's failure texts (firmware/dmqtt/client_text.py): one per _T_ number of
client.py, session.py, inbox.py and usage.py, in order; looked up when a failure happens and, on MicroPython,
dropped again so that a deployed board keeps none of them in its heap."""

from __future__ import annotations

import re

from dmqtt import client_text
from tests.conftest import FIRMWARE, run_micropython

MODULES = ("client.py", "session.py", "inbox.py", "usage.py")


def test_every_number_names_its_own_text_and_each_is_used() -> None:
    numbers: dict[str, int] = {}
    for module in MODULES:
        source = (FIRMWARE / "dmqtt" / module).read_text()
        declared = {name: int(n) for name, n in re.findall(r"^_T_(\w+) = const\((\d+)\)$", source, re.M)}
        used = set(re.findall(r"_text\(_T_(\w+)", source))
        assert used == set(declared), (module, "a number no failure cites, or a failure of an unknown number")
        assert not set(declared) & set(numbers), "a name in both modules"
        numbers.update(declared)
    commented = re.findall(r"^    .*,  # _T_(\w+)$", (FIRMWARE / "dmqtt" / "client_text.py").read_text(), re.M)
    assert len(commented) == len(client_text.TEXT) == len(numbers)
    assert numbers == {name: i for i, name in enumerate(commented)}


def test_every_config_refusal_has_its_own_text_and_each_is_used() -> None:
    """firmware/app/config.py's refusals (and a node's, which gateway_config.node() makes through config.py's
    refusal): each number declared cited by a refusal, one text each in config_text.py, in order."""
    source = "\n".join((FIRMWARE / "app" / name).read_text() for name in ("config.py", "gateway_config.py"))
    declared = {name: int(n) for name, n in re.findall(r"^_T_(\w+) = const\((\d+)\)", source, re.M)}
    assert set(re.findall(r"\brefuse\(_T_(\w+)|_refuse\(_T_(\w+)", source)) and set(
        a or b for a, b in re.findall(r"\brefuse\(_T_(\w+)|_refuse\(_T_(\w+)", source)
    ) == set(declared)
    commented = re.findall(r"^    .*,  # _T_(\w+)$", (FIRMWARE / "app" / "config_text.py").read_text(), re.M)
    assert declared == {name: i for i, name in enumerate(commented)}


SCRIPT = """
import sys
from dmqtt.session import Session
from dmqtt.errors import QueueFull
import dmqtt


class Journal:
    notes = []
    body = bytearray(64)

    def open(self, owner):
        pass


s = Session(Journal(), max_messages=1)
s.open()
s._busy = 1  # every slot taken
try:
    s.accept(b"t", b"m", 1)
except QueueFull as exc:
    print(exc)
print("loaded" if "dmqtt.client_text" in sys.modules or hasattr(dmqtt, "client_text") else "dropped")
"""


def test_on_micropython_the_texts_are_dropped_after_a_failure(tmp_path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "failure.py"
    script.write_text(SCRIPT)
    assert run_micropython(script).splitlines() == ["1 messages in flight", "dropped"]
