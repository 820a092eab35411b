"""Tests that the README's recipes and the scripts they name agree and work:
- the CPU recipe runs verbatim (at 3 steps, 1 validation batch and 2 seeds, on tiny shards made
  here), both schemes with the same config on the CPU, so the comparison warns about nothing and
  its verdict has an interval;
- one definition of the CPU scale: reproduce_paper.sh --scale cpu trains with
  configs/cpu_small.json and nothing else, and the README describes that config;
- make bench passes ARGS on to bench_cpu.sh; the README mentions --quick and --dry-run;
- data/README.md's inspect_shard example reads a dataset its preceding lines prepare;
- the README's example of a training run is what that command prints: its header lines word
  for word, every other line with its numbers masked (the data and the timings differ here).
Needs $BUILD/train and $BUILD/sample (test/run_tests.sh builds them)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test"))
sys.path.insert(0, os.path.join(ROOT, "data"))

from testlib import check, finish, skip  # noqa: E402
import gpt2_tokenizer as gt  # noqa: E402
import shards  # noqa: E402
from vocab import find_mirror  # noqa: E402

BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
README = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
DATA_README = open(os.path.join(ROOT, "data", "README.md"), encoding="utf-8").read()


def sh(cmd, cwd=ROOT, timeout=600):
    p = subprocess.run(["bash", "-c", cmd], cwd=cwd, capture_output=True, timeout=timeout,
                       encoding="utf-8", errors="replace")  # sampled text may hold partial characters
    return p.returncode, p.stdout, p.stderr


def code_block_after(marker, text=README, fence="```bash\n"):
    """The lines of the first code block (opened by fence) after marker in text."""
    i = text.find(marker)
    if i < 0:
        return None
    block = text[i:].split(fence, 1)[1].split("```", 1)[0]
    return [l for l in block.splitlines() if l.strip()]


def masked(line):
    """A line of the trainer's output with its numbers (and the spaces that pad them) as #."""
    return re.sub(r" *[0-9][0-9.,e+-]*", "#", line)


