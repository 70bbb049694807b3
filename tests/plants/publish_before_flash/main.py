# A planted bug (tests/hil/test_witness.py, tests/hil/test_plants.py): the ring journal's publish() returns
# before the message's record is programmed. PUB records wait in RAM (the ring's group-commit stage) and reach
# flash only with the next record of another kind (an acknowledgement's); the session reads a waiting record back
# from RAM, so resends work and nothing crashes. A power cut loses the waiting records, which publish() reported
# accepted, and their progress mark with them: the run republishes their readings under the next boot, so its
# total still comes out right. Only a witness of what publish() returned can tell.
# Patched in once the application has loaded its modules and opened its journal, so that its heap is laid out as
# the real application's. Source, compiled at boot as main.py is, with no name the firmware does not intern
# already: a serial board with confirmation is at the end of its first pool of names (docs/virtual-board.md), and
# one name more costs it a pool its heap cannot spare.
import gc

gc.collect()
heap_at_boot = gc.mem_free()

import board_app  # noqa: E402
import board_open  # noqa: E402


def load_modules(cfg, make, resume=None, load=board_open.load_modules):
    made = load(cfg, make, resume)
    from dmqtt import journal_record as rec
    from dmqtt.journal_ring import RingJournal

    def commit(self, rtype, n, defer=False, commit=RingJournal.commit):
        return commit(self, rtype, n, defer or rtype == rec.PUB)  # the plant: a PUB record only staged

    def read(self, addr, read=RingJournal.read):
        at = addr - self._head * 4096 - self._offset
        if 0 <= at < self._staged:  # a staged record: from RAM, where it waits
            n = (self._stage[at + 1] << 8) | self._stage[at + 2]
            self._rbuf[: n + 3] = self._stage_mv[at : at + n + 3]
            self.record_type = self._stage[at]
            return n
        return read(self, addr)

    RingJournal.commit = commit
    RingJournal.read = read
    return made


board_open.load_modules = load_modules
del board_open  # (board_app drops it once the board is made)
board_app.start(heap_at_boot)
