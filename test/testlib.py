"""Tiny test protocol shared by the Python tests: one line per check,
PASS / FAIL / SKIPPED, counted by test/run_tests.sh."""
import os
import subprocess
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


def run_without(module, script, args):
    """Runs the Python script with args, its folder first on the path as for `python3 SCRIPT`,
    as if `module` were not installed (an import of it raises ImportError); returns (exit
    status, stderr)."""
    code = (f"import runpy, sys; sys.modules[{module!r}] = None; sys.argv = {[script] + list(args)!r}; "
            f"sys.path.insert(0, {os.path.dirname(os.path.abspath(script))!r}); "
            f"runpy.run_path({script!r}, run_name='__main__')")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stderr


def finish():
    sys.exit(1 if _failed else 0)
