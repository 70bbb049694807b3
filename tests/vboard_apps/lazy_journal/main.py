# The board application on the planted bug's journal (lazy_ring.py); everything else is the real firmware.
import gc

gc.collect()
heap_at_boot = gc.mem_free()

import lazy_ring  # noqa: E402

import dmqtt.journal  # noqa: E402

dmqtt.journal.open_journal = lazy_ring.open_lazy

import board_app  # noqa: E402

board_app.start(heap_at_boot)
