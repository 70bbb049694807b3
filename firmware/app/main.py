# Runs at every boot after boot.py. Kept tiny: MicroPython compiles main.py from source on the board, and the
# compiler's heap use would otherwise crowd out the application's (the rest ships as .mpy).
import board_app

board_app.start()
