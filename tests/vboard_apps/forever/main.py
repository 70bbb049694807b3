# Virtual-board test app: runs until it is stopped (tests/integration/test_vboard.py ends it with SIGTERM).
import time

print("running")
while True:
    time.sleep_ms(100)
