# What a TLS context takes of the firmware's heap on the virtual board: on a chip mbedTLS allocates from ESP-IDF's
# heap, so only the Python object of ssl.SSLContext is MicroPython's. Then the context is dropped: what mbedTLS
# let go of is the arena's again, not the firmware's (tests/integration/test_vboard_esp32_apis.py).
import gc
import ssl

gc.collect()
before = gc.mem_free()
context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
gc.collect()
took = before - gc.mem_free()
context = None
gc.collect()
print("tls context took", took, "and gave back", gc.mem_free() - before)
