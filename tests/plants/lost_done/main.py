# A planted bug (tests/hil/test_plants.py): the journal never writes a flow's DONE record. The flow ends in RAM
# all the same, so a run without a reset is right; after a reset the journal still holds the finished flows'
# PUB records, and the board sends those messages again, at QoS 2 as new messages the broker passes on twice.
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
        if rtype == rec.DONE:
            return 0  # the plant: the record is dropped, its caller told it was written
        return commit(self, rtype, n, defer)

    RingJournal.commit = commit
    return made


board_open.load_modules = load_modules
del board_open  # (board_app drops it once the board is made)
board_app.start(heap_at_boot)
