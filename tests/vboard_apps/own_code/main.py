# Virtual-board test app: code of the user's own as mpy-cross compiles it by default, for the board's own architecture
# (tests/integration/test_vboard_esp32_apis.py): @native and @viper functions, asserts kept, tracebacks with file
# names and line numbers.
import fast

print("native", fast.doubled(21), "viper", fast.summed(10))
try:
    fast.checked(-1)
    print("assert skipped")
except AssertionError as exc:
    print("assert kept", exc)
try:
    fast.checked(None)
except TypeError as exc:
    import sys

    sys.print_exception(exc)
