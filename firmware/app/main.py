# Runs at every boot after boot.py. Kept tiny: MicroPython compiles main.py from source on the board, and the
# compiler's heap use would otherwise crowd out the application's (the rest ships as .mpy).
import gc

gc.collect()
heap_at_boot = gc.mem_free()  # before the application's modules load: reported in the summary line

import board_app  # noqa: E402

board_app.start(heap_at_boot)
