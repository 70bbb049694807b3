# What only a real board does, kept out of board_app.py so that a board loads it only when it needs it (a
# deployed board pays its code in heap): set the clock by NTP before TLS checks a certificate's dates, and, when a
# run ends, reset after a journal error (a few times) or idle with the REPL reachable. (WiFi is dmqtt.wifi's.)

import time

from dboard import console


def set_clock(valid_from):
    """An ESP32 without a set RTC starts in 2000-01-01, where every certificate is "not yet valid": the clock is
    set by NTP before the first TLS connect. A board whose clock cannot be set refuses to connect, saying why,
    and retries with the connection's backoff."""
    try:
        import ntptime

        ntptime.settime()
    except (ImportError, OSError, OverflowError):
        pass
    year = time.gmtime()[0]
    if year < valid_from:
        raise OSError("tls: the clock says %d and NTP could not set it: certificate validity cannot be checked" % year)
    print("tls: clock set by NTP")


def journal_failures(failed):
    """Consecutive boots that ended in a journal error, counted in a file on the filesystem (the journal's own
    partition is the thing that failed); a boot that completes its run clears the count. Real boards only: their
    filesystem is mounted at /."""
    path = "/journal_failures.txt"
    try:
        with open(path) as f:
            count = int(f.read())
    except (OSError, ValueError):
        count = 0
    count = count + 1 if failed else 0
    try:
        with open(path, "w") as f:
            f.write(str(count))
    except OSError:
        pass
    return count


def finish(journal_failed, resets):
    """After the run: a journal error resets the board up to `resets` times in a row, then it stays stopped;
    either way it idles, the REPL reachable."""
    failures = journal_failures(journal_failed)
    if journal_failed:
        if failures <= resets:
            import machine

            print(console.JOURNAL_ERROR % ("resetting the board (%d of %d)" % (failures, resets)))
            time.sleep(1)
            machine.reset()
        print(
            console.JOURNAL_ERROR % ("%d resets did not help; stopped. Erase the mqttlog partition or reflash" % resets)
        )
    while True:
        time.sleep(1)
