# Virtual-board test app: check every record already in /flash/log.txt, then append BATCH more, each flushed
# before "flushed N" is printed. Power-cut anywhere, the next boot must find every flushed record intact.
import sys

PATH = "/flash/log.txt"
BATCH = 4


def record(i):
    return "rec %06d %s\n" % (i, "abcdefghij"[i % 10] * 20)


def verify():
    count = 0
    try:
        f = open(PATH)
    except OSError:
        return 0
    with f:
        for line in f:
            if line != record(count):
                print("corrupt record", count, repr(line))
                sys.exit(2)
            count += 1
    return count


count = verify()
print("intact", count)
with open(PATH, "a") as f:
    for i in range(count, count + BATCH):
        f.write(record(i))
        f.flush()
        print("flushed", i + 1)
