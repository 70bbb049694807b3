# Virtual-board test app: console output, config, reset and exit status. On its first boot it calls
# machine.reset(); after the reset it prints what it sees and exits with the status in its config (or, with
# "forever", runs until it is interrupted).
import json
import sys

import machine

with open("/flash/config.json") as f:
    cfg = json.load(f)
try:
    with open("/flash/boots") as f:
        boots = int(f.read())
except OSError:
    boots = 0
with open("/flash/boots", "w") as f:
    f.write(str(boots + 1))
print("boot", boots + 1, "reset_cause", machine.reset_cause(), "uid", machine.unique_id().hex())
if boots == 0 and cfg.get("reset_once"):
    machine.reset()
print("config", cfg["client_id"])
if cfg.get("forever"):  # a program that never ends, for Ctrl-C to stop
    import time

    while True:
        time.sleep_ms(20)
sys.exit(cfg.get("exit", 0))
