"""Tiny test protocol shared by the Python tests: one line per check,
PASS / FAIL / SKIPPED, counted by test/run_tests.sh."""
import contextlib
import io
import os
import runpy
import subprocess
import sys
import traceback

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


def run_in_process(script, args):
    """The Python script with args, run in this process as `python3 SCRIPT ARGS` would run it (its
    imports are loaded once: numpy, matplotlib or torch took a second or more a process); returns
    (exit status, stdout, stderr), an uncaught exception's traceback in stderr."""
    out, err, argv, path, rc = io.StringIO(), io.StringIO(), sys.argv, list(sys.path), 0
    sys.argv = [script] + list(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_path(script, run_name="__main__")
            except SystemExit as e:
                if isinstance(e.code, str):
                    print(e.code, file=sys.stderr)
                rc = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
            except Exception:  # noqa: BLE001 (python prints it and exits with 1)
                traceback.print_exc()
                rc = 1
    finally:
        sys.argv, sys.path[:] = argv, path
    return rc, out.getvalue(), err.getvalue()


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
