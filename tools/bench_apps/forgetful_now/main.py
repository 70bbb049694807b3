# Figure 14's baseline (f): the forgetful ESP-NOW node (forgetful_now.py). A short main.py, as (d)'s: MicroPython
# compiles main.py at every boot, and forgetful_now.py is compiled (mpy-cross) or frozen as (e)'s code is.
import forgetful_now

forgetful_now.run()
