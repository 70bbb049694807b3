# Runs tests/vectors/console_lines.json against firmware/dboard/console.py: every line the board application
# prints is its format filled with the vector's values, on CPython (imported by tests/unit/dmqtt/test_shared_vectors.py)
# and on the MicroPython Unix port (run as a script). The host's parsing of the same lines is
# tests/unit/board/test_console_protocol.py (dboard/console_host.py runs on CPython only).
#
#   micropython tests/vectors/console_runner.py VECTORS.json [ITERATIONS (unused)]

import json

from dboard import console


def value(arg):
    if isinstance(arg, dict):  # {"bytes": HEX}: JSON has no bytes
        text = arg["bytes"]
        return bytes(bytearray(int(text[i : i + 2], 16) for i in range(0, len(text), 2)))
    return arg


def check_line(vec):
    fmt = getattr(console, vec["kind"].upper())
    got = fmt % tuple(value(a) for a in vec["args"])
    if got != vec["line"]:
        return "printed %r" % got
    return None


def check_summary(vec):
    if list(console.SUMMARY_KEYS) != vec["keys"]:
        return "the summary's keys are %r" % (console.SUMMARY_KEYS,)
    fields = json.loads(vec["line"])
    extra = [k for k in fields if k not in console.SUMMARY_KEYS and k not in ("link", "confirm")]
    if extra or [k for k in console.SUMMARY_KEYS if k not in fields]:
        return "the vector's summary does not have the protocol's keys"
    return None


def run_all(path, iterations=0):
    with open(path) as f:
        vectors = json.load(f)
    results = []
    for i, vec in enumerate(vectors["lines"]):
        results.append(("line %d: %s" % (i, vec["kind"]), check_line(vec)))
    results.append(("summary keys", check_summary(vectors["summary"])))
    return results


if __name__ == "__main__":
    import report

    report.main(run_all)
