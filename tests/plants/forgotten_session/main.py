# A planted bug (tests/hil/test_plants.py): the session ignores the broker's session-present flag and takes
# every connection for one where the broker forgot it. After a reset or a reconnect, each flow in flight is sent
# again as a new message (DUP 0) instead of resumed: at QoS 2 the broker passes it on twice.
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
    from dmqtt.session import Session

    def connected(self, session_present, *args, connected=Session.connected):
        return connected(self, False, *args)

    Session.connected = connected
    return made


board_open.load_modules = load_modules
del board_open  # (board_app drops it once the board is made)
board_app.start(heap_at_boot)
