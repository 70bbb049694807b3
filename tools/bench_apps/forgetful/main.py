# Figure 14's baseline (d): the forgetful batch (forgetful.py). A short main.py, as its careful developer writes
# it: MicroPython compiles main.py at every boot, and forgetful.py is compiled (mpy-cross) or frozen as (c)'s is.
import forgetful

forgetful.run()
