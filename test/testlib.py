"""Tiny test protocol shared by the Python tests: one line per check,
PASS / FAIL / SKIPPED, counted by test/run_tests.sh."""
import sys

_failed = 0


def check(name, cond, why=""):
    global _failed
    if cond:
        print(f"PASS {name}", flush=True)
    else:
        _failed += 1
        print(f"FAIL {name}: {why or 'check failed'}", flush=True)
    return bool(cond)


def skip(name, why):
    print(f"SKIPPED {name}: {why}", flush=True)


def finish():
    sys.exit(1 if _failed else 0)
