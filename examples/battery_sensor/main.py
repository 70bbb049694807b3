# The battery sensor (battery.py). A short main.py: MicroPython compiles main.py from source at every boot, which a
# battery board pays at every wake; battery.py is compiled to .mpy (mpy-cross) like the library, or frozen with it.
import battery

battery.run()