# ---- one definition of the CPU scale --------------------------------------------------------
cfg = json.load(open(os.path.join(ROOT, "configs", "cpu_small.json")))
tmp = tempfile.mkdtemp(prefix="test_recipes_")
try:
    rc, out, err = sh(f"scripts/reproduce_paper.sh --scale cpu --dry-run --no-build --datasets wikitext2 "
                      f"--pos rope --out {tmp}/grid")
    cmds = [l for l in out.splitlines() if l.startswith("+ ") and "--run_dir" in l]
    words = cmds[0].split() if cmds else []
    keys = sorted(w for w in words[2:] if w.startswith("--"))
    check("cpu_scale_is_cpu_small_json", rc == 0 and "--config configs/cpu_small.json" in cmds[0]
          and keys == ["--config", "--pos", "--run_dir", "--seed", "--train_data", "--val_data"]
          if cmds else False, out[-600:] + err[-300:])
    rc, out, err = sh(f"scripts/reproduce_paper.sh --dry-run --no-build --datasets ptb --pos crope --out {tmp}/g2")
    check("paper_scale_is_paper_json", rc == 0 and f"+ {os.environ.get('TRAIN', 'build/train')} --config configs/paper.json --pos crope" in out,
          out[-400:] + err[-300:])
    # each scale its own default folder, so runs of one never stand in for the other's
    rc, out, err = sh("scripts/reproduce_paper.sh --scale cpu --dry-run --no-build --datasets ptb --pos rope")
    rc2, out2, err2 = sh("scripts/reproduce_paper.sh --dry-run --no-build --datasets ptb --pos rope")
    check("scales_default_folders", "--run_dir runs/cpu/ptb-rope-s1" in out and "--run_dir runs/paper/ptb-rope-s1" in out2,
          out[-300:] + out2[-300:])
    rc, out, err = sh("scripts/reproduce_paper.sh --dry-run --no-build --datasets ptb --pos 'rope bogus'")
    check("reproduce_paper_unknown_pos", rc == 1 and "error: unknown pos 'bogus' (one of: " in err, err[-300:])
    # A=B: scheme A at B's parameter count (match_params), a group of its own
    rc, out, err = sh(f"scripts/reproduce_paper.sh --dry-run --no-build --datasets ptb --pos 'crope=rope' --out {tmp}/g3")
    check("reproduce_paper_equal_params", rc == 0 and "--pos crope --train_data" in out
          and f"--seed 1 --match_params rope --run_dir {tmp}/g3/ptb-crope=rope-s1" in out, out[-400:] + err[-300:])
    rc, out, err = sh("scripts/reproduce_paper.sh --dry-run --no-build --datasets ptb --pos 'crope=bogus'")
    check("reproduce_paper_equal_params_unknown", rc == 1 and "error: unknown pos 'bogus' (one of: " in err, err[-300:])
    # --device cpu builds what make run builds (make cpu: build_cpu/, no CUDA backend) and trains
    # with it; any other device, make's whole build
    # (the default trainer: without the TRAIN the test runner sets)
    rc, out, err = sh(f"env -u TRAIN scripts/reproduce_paper.sh --scale cpu --dry-run --datasets wikitext2 --pos rope "
                      f"--out {tmp}/g4 -- --device cpu")
    rc2, out2, err2 = sh(f"env -u TRAIN scripts/reproduce_paper.sh --dry-run --datasets ptb --pos rope --out {tmp}/g5")
    check("recipe_cpu_builds_make_cpu", rc == 0 and out.startswith("+ make cpu CPU_BUILD=build_cpu\n")
          and "+ build_cpu/train --config configs/cpu_small.json" in out and out2.startswith("+ make BUILD=build\n"),
          out[:300] + err[-300:] + out2[:200])
    # the recipe's time and disk: measured once, in scripts/results/cpu_recipe.md, and --help agrees
    rc, out, err = sh("scripts/reproduce_paper.sh --help")
    measured = re.search(r"\*\*about (\d+) minutes and ([0-9.]+ GB)\*\*",
                         open(os.path.join(ROOT, "scripts", "results", "cpu_recipe.md"), encoding="utf-8").read())
    check("recipe_time_disk_help_agrees", measured and re.search(
        rf"16 runs at --jobs 2 on 2 cores: about {measured[1]} minutes and {measured[2]}", out) is not None,
        f"{measured and measured.groups()} {out[-700:]}")
    desc = (f"{cfg['steps']} AdamW steps of {cfg['batch_size']} x {cfg['seq_len']} tokens, lr {cfg['lr']:g} "
            f"x{cfg['gamma']:g} every {cfg['step_size']} steps")
    check("readme_cpu_scale_is_the_config", desc in README, f"README does not say {desc!r}")

    # ---- make bench ARGS, and the options the README mentions ----------------------------
    rc, out, err = sh(f"make -n bench ARGS='--quick --no-torch' BUILD={os.environ.get('BUILD', 'build')}")
    check("make_bench_passes_args", "bench_cpu.sh --quick --no-torch" in out, out[-300:] + err[-300:])
    rc, out, err = sh("scripts/bench_cpu.sh --bogus")
    check("bench_rejects_unknown_option", rc == 1 and "error: unknown option '--bogus'" in err, err)
    check("readme_mentions_quick_and_dry_run", "ARGS=--quick" in README and "--dry-run" in README)

    # ---- the Datasets block inspects a dataset that it prepares -----------------------------
    lines = code_block_after("# Datasets", DATA_README) or []
    prepared = {m.group(1) for l in lines for m in [re.search(r"prepare_data\.py (\w+)", l)] if m}
    inspected = [m.group(1) for l in lines for m in [re.search(r"inspect_shard\.py data/(\w+)/", l)] if m]
    check("readme_inspects_a_prepared_dataset", inspected and all(d in prepared for d in inspected),
          f"prepared {prepared}, inspected {inspected}")

    # ---- the CPU commands name make run's build (build_cpu/), which make builds too ----------
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().splitlines()
    cpu_on_build = [l for l in readme if re.search(r"\bbuild/(train|sample)\b", l) and "--device cpu" in l]
    check("readme_cpu_commands_use_build_cpu", not cpu_on_build, "; ".join(cpu_on_build)[:600])
    rc, out, err = sh("env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS make -n all NVCC=")
    check("make_builds_build_cpu", rc == 0 and "build_cpu/train" in out and "build_cpu/sample" in out, err[-400:])

    # ---- the CPU recipe, verbatim but for 3 steps, in a copy of the layout -----------------
    recipe = code_block_after("<!-- cpu-recipe")
    train, sample = os.path.join(BUILD, "train"), os.path.join(BUILD, "sample")
    if not recipe:
        check("cpu_recipe_runs", False, "no <!-- cpu-recipe --> block in README.md")
    elif not (os.access(train, os.X_OK) and os.access(sample, os.X_OK)):
        check("cpu_recipe_runs", False, f"{train} or {sample} not built")
    else:
        work = os.path.join(tmp, "clone")
        os.makedirs(os.path.join(work, "data", "wikitext2"))
        for d in ("scripts", "configs", "src"):  # compare_runs.py reads the schemes from src/pos.h
            os.symlink(os.path.join(ROOT, d), os.path.join(work, d))
        for b in ("build", "build_cpu"):  # the recipe's --device cpu trains with build_cpu/ (make cpu)
            os.symlink(BUILD, os.path.join(work, b))
        # copies, not links: Python resolves a script's links, and the tokenizer would then look
        # for its vocabulary cache in this repository's data/gpt2/ instead of the clone's
        for f in os.listdir(os.path.join(ROOT, "data")):
            if f.endswith(".py"):
                shutil.copy(os.path.join(ROOT, "data", f), os.path.join(work, "data", f))
        # Stand-in for prepare_data.py: tiny random shards, and the vocabulary in data/gpt2/.
        import numpy as np
        rng = np.random.default_rng(5)
        for split, n in (("train", 20000), ("val", 6000)):
            shards.write_shard(os.path.join(work, "data", "wikitext2", f"wikitext2_{split}_000000.bin"),
                               rng.integers(0, 50257, size=n))
        mirror = find_mirror()
        have_vocab = False
        try:
            gt.install_vocab(mirror, os.path.join(work, "data", "gpt2")) if mirror else None
            have_vocab = mirror is not None
        except gt.DataError:
            pass
        script = []
        for l in recipe:
            if l.split()[0] == "make":
                continue                  # the test runner built $BUILD already
            if "prepare_data.py" in l:
                continue                  # replaced by the stand-in above
            if "--prompt " in l and not have_vocab:
                continue                  # encoding the prompt needs the vocabulary
            tiny = "--steps 3 --eval_batches 1 --eval_seq_lens 64"  # tiny, but every line as written
            if l.startswith("build_cpu/train "):
                l += " " + tiny
            if l.startswith("scripts/reproduce_paper.sh "):  # the same, at 2 seeds
                grid, _, args = l.partition(" -- ")
                l = f"{grid} --no-build --seeds 2 -- {args} {tiny}"
            script.append(l)
        trains = [l for l in recipe if l.startswith(("build_cpu/train ", "scripts/reproduce_paper.sh "))]
        check("cpu_recipe_on_the_cpu", trains and all("--device cpu" in l for l in trains), str(trains))
        rc, out, err = sh("set -e\n" + "\n".join(script), cwd=work)
        md = os.path.join(work, "runs", "cpu", "compare.md")
        table = open(md, encoding="utf-8").read() if os.path.exists(md) else ""
        check("cpu_recipe_runs", rc == 0 and "| wikitext2 | rope |" in table and "| wikitext2 | crope |" in table
              and os.path.exists(os.path.join(work, "runs", "cpu", "compare.png")), f"rc={rc} {out[-500:]} {err[-800:]}")
        check("cpu_recipe_verdict_has_interval", "paired, 2 seeds |" in table, table[-600:])
        check("cpu_recipe_same_config", table and "WARNING" not in table and "warning:" not in err, err[-500:])
        if have_vocab:
            check("cpu_recipe_sample_prints_text", rc == 0 and "The history of" in out, out[-400:])
        else:
            skip("cpu_recipe_sample_prints_text", "no GPT-2 vocabulary here (no mirror)")

    # ---- the example of a training run: the command, on tiny shards of the same names --------
    example = code_block_after("<!-- run-example", fence="```\n") or []
    if not example or not example[0].startswith("$ build_cpu/train "):  # make run's and make's
        check("run_example_matches", False, "no <!-- run-example --> block starting with '$ build_cpu/train'")
    else:
        # the recipe's clone has data/wikitext2 and the config's paths; a fresh run folder
        cmd = example[0][2:].replace("/tmp/example_run", os.path.join(tmp, "example_run"))
        rc, out, err = sh(cmd, cwd=os.path.join(tmp, "clone"))
        got = [l for l in out.splitlines() if l.strip()]
        header = 4  # model, parameters, memory: the config's alone, so word for word
        why = [f"line {i + 1}: README {w!r} vs {g!r}" for i, (w, g) in enumerate(zip(example[1:], got))
               if (w != g if i < header else masked(w) != masked(g))]
        if len(got) != len(example) - 1:
            why.append(f"{len(example) - 1} lines in the README, {len(got)} printed")
        check("run_example_matches", rc == 0 and not why, f"rc={rc} " + "; ".join(why)[:900] + err[-300:])
finally:
    shutil.rmtree(tmp, ignore_errors=True)

finish()
