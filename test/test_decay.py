"""Tests scripts/plot_decay.py: RoFormer's bound at known values, the mean probability by distance
of hand-made attention maps (uniform, all on the previous token), the figure and table of two
schemes, and the bad inputs (missing file, wrong shape, rows that are not probabilities, mixed
lengths, bad options, a run folder with no checkpoint)."""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from testlib import check, finish  # noqa: E402
import plot_decay  # noqa: E402

SCRIPT = os.path.join("scripts", "plot_decay.py")


def run(args):
    p = subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def expect_error(name, args, pattern):
    rc, out, err = run(args)
    check(name, rc == 1 and re.search(pattern, err, re.M) and "Traceback" not in err,
          f"rc {rc}, stderr {err!r}")


def uniform(L, H, T):
    """(L, H, T, T): query i gives 1/(i+1) to every key it sees."""
    m = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    return np.broadcast_to(m, (L, H, T, T)).copy()


def previous(L, H, T):
    """(L, H, T, T): every query but the first puts all on the token before it."""
    m = np.eye(T, k=-1)
    m[0, 0] = 1.0
    return np.broadcast_to(m, (L, H, T, T)).copy()


def write(path, pos, att, shape=None):
    with open(path, "w") as f:
        json.dump({"checkpoint": "x", "pos": pos, "tokens": list(range(att.shape[-1])),
                   "shape": shape or list(att.shape), "attention": att.tolist()}, f)
    return path


# the bound: D = 2 has one pair, |S_1| = 1 at every distance; D = 4: θ = 1, 0.01, so
# (|e^{ir}| + |e^{ir} + e^{0.01 i r}|) / 2 = (1 + 2 |cos(0.495 r)|) / 2; at r = 0, (D/2 + 1) / 2
r = np.arange(0, 2000, 7)
check("bound_one_pair", np.allclose(plot_decay.rope_bound(2, 10000.0, r), 1.0))
check("bound_two_pairs", np.allclose(plot_decay.rope_bound(4, 10000.0, r), (1 + 2 * np.abs(np.cos(0.495 * r))) / 2))
b = plot_decay.rope_bound(32, 10000.0, np.arange(1025))
check("bound_at_zero", b[0] == 8.5, f"{b[0]}")
check("bound_decays", b[1] > b[16] > b[256] and b[1000] < 0.5 * b[0], f"{b[[1, 16, 256, 1000]]}")

# the curves relative to uniform: uniform maps give 1 at every distance; previous-token maps give
# query 0's 1 over T queries at distance 0, and the mean of i + 1 over queries 1 … T-1 at distance 1
T = 6
total, count = plot_decay.by_distance(uniform(2, 3, T))
check("uniform_maps_give_one", np.allclose(total / count, 1.0), f"{total / count}")
check("counts", list(count) == [6 * (T - d) for d in range(T)], f"{count}")
PREV = np.array([1 / T, (2 + 3 + 4 + 5 + 6) / 5, 0, 0, 0, 0])
total, count = plot_decay.by_distance(previous(1, 2, T))
check("previous_token_maps", np.allclose(total / count, PREV), f"{total / count}")

with tempfile.TemporaryDirectory() as tmp:
    a = write(os.path.join(tmp, "a.json"), "rope", previous(1, 2, T))
    b = write(os.path.join(tmp, "b.json"), "rope", uniform(1, 2, T))
    c = write(os.path.join(tmp, "c.json"), "alibi", uniform(2, 1, T))
    out_png = os.path.join(tmp, "d.png")
    rc, out, err = run([a, b, c, "--out", out_png])
    with open(out_png, "rb") if os.path.exists(out_png) else open(os.devnull, "rb") as f:
        png = f.read(4)
    check("figure_written", rc == 0 and png[1:4] == b"PNG" and out.startswith(f"decay figure: {out_png} (T 6;"),
          f"rc {rc} {out} {err}")
    rows = {line.split(" | ")[0].strip("| "): line for line in out.splitlines() if line.startswith("| ")}
    # rope: the mean of the two maps (2 heads each); alibi: uniform, 1 everywhere, near/far 1
    want = (PREV + 1) / 2
    check("table_rows", list(rows) == ["scheme", "rope", "alibi"], f"{list(rows)}")
    check("table_rope", rows.get("rope", "").startswith("| rope | 2 | " + " | ".join(f"{v:.4f}" for v in want[[0, 1, 2, 4, 5]])
                                                        + f" | {want[1:5].mean() / want[3:].mean():.2f} |"), rows.get("rope"))
    check("table_alibi", rows.get("alibi") == "| alibi | 1 | " + " | ".join(["1.0000"] * 5) + " | 1.00 |", rows.get("alibi"))

    expect_error("missing_file", [os.path.join(tmp, "none.json")], r"^error: .*none\.json: no such file or folder$")
    flat = write(os.path.join(tmp, "flat.json"), "rope", np.ones((2, 3, 3)))
    expect_error("wrong_shape", [flat], r"^error: .*flat\.json: attention has shape \[2, 3, 3\], expected \(L, H, T, T\)$")
    lied = write(os.path.join(tmp, "lied.json"), "rope", uniform(1, 1, 4), shape=[1, 1, 5, 5])
    expect_error("shape_differs_from_file", [lied], r"^error: .*lied\.json: attention has shape \[1, 1, 4, 4\], the file says \[1, 1, 5, 5\]$")
    bad = uniform(1, 1, 4)
    bad[0, 0, 1, 3] = 0.1
    expect_error("not_causal", [write(os.path.join(tmp, "nc.json"), "rope", bad)], r"^error: .*nc\.json: attention rows are not causal")
    bad = uniform(1, 1, 4) * 2
    expect_error("not_summing_to_one", [write(os.path.join(tmp, "ns.json"), "rope", bad)], r"^error: .*ns\.json: attention rows are not causal")
    short = write(os.path.join(tmp, "short.json"), "rope", uniform(1, 1, 4))
    expect_error("mixed_lengths", [a, short], r"^error: .*short\.json: maps of 4 tokens beside others of 6$")
    with open(os.path.join(tmp, "junk.json"), "w") as f:
        f.write("{not json")
    expect_error("not_json", [os.path.join(tmp, "junk.json")], r"^error: cannot read the attention maps .*junk\.json")
    with open(os.path.join(tmp, "other.json"), "w") as f:
        json.dump({"pos": "rope"}, f)
    expect_error("not_maps", [os.path.join(tmp, "other.json")], r"^error: .*other\.json: not an attention-map file")
    expect_error("odd_head_dim", [a, "--head_dim", "31"], r"^error: --head_dim 31: must be even and at least 2$")
    expect_error("zero_windows", [a, "--windows", "0"], r"^error: --windows 0: must be at least 1$")
    os.makedirs(os.path.join(tmp, "run"))
    with open(os.path.join(tmp, "run", "config.json"), "w") as f:
        json.dump({"seq_len": 4, "val_data": os.path.join(tmp, "nothing_*.bin")}, f)
    expect_error("run_without_shard", [os.path.join(tmp, "run")], r"^error: no validation shard matches .*nothing_\*\.bin.* \(give --val\)$")
    with open(os.path.join(tmp, "run", "config.json"), "w") as f:
        json.dump({"pos": "rope"}, f)
    expect_error("run_config_without_keys", [os.path.join(tmp, "run")], r"^error: .*run/config\.json: not a run's config \(no seq_len or val_data\)$")
    check("nothing_written_on_error", not os.path.exists(os.path.join(tmp, "decay.png")))
finish()
