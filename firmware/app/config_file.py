# config.json found and read, checked (the first thing a boot does; board_app.main() drops this module once it has):
# the check an earlier boot kept, while the files and the firmware are those it was made from, or config.py's
# check, kept for the boots after. A sending wake of a battery board thus loads no checker.

import gc
import json

import dmqtt
from dmqtt.errors import forget

try:
    from micropython import const
except ImportError:

    def const(x):  # type: ignore[misc]
        return x


# Where the filesystem is: /flash on the virtual board (and pyboard-style ports), / on an ESP32.
ROOTS = ("/flash", "")
# The check kept beside config.json, in .kept/config.checked: a folder of its own, not the root folder, where
# every import of a sampling wake looks names up. Two lines of JSON:
#   1. [key, names]: the key is [the firmware's version, _CHECK_FORMAT, the CRC-32 of config.json's and
#      secrets.json's bytes]; names, every key of the checked config's objects (nested ones too), each once.
#   2. The checked config: config.check()'s, with the values JSON has no type for written by config.store() and
#      made again by read().
# The names are interned before line 2 is parsed: json.loads() gives an interned name for a string that is one,
# and a new string in the heap (two blocks) for any other. The config's keys then cost the run's heap no more than
# the checker's (its code names them), where a boot that reads the kept check first would otherwise hold a string
# for each key the application's loaded code has not named yet (rule 7 of docs/firmware-style.md).
# _CHECK_FORMAT changes with any of these (tests/unit/board/test_config_checked.py holds them together).
_CHECK_FORMAT = const(4)


def read():
    """config.json, checked. The check an earlier boot kept is used while config.json, secrets.json and the
    firmware are what it was made from: a sending wake does not load the checker (config.py);
    else config.py checks them (ConfigError says what is wrong) and, on a board that sleeps between readings,
    keeps its check for the boots after."""
    from binascii import crc32

    base = None
    text = secrets = ""
    for root in ROOTS:
        try:
            with open(root + "/config.json") as f:
                text = f.read()
            base = root
            break
        except OSError:
            pass
    if base is not None:
        try:
            with open(base + "/secrets.json") as f:
                secrets = f.read()
        except OSError:
            pass
    key = [dmqtt.__version__, _CHECK_FORMAT, crc32(secrets.encode(), crc32(text.encode()))]
    if base is not None:
        try:
            with open(base + "/.kept/config.checked") as f:
                found, names = json.loads(f.readline())
                if found == key:
                    for name in names:
                        getattr(gc, name, None)  # (interns it)
                    cfg = json.loads(f.readline())
                    # As config.check() made it: the values JSON has no type for, made again.
                    wifi = cfg["wifi"]
                    if wifi is not None:
                        if wifi["ip"] is not None:
                            wifi["ip"] = tuple(wifi["ip"])
                        if wifi["bssid"] is not None:
                            wifi["bssid"] = bytes(wifi["bssid"])
                    if cfg["will"] is not None:
                        topic, payload, qos, retain = cfg["will"]  # (the client's will: a tuple)
                        cfg["will"] = (topic, payload.encode(), qos, retain)
                    if cfg["password"] is not None:
                        cfg["password"] = cfg["password"].encode()
                    cfg["subscribe"] = [tuple(entry) for entry in cfg["subscribe"]]
                    cfg["root"] = base
                    return cfg
        except (OSError, ValueError, IndexError, TypeError, KeyError):
            pass  # none kept, or not for these files: checked again
    # The codec first: the checker uses it, and the checker's garbage then lies above the codec's code rather
    # than between its pieces.
    __import__("dmqtt.codec")
    gc.collect()
    import config

    try:
        cfg = config.load(base)  # (refuses a missing config.json)
        if cfg.get("sleep"):  # (a gateway's config has none: docs/nodes.md)
            # Kept for a board that wakes often; one that stays awake checks at its rare boots, and its flash
            # does not take the writes.
            config.store(cfg, key)
    finally:
        forget("config")
    return cfg
