# Hex text <-> bytes for the vector runners (vector_runner.py, link_runner.py), in the Python both MicroPython's
# Unix port and CPython run (MicroPython has no bytes.fromhex with spaces, nor bytes.hex on every build).


def unhex(text):
    return bytes(bytearray(int(text[i : i + 2], 16) for i in range(0, len(text), 2)))


def to_hex(data):
    return "".join("%02x" % b for b in bytes(data))
