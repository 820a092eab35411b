"""Every position scheme of src/pos.h (as build/train --list-pos prints them) is covered:
by the gradient check (test_gradcheck --list), by the CPU-vs-CUDA model tests (test_cuda
--list, the emulated build's unless only a GPU build exists), by the PyTorch reference
(scripts/torch_reference.py --pos accepts it; test_torch_reference runs each listed scheme),
and by the comparison scripts (compare_runs.py reads the schemes from pos.h and colours each,
reproduce_paper.sh offers it). A scheme added to pos.h fails here until each of them knows it."""
import ast
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from testlib import check, finish  # noqa: E402

BUILD = os.environ.get("BUILD", "build")
EMU_BUILD = os.environ.get("EMU_BUILD", BUILD + "_emu")
TRAIN = os.environ.get("TRAIN", os.path.join(BUILD, "train"))


def run(cmd, **env):
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, **env})
    return r.returncode, r.stdout + r.stderr


def argparse_choices(path, flag):
    """The choices=[...] of an add_argument(flag, ...) call in a Python file."""
    with open(os.path.join(ROOT, path)) as f:
        for node in ast.walk(ast.parse(f.read())):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument" and node.args
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value == flag):
                for kw in node.keywords:
                    if kw.arg == "choices":
                        return ast.literal_eval(kw.value)
    return None


def missing(names, have):
    return [n for n in names if n not in have]


rc, out = run([TRAIN, "--list-pos"])
names = out.split() if rc == 0 else []
check("pos_list", rc == 0 and len(names) >= 4 and len(set(names)) == len(names),
      f"{TRAIN} --list-pos: status {rc}, {out.strip()[:200]!r}")

rc, out = run([os.path.join(BUILD, "test", "test_gradcheck"), "--list"])
have = set(out.split())
gaps = [n for p in names for n in (f"gradcheck_model_{p}", f"float_vs_double_{p}") if n not in have]
check("pos_covered_by_gradcheck", rc == 0 and names and not gaps, f"status {rc}, missing {gaps}")

test_cuda = os.path.join(EMU_BUILD, "test", "test_cuda")
if not os.path.exists(os.path.join(ROOT, test_cuda)):
    test_cuda = os.path.join(BUILD, "test", "test_cuda")
rc, out = run([test_cuda, "--list"])
have = set(out.split())
gaps = [n for p in names for n in (f"cuda_model_{p}_loss", f"cuda_model_{p}_grads", f"cuda_model_{p}_adamw5")
        if n not in have]
check("pos_covered_by_cuda_tests", rc == 0 and names and not gaps, f"status {rc}, missing {gaps}")

choices = argparse_choices("scripts/torch_reference.py", "--pos") or []
check("pos_covered_by_torch_reference", names and list(choices) == names,
      f"torch_reference.py --pos choices {choices}, schemes {names}")

# compare_runs.py reads the schemes from src/pos.h itself (no build needed): the same names in
# the same order as the binary's; each scheme has a colour of its own, a new one a fallback
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import compare_runs  # noqa: E402
order = compare_runs.POS_ORDER
check("pos_covered_by_compare_runs", names and order == names,
      f"compare_runs.py reads {order} from src/pos.h; {TRAIN} --list-pos prints {names}")
colours = [compare_runs.pos_colour(p) for p in names]
check("pos_colours_distinct", len(set(colours)) == len(names) and "#7f7f7f" not in colours,
      f"colours {dict(zip(names, colours))}")
compare_runs.POS_ORDER = names + ["newpos"]  # a scheme added to pos.h, which compare_runs.py has no colour for
new = compare_runs.pos_colour("newpos")
check("pos_new_scheme_gets_fallback_colour", new == compare_runs.FALLBACK_COLOURS[0] and new not in colours,
      f"newpos: {new}")

rc, out = run(["bash", "scripts/reproduce_paper.sh", "--dry-run", "--no-build", "--datasets", "wikitext2",
               "--pos", " ".join(names), "--out", "/nonexistent/grid"], TRAIN=TRAIN)
trained = " ".join(line for line in out.splitlines() if line.startswith("+ ") and "--pos" in line).split()
check("pos_covered_by_reproduce_paper", rc == 0 and names and not missing(names, trained),
      f"status {rc}, reproduce_paper.sh --dry-run trains no {missing(names, trained)}: {out[-300:]}")

finish()
