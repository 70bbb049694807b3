"""The journal's replay runs once per boot: RingJournal.open() loads dmqtt.journal_ring_open (reading the sectors,
sealing a torn head) and Session.open() loads dmqtt.session_replay (the records into the slots); on MicroPython
both are dropped again (errors.forget), so that a deployed board's heap does not keep their code for the run.
What the replay rebuilt stays: the message journaled before the reboot is outstanding again."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_micropython

SCRIPT = """
import sys
import dmqtt
from dmqtt.journal_ring import RingJournal
from dmqtt.session import Session


class Partition:
    def __init__(self, sectors):
        self.buf = bytearray(b"\\xff" * (sectors * 4096))

    def readblocks(self, block, buf, off=0):
        start = block * 4096 + off
        buf[:] = self.buf[start : start + len(buf)]

    def writeblocks(self, block, buf, off=0):
        start = block * 4096 + off
        self.buf[start : start + len(buf)] = buf

    def ioctl(self, op, arg):
        if op == 4:
            return len(self.buf) // 4096
        if op == 5:
            return 4096
        if op == 6:
            self.buf[arg * 4096 : (arg + 1) * 4096] = b"\\xff" * 4096
        return 0


flash = Partition(4)
before = Session(RingJournal(flash, 128), max_messages=4)
before.open()
pid = before.accept(b"sensors/t", b"kept", 1)
after = Session(RingJournal(flash, 128), max_messages=4)  # the reboot
after.open()
print(after.outstanding(), after.next_pid == pid)
for name in ("journal_ring_open", "session_replay"):
    print(name, "loaded" if "dmqtt." + name in sys.modules or hasattr(dmqtt, name) else "dropped")
"""


def test_on_micropython_the_boot_code_is_dropped_after_the_replay(tmp_path: Path) -> None:
    script = tmp_path / "replay.py"
    script.write_text(SCRIPT)
    assert run_micropython(script).splitlines() == ["1 True", "journal_ring_open dropped", "session_replay dropped"]
