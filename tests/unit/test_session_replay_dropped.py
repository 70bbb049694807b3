"""The session's journal replay runs once per boot: Session.open() loads dmqtt.session_replay for it and, on
MicroPython, drops it again (errors.forget), so that a deployed board's heap does not keep its code for the run.
What the replay rebuilt stays: the journaled message is outstanding, and is sent at the next connection."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_micropython

SCRIPT = """
import sys
import dmqtt
from dmqtt import journal_record as rec
from dmqtt.session import Session


class Journal:
    notes = []
    body = bytearray(128)

    def open(self, owner):
        record = bytearray(64)
        n = rec.put_pub(record, 7, 1, False, 1, 0, b"sensors/t", b"kept")
        owner.replay(rec.PUB, memoryview(record)[:n], 0x1010)


s = Session(Journal(), max_messages=4)
s.open()
print(s.outstanding(), s.next_pid)
print("loaded" if "dmqtt.session_replay" in sys.modules or hasattr(dmqtt, "session_replay") else "dropped")
"""


def test_on_micropython_the_replay_code_is_dropped_after_open(tmp_path: Path) -> None:
    script = tmp_path / "replay.py"
    script.write_text(SCRIPT)
    assert run_micropython(script).splitlines() == ["1 7", "dropped"]
