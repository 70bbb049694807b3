# The command line shared by the vector runners on MicroPython: run_all(VECTORS.json, FUZZ_ITERATIONS) and one
# line per result, "PASS<TAB>name" or "FAIL<TAB>name<TAB>why", which tests/conftest.py reads back.
import sys


def main(run_all):
    iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    for name, problem in run_all(sys.argv[1], iterations):
        print(("FAIL\t%s\t%s" % (name, problem)) if problem else ("PASS\t%s" % name))
