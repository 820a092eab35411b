"""An external reference, as llm.c's test_gpt2: for every position scheme the trainer
knows (build/train --list-pos), scripts/torch_reference.py (PyTorch, float64) writes its
initial weights, the trainer starts from them (--init_from) and both take the same first
steps on the same batches; the training losses and gradient norms must agree to 1e-5
relative; also CRoPE with another MLP width (mlp_hidden 40, not 4C = 64), the sinusoidal
table at a factor other than the default (sin_scale 1, the original table), and RoPE and CRoPE
under every RoPE scaling (s > 1 in training), and partial rotary (half of each head's channels
rotating) for the rotary schemes and under scalings, with the validation loss at 1x, 2x and 4x the
training length after the steps. SKIPPED when
PyTorch is not installed (Debian: python3-torch)."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "data"))
from testlib import check, finish, run_in_process, skip  # noqa: E402
import shards  # noqa: E402

TRAIN = os.environ.get("TRAIN", os.path.join(ROOT, "build", "train"))
REFERENCE = os.path.join(ROOT, "scripts", "torch_reference.py")
TOL = 1e-5
STEPS = 4
# a tiny model: L=2, H=2, C=16 (head size 8), V=64, batches of 2 x 8 tokens
MODEL = {"n_layer": 2, "n_head": 2, "n_embd": 16, "vocab_size": 64, "max_seq_len": 16}
BATCH = {"batch_size": 2, "seq_len": 8}
OPTIM = {"lr": 1e-2, "weight_decay": 0.01}
# RoPE scaling: validation at 1x, 2x and 4x seq_len over the same 2 x 32 targets; training length 4,
# so that s = max(1, L / 4) is 2 in training and 4, 8 at the longer lengths (factor 0)
VAL_LENS = [8, 16, 32]
VAL_TOKENS = BATCH["batch_size"] * VAL_LENS[-1]
SCALINGS = ["none", "linear", "ntk", "dynamic", "yarn", "llama3"]
# llama3 at training length 100 and s 4: of the head's wavelengths 2 pi 10^(2j/R) (R 8: 6.3, 63, 628,
# 6283) one under L_train/4, one on the ramp, two past L_train (at training length 4 all are past it);
# with R 4 (partial_rotary_factor 0.5: 6.3 and 628) one kept and one interpolated
LLAMA3_RAMP = {"rope_scaling": "llama3", "rope_scaling_factor": 4, "rope_train_len": 100}
HALF = {"partial_rotary_factor": 0.5}


def flags(d):
    return [x for k, v in d.items() for x in (f"--{k}", str(v))]


def rel(a, b):
    return abs(a - b) / max(abs(a), abs(b), 1e-30)


def compare(pos, tmp, shard, name, model=MODEL, scaling=None, val=None):
    """scaling: the RoPE scaling's flags; val: a validation shard, scored after the steps at 1x, 2x
    and 4x seq_len (VAL_LENS) by both."""
    init = os.path.join(tmp, f"init_{name}.safetensors")
    extra = flags(scaling or {})
    ref_val = ["--val_data", val, "--val_lens", ",".join(map(str, VAL_LENS)), "--val_tokens", str(VAL_TOKENS)]
    rc, ref_out, ref_err = run_in_process(REFERENCE, ["--pos", pos, "--data", shard, "--save_init", init,
                                                      "--dtype", "float64", "--steps", str(STEPS), "--threads", "1"]
                                          + flags(model) + flags(BATCH) + flags(OPTIM) + extra
                                          + (ref_val if val else []))
    if rc != 0:
        return f"torch_reference.py failed: {ref_err.strip()[-300:]}"
    lines = [json.loads(line) for line in ref_out.splitlines() if line.startswith("{")]
    expect = [r for r in lines if "val_loss" not in r]
    run = os.path.join(tmp, f"run_{name}")
    # one evaluation, after the last step: B windows of the longest length, cut into each length's
    # pieces, are the reference's first VAL_TOKENS targets (eval_batches 1: B max(1, T / 4T) windows)
    tr_val = ["--val_data", val, "--eval_every", str(STEPS), "--eval_batches", "1",
              "--eval_seq_lens", ",".join(map(str, VAL_LENS))] if val else ["--eval_every", "0"]
    tr = subprocess.run([TRAIN, "--pos", pos, "--train_data", shard, "--init_from", init, "--steps", str(STEPS),
                         "--data_order", "sequential", "--schedule", "constant", "--warmup_steps", "0",
                         "--beta1", "0.9", "--beta2", "0.999", "--eps", "1e-8", "--decay", "all",
                         "--grad_clip", "0", "--checkpoint_every", "0", "--device", "cpu",
                         "--run_dir", run] + flags(model) + flags(BATCH) + flags(OPTIM) + extra + tr_val,
                        capture_output=True, text=True)
    if tr.returncode != 0:
        return f"build/train failed: {(tr.stderr or tr.stdout).strip()[-300:]}"
    with open(os.path.join(run, "log.jsonl")) as f:
        log = list(map(json.loads, f))
    got = [r for r in log if r.get("type") == "train"]
    if len(got) != STEPS or len(expect) != STEPS:
        return f"{len(got)} trainer steps and {len(expect)} reference steps, expected {STEPS}"
    pairs = [(f"step {e['step']} {key}", g[key], e[key]) for g, e in zip(got, expect) for key in ("loss", "grad_norm")]
    if val:
        got_val = {r["seq_len"]: r["loss"] for r in log if r.get("type") == "val" and r["step"] == STEPS}
        want_val = {r["seq_len"]: r["val_loss"] for r in lines if "val_loss" in r}
        if sorted(got_val) != VAL_LENS or sorted(want_val) != VAL_LENS:
            return f"validation lengths: trainer {sorted(got_val)}, torch {sorted(want_val)}, expected {VAL_LENS}"
        pairs += [(f"val loss at {t}", got_val[t], want_val[t]) for t in VAL_LENS]
    worst, where = 0.0, ""
    for what, g, e in pairs:
        err = rel(g, e)
        if err > worst:
            worst, where = err, f"{what}: trainer {g!r}, torch {e!r}"
    print(f"# {name}: max rel diff {worst:.2e} over {STEPS} steps (loss, grad_norm){' and validation' if val else ''}")
    return "" if worst <= TOL else f"rel diff {worst:.2e} > {TOL:g} at {where}"


def main():
    try:
        import torch  # noqa: F401
    except ImportError:
        skip("torch_reference", "PyTorch is not installed (Debian: apt-get install python3-torch)")
        return
    names = subprocess.run([TRAIN, "--list-pos"], capture_output=True, text=True).stdout.split()
    if not check("torch_reference_schemes_listed", names, f"{TRAIN} --list-pos printed nothing"):
        return
    with tempfile.TemporaryDirectory() as tmp:
        shard = os.path.join(tmp, "ref_train_000000.bin")
        n = STEPS * BATCH["batch_size"] * BATCH["seq_len"] + 1
        rng = __import__("random").Random(5)
        shards.write_shard(shard, [rng.randrange(MODEL["vocab_size"]) for _ in range(n)])
        for pos in names:
            why = compare(pos, tmp, shard, pos)
            check(f"torch_reference_{pos}", not why, why)
        why = compare("crope", tmp, shard, "crope_mlp_hidden_40", dict(MODEL, mlp_hidden=40))
        check("torch_reference_crope_mlp_hidden_40", not why, why)
        why = compare("sinusoidal", tmp, shard, "sinusoidal_sin_scale_1", dict(MODEL, sin_scale=1))
        check("torch_reference_sinusoidal_sin_scale_1", not why, why)
        val = os.path.join(tmp, "ref_val_000000.bin")
        shards.write_shard(val, [rng.randrange(MODEL["vocab_size"]) for _ in range(VAL_TOKENS + 1)])
        cases = [(pos, sc, {"rope_scaling": sc, "rope_train_len": 4}) for pos in ("rope", "crope") for sc in SCALINGS]
        cases.append(("rope", "yarn_factor_3", {"rope_scaling": "yarn", "rope_scaling_factor": 3}))
        cases.append(("rope", "llama3_ramp", LLAMA3_RAMP))
        cases += [(pos, "none_partial_0.5", HALF) for pos in ("rope", "crope", "xpos")]
        cases += [("rope", f"{sc}_partial_0.5", dict(HALF, rope_scaling=sc, rope_train_len=4)) for sc in ("ntk", "yarn")]
        cases.append(("rope", "llama3_ramp_partial_0.5", dict(HALF, **LLAMA3_RAMP)))
        for pos, sc, scaling in cases:
            name = f"torch_reference_{pos}_scaling_{sc}"
            why = compare(pos, tmp, shard, name, scaling=scaling, val=val)
            check(name, not why, why)


main()
finish()
