# The battery sensor (battery.py). A one-line main.py: MicroPython compiles main.py from source at every boot, which a
# battery board pays at every wake; battery.py is compiled to .mpy (mpy-cross) like the library, and loads as it is.
import battery  # noqa: F401
