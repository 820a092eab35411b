"""Tests scripts/compare_runs.py on hand-made run folders whose final numbers
are known: means and std over seeds, differences to RoPE, perplexity, the
cut-run marker, figures written, and the error cases."""
import gzip
import json
import shutil
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))
from testlib import check, finish, run_in_process, run_without  # noqa: E402

SCRIPT = os.path.join("scripts", "compare_runs.py")
PARAMS = {
    "rope": {"total": 7226240, "embeddings": 6432896, "attention": 264192},
    "crope": {"total": 7127936, "embeddings": 6432896, "attention": 165888},
    "learned": {"total": 7357312, "embeddings": 6563968, "attention": 264192},
}


def write_run(root, name, dataset, pos, seed, finals, *, steps=100, last_step=None,
              one_based=False, tps=1000.0, extra_lens=None, truncate_tail=False,
              config_in_log=True, accuracy=None, cfg_extra=None, arithmetic=(), flops=None, params=None):
    """A run whose val loss (at seq_len 64) every 20 steps follows `finals`
    (list of values, the last one is the final loss); `extra_lens`: {length: loss, or (loss,
    accuracy)} at the last step; `arithmetic`: what the first record's run_on says, then a
    "resumed" record mid-run for each further value; `params`: the log's counts (default PARAMS')."""
    d = os.path.join(root, name)
    os.makedirs(d)
    cfg = {"pos": pos, "seed": seed, "steps": steps, "seq_len": 64, "batch_size": 8,
           "lr": 1e-3, "n_layer": 4, "n_head": 4, "n_embd": 128, "max_seq_len": 1024,
           "train_data": f"data/{dataset}/{dataset}_train_*.bin",
           "val_data": f"data/{dataset}/{dataset}_val_*.bin", "run_dir": d}
    cfg.update(cfg_extra or {})
    recs = []
    if config_in_log:
        recs.append({"type": "config", "config": cfg, "params": params or PARAMS[pos]})
        if arithmetic:
            recs[-1]["run_on"] = {"device": "cuda (GPU)", "arithmetic": arithmetic[0]}
    else:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
    first = 1 if one_based else 0
    last = (steps if one_based else steps - 1) if last_step is None else last_step
    val_steps = [s for s in range(first, last + 1) if s % 20 == 0 or s == last]
    val_steps = val_steps[-len(finals):]
    vals = dict(zip(val_steps, finals))
    for s in range(first, last + 1):
        if s == last // 2:
            recs += [{"type": "resumed", "step": s, "run_on": {"device": "cuda", "arithmetic": a}}
                     for a in arithmetic[1:]]
        recs.append({"type": "train", "step": s, "loss": 6.0 - s * 0.005 + 0.05 * math.sin(s),
                     "lr": 1e-3, "grad_norm": 1.0, "step_ms": 10.0,
                     "tokens_per_s": tps + s if isinstance(tps, float) else tps})
        if flops is not None:  # the trainer's FLOP/s, in logs of trainers that count them
            recs[-1]["flops_per_s"] = flops + 1e6 * s
        if s in vals:
            recs.append({"type": "val", "step": s, "loss": vals[s], "seq_len": 64})
            if accuracy is not None:  # the synthetic task's marker accuracy, final value
                recs[-1]["accuracy"] = accuracy if s == last else 0.1
            if s == last and extra_lens:
                for t, l in extra_lens.items():
                    recs.append({"type": "val", "step": s, "loss": l, "seq_len": t})
                    if isinstance(l, tuple):
                        recs[-1].update(loss=l[0], accuracy=l[1])
    text = "".join(json.dumps(r) + "\n" for r in recs)
    if truncate_tail:
        text += '{"type": "train", "step": 10'  # a run still writing its log
    with open(os.path.join(d, "log.jsonl"), "w") as f:
        f.write(text)
    return d


def run(args):
    return run_in_process(SCRIPT, args)


def parse_table(md, part=0):
    """The main table (part 0) or the table by evaluation length (part 1): {(dataset, pos): {column: cell}}."""
    rows = {}
    lines = [l for l in (md.split(" by evaluation length") + [""])[part].splitlines()
             if l.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    for l in lines[2:]:
        cells = [c.strip() for c in l.strip("|").split("|")]
        r = dict(zip(head, cells))
        rows[(r["dataset"], r["pos"])] = r
    return rows


def main():
    tmp = tempfile.mkdtemp(prefix="test_compare_")
    runs = [
        # wikitext2: two rope seeds, crope (final above its best), learned cut at 60/100
        write_run(tmp, "w-rope-s1", "wikitext2", "rope", 1, [5.9, 5.6, 5.5, 5.45, 5.40],
                  extra_lens={128: 5.6, 256: 5.9}),
        write_run(tmp, "w-rope-s2", "wikitext2", "rope", 2, [5.8, 5.5, 5.4, 5.35, 5.30],
                  tps=2000.0, extra_lens={128: 5.5, 256: 5.8}),
        write_run(tmp, "w-crope-s1", "wikitext2", "crope", 1, [5.8, 5.5, 5.4, 5.35, 5.36],
                  tps=3000, extra_lens={128: 5.45, 256: 5.6}),
        write_run(tmp, "w-learned-s1", "wikitext2", "learned", 1, [5.9, 5.7, 5.6, 5.5],
                  last_step=59),
        # ptb: steps logged 1..100, crope log with a cut-off last line,
        # rope with its config in config.json instead of the log
        write_run(tmp, "p-rope-s1", "ptb", "rope", 1, [4.5, 4.2, 4.1, 4.05, 4.02],
                  one_based=True, config_in_log=False),
        write_run(tmp, "p-crope-s1", "ptb", "crope", 1, [4.5, 4.2, 4.1, 4.05, 4.016],
                  one_based=True, truncate_tail=True),
    ]
    out = os.path.join(tmp, "out", "cmp")
    rc, so, se = run(runs + ["--out", out, "--smooth", "5"])
    check("compare_runs_exit_0", rc == 0, f"rc={rc} stderr={se[-500:]}")
    check("truncated_last_line_noted", "incomplete last line" in se, se[-300:])
    md = open(out + ".md").read() if os.path.exists(out + ".md") else ""
    check("table_printed_and_written", md and md.strip() in so, "PREFIX.md missing or differs from stdout")
    rows = parse_table(md) if md else {}
    r = rows.get(("wikitext2", "rope"), {})
    std = math.sqrt(2 * 0.05 ** 2)
    check("rope_two_seeds_mean_std", r.get("final val loss") == f"5.3500 ± {std:.4f}", r.get("final val loss"))
    check("rope_seeds_listed", r.get("seeds") == "2 (1,2)", r.get("seeds"))
    check("rope_perplexity", r.get("val ppl") == f"{math.exp(5.35):.2f}", r.get("val ppl"))
    check("rope_is_reference", r.get("Δ final vs rope") == "ref", r.get("Δ final vs rope"))
    check("rope_tokens_per_s_median", r.get("tokens/s") == "1,550", r.get("tokens/s"))
    check("rope_params", r.get("params") == "7,226,240" and r.get("attention params") == "264,192",
          f"{r.get('params')} {r.get('attention params')}")
    c = rows.get(("wikitext2", "crope"), {})
    check("crope_diff_to_rope", c.get("Δ final vs rope") == "+0.0100", c.get("Δ final vs rope"))
    check("crope_best_below_final", c.get("best val loss") == "5.3500" and c.get("final val loss") == "5.3600",
          f"{c.get('best val loss')} {c.get('final val loss')}")
    check("crope_attention_params", c.get("attention params") == "165,888", c.get("attention params"))
    check("crope_tokens_per_s", c.get("tokens/s") == "3,000", c.get("tokens/s"))
    l = rows.get(("wikitext2", "learned"), {})
    check("learned_cut_marker", "(unfinished: step 60 of 100)" in l.get("notes", ""), l.get("notes"))
    check("learned_cut_warned", f"warning: wikitext2 learned seed 1 ({runs[3]}): unfinished: step 60 of 100" in se
          and "did not run their config to the end" in md, se[-400:])
    check("learned_diff", l.get("Δ final vs rope") == "+0.1500 (not comparable)", l.get("Δ final vs rope"))
    pc = rows.get(("ptb", "crope"), {})
    check("ptb_crope_diff_negative", pc.get("Δ final vs rope") == "-0.0040", pc.get("Δ final vs rope"))
    check("one_based_complete_not_cut", pc.get("notes") == "" and rows.get(("ptb", "rope"), {}).get("notes") == "",
          f"{pc.get('notes')!r}")
    check("config_json_fallback", rows.get(("ptb", "rope"), {}).get("final val loss") == "4.0200",
          str(rows.get(("ptb", "rope"))))
    check("rows_ordered", [k for k in rows] == [("wikitext2", "learned"), ("wikitext2", "rope"),
                                                ("wikitext2", "crope"), ("ptb", "rope"), ("ptb", "crope")],
          str(list(rows)))
    # length extrapolation table: learned has no T=256 record -> n/a
    lt = md.split("## Final validation loss by evaluation length")[-1] if md else ""
    check("length_table_rope_mean", "| wikitext2 | rope | 5.3500 ± 0.0707 | 5.5500 ± 0.0707 | 5.8500 ± 0.0707 |" in lt,
          lt[:400])
    check("length_table_learned_na", "| wikitext2 | learned | 5.5000 | n/a | n/a |" in lt
          and "n/a: not evaluated at that length" in lt, lt[:400])
    rc2, so2, _ = run(runs[:3] + ["--out", os.path.join(tmp, "out20", "cmp")])
    check("length_table_no_na_note_without_na", rc2 == 0 and "| n/a |" not in so2 and "n/a:" not in so2, so2[-400:])
    for ext in ("png", "svg"):
        for p in (out + "." + ext, out + "_lengths." + ext):
            check(f"written_{os.path.basename(p)}", os.path.exists(p) and os.path.getsize(p) > 1000,
                  "missing or tiny")
    with open(out + ".png", "rb") as f:
        check("png_signature", f.read(8) == b"\x89PNG\r\n\x1a\n")

    check("no_accuracy_column_without_accuracy", "marker accuracy" not in so, so[:300])
    # --save-logs: small gzipped logs that redraw the same table
    saved = os.path.join(tmp, "saved")
    rc2, so2, se2 = run(runs[:3] + ["--out", os.path.join(tmp, "out6", "cmp"), "--smooth", "5", "--save-logs", saved])
    logs = sorted(os.listdir(saved)) if os.path.isdir(saved) else []
    rc3, so3, se3 = run([os.path.join(saved, f) for f in logs] + ["--out", os.path.join(tmp, "out7", "cmp"),
                                                                 "--smooth", "5"])
    check("saved_logs_redraw_the_same_table", rc2 == 0 and rc3 == 0 and so3 == so2
          and logs == ["w-crope-s1.jsonl.gz", "w-rope-s1.jsonl.gz", "w-rope-s2.jsonl.gz"], f"{logs} {se3[-300:]}")
    # runs that differ only in pos, seed and run folder: no warning; the setting in the table
    # and in the figure's titles; the difference-to-RoPE panel
    check("no_config_warning_for_pos_and_seed", "WARNING" not in so2 and "warning:" not in se2, se2[-300:])
    check("setting_in_table", "wikitext2: 100 steps, B=8, T=64, seeds 1,2" in md, md[:300])
    svg = open(out + ".svg", encoding="utf-8").read()
    check("figure_title_has_setting", "100 steps, B=8, T=64, seeds 1,2" in svg and "ptb" in svg)
    check("figure_difference_to_rope_panel", "minus RoPE" in svg)
    check("figure_smoothing_label", "moving avg 5 steps" in svg)
    lsvg = open(out + "_lengths.svg", encoding="utf-8").read()
    check("lengths_error_bars_from_seeds", "(mean, 95 % interval over 1/2 seeds)" in lsvg)

    # A short run at another seq_len beside a long one (the issue's +2.79 "delta"): warned
    # about on stderr, above the table, in the rows and in the figure.
    mis = [write_run(tmp, "m-rope-s1", "wikitext2", "rope", 1, [6.0, 5.5], steps=300),
           write_run(tmp, "m-learned-s1", "wikitext2", "learned", 1, [8.3], steps=20,
                     cfg_extra={"seq_len": 128, "val_data": "data/other/other_val_*.bin"})]
    out4 = os.path.join(tmp, "out4", "cmp")
    rc, so, se = run(mis + ["--out", out4])
    mr = parse_table(so.split("Setting:")[-1]) if rc == 0 else {}
    lr = mr.get(("wikitext2", "learned"), {})
    check("config_mismatch_warned_on_stderr", rc == 0 and "warning: wikitext2: the runs differ in seq_len: "
          "64 (rope s1); 128 (learned s1)" in se and "differ in steps" in se and "differ in val_data" in se, se[-600:])
    check("config_mismatch_warned_in_table", "**WARNING: these runs differ in more than the position scheme"
          in so and "(not comparable)" in lr.get("Δ final vs rope", "")
          and "config differs (seq_len, steps, val_data)" in lr.get("notes", ""), str(lr))
    # the same shards in another folder (runs from another machine): not a difference
    moved = [write_run(tmp, "mv-rope-s1", "wikitext2", "rope", 1, [6.0, 5.5]),
             write_run(tmp, "mv-crope-s1", "wikitext2", "crope", 1, [6.0, 5.4],
                       cfg_extra={"train_data": "/elsewhere/wikitext2/wikitext2_train_*.bin",
                                  "val_data": "/elsewhere/wikitext2/wikitext2_val_*.bin"})]
    rc5, so5, se5 = run(moved + ["--out", os.path.join(tmp, "out4b", "cmp")])
    check("data_folder_moved_not_a_difference", rc5 == 0 and "differ in" not in se5 and "WARNING" not in so5,
          se5[-300:])
    svg = open(out4 + ".svg", encoding="utf-8").read() if rc == 0 else ""
    check("config_mismatch_warned_in_figure", "WARNING: the wikitext2 runs differ in seq_len, steps, val_data" in svg)
    check("figure_setting_shows_both_values", "20/300 steps" in svg and "T=64/128" in svg)

    # eval_long_every says only when the longer lengths are evaluated (the final evaluation has
    # them all): runs from before the key beside runs with it are not warned about
    el = [write_run(tmp, "e-rope-s1", "ptb", "rope", 1, [6.0, 5.5]),
          write_run(tmp, "e-crope-s1", "ptb", "crope", 1, [6.0, 5.5], cfg_extra={"eval_long_every": 1000})]
    rc, so, se = run(el + ["--out", os.path.join(tmp, "out22", "cmp")])
    check("eval_long_every_not_warned", rc == 0 and "warning" not in se and "WARNING" not in so, se[-300:])

    # bf16 runs: the precision in the setting (fp32, the default, is not named)
    bf = [write_run(tmp, f"b-{p}-s1", "ptb", p, 1, [6.0, 5.5], cfg_extra={"precision": "bf16"})
          for p in ("rope", "crope")]
    rc, so, se = run(bf + ["--out", os.path.join(tmp, "out8", "cmp")])
    check("setting_names_bf16", rc == 0 and "ptb: 100 steps, B=8, T=64, bf16, seed 1" in so, so[:300] + se[-300:])

    # --paper: the paper's final losses and differences to RoPE beside ours (learned: not quoted),
    # dashed in the figure's validation and difference panels; runs off the paper's setting are
    # said to be so, and runs at it are said to be at it.
    rc, so, se = run(runs[:4] + ["--paper", "--out", os.path.join(tmp, "out11", "cmp")])
    pr = parse_table(so.split("Setting:")[-1]) if rc == 0 else {}
    pc, pl = pr.get(("wikitext2", "crope"), {}), pr.get(("wikitext2", "learned"), {})
    check("paper_columns", rc == 0 and pc.get("paper: final val loss") == "5.373" and pc.get("paper: Δ vs rope") == "+0.009"
          and pr.get(("wikitext2", "rope"), {}).get("paper: Δ vs rope") == "ref"
          and pl.get("paper: final val loss") == "not quoted", str(pc) + se[-300:])
    svg = open(os.path.join(tmp, "out11", "cmp.svg"), encoding="utf-8").read() if rc == 0 else ""
    check("paper_in_figure", "paper: crope 5.373" in svg and "paper: crope +0.009" in svg and "paper: rope 5.364" in svg)
    check("paper_setting_differs_said", "**These runs are not at that setting** (batch_size 8, seq_len 64, steps 100)" in so,
          so[-600:])
    at = {"batch_size": 16, "seq_len": 1024}
    pp = [write_run(tmp, f"pp-{p}-s1", "ptb", p, 1, [4.5, 4.02], steps=10000, cfg_extra=at) for p in ("rope", "crope")]
    rc, so, se = run(pp + ["--paper", "--out", os.path.join(tmp, "out12", "cmp")])
    check("paper_setting_met_said", rc == 0 and "These runs are at that setting." in so
          and "| ptb | crope |" in so and "| 4.016 | -0.005 |" in so, so[-900:] + se[-300:])
    rc, so, se = run(pp + ["--out", os.path.join(tmp, "out13", "cmp")])
    check("paper_only_when_asked", rc == 0 and "paper" not in so.lower(), so[:600])

    # The arithmetic the logs record (fp32 on a GPU with TF32 or without; older logs say
    # nothing): a difference is warned about, as a config key's; a resume that changed it
    # shows both; unrecorded logs are not counted as differing.
    tf, plain = "fp32 (TF32 tensor cores)", "fp32 (TF32 off: plain fp32)"
    ar = [write_run(tmp, "a-rope-s1", "pg19", "rope", 1, [6.0, 5.5], arithmetic=[tf]),
          write_run(tmp, "a-crope-s1", "pg19", "crope", 1, [6.0, 5.5], arithmetic=[tf, plain]),
          write_run(tmp, "a-learned-s1", "pg19", "learned", 1, [6.0, 5.5])]
    rc, so, se = run(ar + ["--out", os.path.join(tmp, "out9", "cmp")])
    cr = parse_table(so.split("Setting:")[-1]).get(("pg19", "crope"), {}) if rc == 0 else {}
    check("arithmetic_difference_warned", rc == 0 and f"warning: pg19: the runs differ in arithmetic: {tf} (rope s1); "
          f"{tf} then {plain} (crope s1)" in se and "config differs (arithmetic)" in cr.get("notes", "")
          and se.count("warning:") == 1, se[-500:] + str(cr))
    rc, so, se = run(ar[:1] + ar[2:] + ["--out", os.path.join(tmp, "out10", "cmp")])
    check("arithmetic_unrecorded_not_warned", rc == 0 and "warning" not in se and "WARNING" not in so, se[-300:])

    # A python without matplotlib or numpy: one error line and exit status 1, no traceback;
    # without matplotlib the table is still written.
    nm = os.path.join(tmp, "out14", "cmp")
    rc, se = run_without("matplotlib", SCRIPT, ar[:1] + ["--out", nm])
    check("no_matplotlib_clear_error", rc == 1 and se.startswith("error: matplotlib is not installed")
          and "Traceback" not in se and os.path.exists(nm + ".md"), se[-300:])
    rc, se = run_without("numpy", SCRIPT, ar[:1] + ["--out", nm])
    check("no_numpy_clear_error", rc == 1 and "has no module 'numpy' (Debian: apt-get install python3-numpy)" in se
          and se.startswith("error: ") and "Traceback" not in se, se[-300:])

    # dataset names by the shard rule, and a (gzipped) log file given directly
    tr = write_run(tmp, "t-rope-s1", "x", "rope", 1, [5.0], cfg_extra={"train_data": "sh/my_val_set_train_*.bin"})
    gz = os.path.join(tmp, "t-rope-s1.jsonl.gz")
    with open(os.path.join(tr, "log.jsonl"), "rb") as f, gzip.open(gz, "wb") as g:
        g.write(f.read())
    rc, so, se = run([gz, "--out", os.path.join(tmp, "out5", "cmp")])
    check("gzip_log_and_shard_rule_dataset", rc == 0 and ("my_val_set", "rope") in parse_table(so.split("Setting:")[-1]),
          so[-400:] + se[-300:])

    # the synthetic task: runs with marker accuracy get an accuracy column (mean ± std of final)
    acc = [write_run(tmp, f"s-{p}-s{i}", "synthetic", p, i, [2.8, 2.6], accuracy=a)
           for p, i, a in [("rope", 1, 1.0), ("rope", 2, 0.25), ("rope", 3, 1.0), ("crope", 1, 0.25)]]
    rc, so, se = run(acc + ["--out", os.path.join(tmp, "out3", "cmp")])
    ar = parse_table(so.split("Setting:")[-1])
    check("accuracy_column_mean_std", rc == 0 and ar.get(("synthetic", "rope"), {}).get("marker accuracy")
          == f"0.7500 ± {math.sqrt(0.1875):.4f}", str(ar.get(("synthetic", "rope"))))
    sr, sc = ar.get(("synthetic", "rope"), {}), ar.get(("synthetic", "crope"), {})
    check("solved_seeds_and_median_first_step", sr.get("solved (≥ 0.99)") == "2 of 3"
          and sr.get("first solved: median (per seed)") == "99 (99, never, 99)"
          and sc.get("solved (≥ 0.99)") == "0 of 1" and sc.get("first solved: median (per seed)") == "never (never)",
          f"{sr} {sc}")
    check("accuracy_column_single", ar.get(("synthetic", "crope"), {}).get("marker accuracy") == "0.2500",
          str(ar.get(("synthetic", "crope"))))
    svg = open(os.path.join(tmp, "out3", "cmp.svg"), encoding="utf-8").read() if rc == 0 else ""
    check("synthetic_figure_accuracy_panel", "accuracy after the markers" in svg and "solved (0.99)" in svg
          and "one thin line per seed" in svg and "rope: 2/3 seeds solved" in svg and "crope: 0/1 seeds solved" in svg)
    check("smoothing_on_by_default", "moving avg 2 steps" in svg)   # 1/40 of 100 steps

    # the difference to RoPE with its 95 % interval over seeds (Student's t, t(0.975, 2) = 4.3027):
    # paired by seed when the seeds match, in the table and in the figure
    iv = [write_run(tmp, f"i-{p}-s{i}", "pg19", p, i, [f0, 5.6, 5.5, 5.45, 5.42, f])
          for p, f0, fs in [("rope", 5.9, (5.40, 5.30, 5.35)), ("crope", 7.0, (5.42, 5.33, 5.36)),
                            ("learned", 5.9, (5.60, 5.52, 5.55))]
          for i, f in enumerate(fs, 1)]
    iout = os.path.join(tmp, "out15", "cmp")
    rc, so, se = run(iv + ["--out", iout])
    ir = parse_table(so.split("Setting:")[-1]) if rc == 0 else {}
    ic, il, irope = ir.get(("pg19", "crope"), {}), ir.get(("pg19", "learned"), {}), ir.get(("pg19", "rope"), {})
    check("interval_paired_covers_zero", ic.get("Δ final vs rope") == "+0.0200"
          and ic.get("Δ 95 % interval") == "[-0.0048, +0.0448], paired, 3 seeds"
          and ic.get("vs rope") == "not distinguishable from RoPE", str(ic) + se[-300:])
    check("interval_paired_above_zero", il.get("Δ 95 % interval") == "[+0.1780, +0.2354], paired, 3 seeds"
          and il.get("vs rope") == "higher than RoPE", str(il))
    check("interval_reference_row", irope.get("Δ 95 % interval") == "ref" and irope.get("vs rope") == "ref", str(irope))
    rc2, so2, _ = run(iv[:3] + iv[3:5] + ["--out", os.path.join(tmp, "out16", "cmp")])
    uc = parse_table(so2.split("Setting:")[-1]).get(("pg19", "crope"), {}) if rc2 == 0 else {}
    check("interval_unpaired_welch", uc.get("Δ 95 % interval", "").endswith("unpaired (Welch), 2 and 3 seeds")
          and uc.get("vs rope") == "not distinguishable from RoPE", str(uc))
    rc3, so3, _ = run([iv[0], iv[3], "--out", os.path.join(tmp, "out17", "cmp")])
    one = parse_table(so3.split("Setting:")[-1]).get(("pg19", "crope"), {}) if rc3 == 0 else {}
    check("interval_one_seed", one.get("Δ 95 % interval") == "1 seed" and one.get("vs rope") == "no interval (one seed)",
          str(one))
    svg = open(iout + ".svg", encoding="utf-8").read() if rc == 0 else ""
    check("interval_in_figure", "+0.0200 [-0.0048, +0.0448]: not distinguishable from RoPE (paired, 3 seeds)" in svg
          and "higher than RoPE" in svg and "95 % interval" in svg, svg[:200])
    check("interval_note_under_table", "paired by seed when both groups ran the same seeds, else Welch's" in so)
    # the figures drawn in this process, for many seeds and for one: every point inside its
    # panel's limits, the verdict panel symmetric about 0 and at least +-MIN_DIFF_HALF_SPAN wide
    # with one label per scheme, the difference panel scaled to the steps after step 0 (crope's
    # step 0 is 1.1 above RoPE's) with step 0 marked at its edge, the parameters in the legend
    sys.path.insert(0, "scripts")
    import compare_runs as cr
    figs = []
    cr.save = lambda fig, prefix, n_warnings=0: (cr.lay_out(fig, n_warnings), figs.append(fig))

    def legends_clear(fig):
        """Where a legend covers the data of any panel: a point of a curve or of the line between
        two, of an error bar, or of a band (inside it), in data coordinates (reference lines across
        a panel aside): [(legend's first label, panel's y label, the path's first point)]; [] when
        none does."""
        import numpy as np
        from matplotlib.collections import PolyCollection
        from matplotlib.path import Path
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        boxes = [(leg, leg.get_window_extent(r)) for leg in [a.get_legend() for a in fig.axes] + fig.legends if leg]
        bad = []
        for ax in [a for a in fig.axes if a.axison]:
            data = [a for a in ax.lines + ax.collections if a.get_transform() == ax.transData]
            paths = [(np.column_stack([a.get_xdata(), a.get_ydata()]).astype(float), False) for a in data
                     if hasattr(a, "get_xdata")] + [(p.vertices, isinstance(a, PolyCollection)) for a in data
                                                    if not hasattr(a, "get_xdata") for p in a.get_paths()]
            for xy, filled in paths:
                if not len(xy):
                    continue
                path = Path(ax.transData.transform(xy))
                bad += [(leg.get_texts()[0].get_text(), ax.get_ylabel(), tuple(path.vertices[0])) for leg, b in boxes
                        if (b.contains(*path.vertices[0]) if len(xy) == 1 else path.intersects_bbox(b, filled=filled))]
        return bad

    def distinct_styles(fig):
        """[] when the entries of each legend of the figure's curves have each their own (marker,
        colour) (a line style of their own too, in Group); else the pairs of labels that share one."""
        same = []
        for leg in [a.get_legend() for a in fig.axes] + fig.legends:
            seen = {}
            handles = (getattr(leg, "legend_handles", None) or leg.legendHandles) if leg else []  # name before 3.7
            for h, t in zip(handles, leg.get_texts() if leg else []):
                if not hasattr(h, "get_marker") or t.get_text().startswith(("solved", "paper")):
                    continue
                key = (str(h.get_marker()), h.get_color())
                if key in seen and seen[key] != t.get_text():
                    same.append((seen[key], t.get_text()))
                seen.setdefault(key, t.get_text())
        return same

    def legends_in_panels(fig):
        """Each panel's legend (an empty panel's too) lies inside its panel, one under the
        figure inside the figure."""
        r = fig.canvas.get_renderer()
        return all(cr.holds(a.get_window_extent(r), a.get_legend().get_window_extent(r))
                   for a in fig.axes if a.get_legend()) and \
            all(cr.holds(fig.bbox, leg.get_window_extent(r)) for leg in fig.legends)

    def panel(fig, label):
        return [a for a in fig.axes if label in a.get_ylabel() or label in a.get_xlabel()][0]

    def outside(ax, axis, after=None):
        lo, hi = ax.get_xlim() if axis == "x" else ax.get_ylim()
        return [(x, y) for line in ax.lines if line.get_clip_on()
                for x, y in zip(line.get_xdata(), line.get_ydata())
                if (after is None or x > after) and not lo <= (x if axis == "x" else y) <= hi]

    tiny = [write_run(tmp, f"y-{p}-s1", "ptb", p, 1, [5.0, f]) for p, f in (("rope", 4.5), ("crope", 4.5005))]
    for name, dirs, n_seeds in (("many_seeds", iv, 3), ("one_seed", tiny, 1)):
        cr.plot_curves(cr.make_groups([cr.Run(d) for d in dirs]), "unused", 1, {})
        ax = panel(figs[-1], "minus RoPE's: mean")
        lo, hi = ax.get_xlim()
        labels = [t.get_text() for t in ax.texts]
        check(f"verdict_panel_{name}", not outside(ax, "x") and abs(lo + hi) < 1e-12 and hi >= cr.MIN_DIFF_HALF_SPAN
              and len(labels) == len(ax.get_yticklabels()) and all(l.count("seed") == 1 for l in labels),
              f"xlim {lo, hi}, outside {outside(ax, 'x')}, labels {labels}")
        ax = panel(figs[-1], "validation loss minus RoPE's mean")
        check(f"difference_panel_all_inside_{name}", not outside(ax, "y", after=0), f"{outside(ax, 'y', after=0)[:3]}")
        legend = [t.get_text() for a in figs[-1].axes if a.get_legend() for t in a.get_legend().get_texts()]
        check(f"legend_has_parameters_{name}", "crope, 165,888 attention params" + (f" ({n_seeds} seeds)" if n_seeds > 1
              else "") in legend, str(legend))
        # panels with the same curves share one legend
        sets = [tuple(t.get_text() for t in a.get_legend().get_texts()) for a in figs[-1].axes if a.get_legend()]
        check(f"one_legend_per_label_set_{name}", sets and len(sets) == len(set(sets)), str(sets))
    ax = panel(figs[-2], "validation loss minus RoPE's mean")
    lo, hi = ax.get_ylim()
    check("difference_panel_scaled_after_step_0", hi < 0.5 and any("step 0: +1.100" in t.get_text() for t in ax.texts)
          and any(l.get_marker() == "^" and list(l.get_ydata()) == [hi] for l in ax.lines), f"ylim {lo, hi}")
    check("crope_dashed_over_rope", [l.get_linestyle() for l in ax.lines if l.get_color() == cr.POS_COLOURS["crope"]][:1]
          == ["--"])
    cr.plot_curves(cr.make_groups([cr.Run(iv[0]), cr.Run(iv[3])]), "unused", 1, {})
    title = figs[-1]._suptitle.get_text()
    check("one_seed_title_no_band", "one seed per scheme" in title and "band" not in title, title)
    near = [write_run(tmp, f"n-{p}-s1", "ptb", p, 1, [5.0, 4.50], extra_lens={128: 4.505, 256: 4.51})
            for p in ("rope", "crope")]
    cr.plot_lengths(cr.make_groups([cr.Run(d) for d in near]), "unused", {})
    ax = figs[-1].axes[0]
    lo, hi = ax.get_ylim()
    check("lengths_figure_minimum_span", hi - lo >= cr.MIN_LOSS_SPAN - 1e-12 and "widened" in ax.get_ylabel()
          and "(1 seed: no interval)" in ax.get_ylabel(),
          f"span {hi - lo}, label {ax.get_ylabel()!r}")

    # The synthetic task at several lengths, with variants of a scheme: the accuracy and loss per
    # length (mean ± std; † where a learned table is read past the training length), a panel of
    # the final accuracy against the length with 95 % intervals (t(0.975, 1) = 12.706); a
    # non-standard mlp_hidden is a labelled variant compared with the standard RoPE (no warning),
    # while an absent mlp_hidden, 0 and 4 x n_embd are the standard model; match_params (which
    # chose the width the trainer records) changes nothing.
    def syn(name, pos, seed, final, acc, by_len, mlp=None, total=None, match=None):
        cfg = {k: v for k, v in (("mlp_hidden", mlp), ("match_params", match)) if v is not None}
        return write_run(tmp, f"v-{name}-s{seed}", "synthetic", pos, seed, [2.8, final], accuracy=acc,
                         extra_lens=by_len, cfg_extra=cfg,
                         params=None if total is None else dict(PARAMS[pos], total=total))
    vr = [syn("rope", "rope", 1, 2.60, 1.0, {128: (2.65, 0.97), 256: (2.70, 0.88)}),
          syn("rope", "rope", 2, 2.60, 1.0, {128: (2.67, 0.95), 256: (2.72, 0.86)}, mlp=0),
          syn("rope1024", "rope", 1, 2.55, 1.0, {128: (2.6, 0.9)}, mlp=1024, total=7500000),
          syn("crope", "crope", 1, 2.61, 1.0, {128: (2.7, 0.9)}, mlp=512, match=""),
          syn("crope608", "crope", 1, 2.59, 1.0, {128: (2.6, 0.99)}, mlp=608, total=7226624, match="rope"),
          syn("crope608", "crope", 2, 2.60, 1.0, {128: (2.6, 0.97)}, mlp=608, total=7226624),
          syn("learned", "learned", 1, 2.8, 0.2, {128: (3.0, 0.1), 256: (3.1, 0.08)}),
          syn("learned", "learned", 2, 2.8, 0.2, {128: (3.0, 0.1), 256: (3.1, 0.08)})]
    rc, so, se = run(vr + ["--out", os.path.join(tmp, "out23", "cmp")])
    vt, lt = (parse_table(so.split("Setting:")[-1], part) for part in (0, 1)) if rc == 0 else ({}, {})
    v608 = "crope=rope"  # a variant made by match_params is named as --pos names it
    check("variant_rows_labelled", list(vt) == [("synthetic", p) for p in ("learned", "rope", "rope, mlp 1024", "crope",
          v608)] and vt[("synthetic", "rope")]["seeds"] == "2 (1,2)" and vt[("synthetic", v608)]["params"] == "7,226,624",
          f"{list(vt)} {se[-300:]}")
    check("variant_compared_not_warned", "warning" not in se and "WARNING" not in so and "(not comparable)" not in so
          and vt.get(("synthetic", v608), {}).get("Δ final vs rope") == "-0.0050"
          and vt[("synthetic", v608)]["vs rope"] == "not distinguishable from RoPE", str(vt.get(("synthetic", v608))))
    check("rope_variant_against_standard_rope", vt.get(("synthetic", "rope, mlp 1024"), {})
          .get("Δ final vs rope") == "-0.0500", str(vt)[:300])
    # sin_scale: a sinusoidal factor other than the default (src/pos.h) is a variant; a log from
    # before the key ran the unscaled table (1); other schemes record the default, unlabelled
    sin_cases = [("sinusoidal", {}, (("sin_scale", 1.0),)), ("sinusoidal", {"sin_scale": cr.SIN_SCALE}, ()),
                 ("sinusoidal", {"sin_scale": 0.5}, (("sin_scale", 0.5),)), ("rope", {"sin_scale": cr.SIN_SCALE}, ())]
    got = [cr.Run(write_run(tmp, f"sin{i}", "wikitext2", pos, 1, [6.0], cfg_extra=extra, params=PARAMS["rope"]))
           .variant() for i, (pos, extra, _) in enumerate(sin_cases)]
    check("sin_scale_variant", got == [want for _, _, want in sin_cases] and cr.SIN_SCALE > 0, f"{got} {cr.SIN_SCALE}")
    # partial_rotary_factor: below 1 a variant ("rope, partial 0.25"), before the scaling; 1 or absent the
    # standard model
    part_cases = [({}, ()), ({"partial_rotary_factor": 1.0}, ()),
                  ({"partial_rotary_factor": 0.25}, (("partial", 0.25),)),
                  ({"partial_rotary_factor": 0.5, "rope_scaling": "ntk"}, (("partial", 0.5), ("", "ntk")))]
    got = [cr.Run(write_run(tmp, f"part{i}", "wikitext2", "rope", 1, [6.0], cfg_extra=extra, params=PARAMS["rope"]))
           .variant() for i, (extra, _) in enumerate(part_cases)]
    check("partial_rotary_variant", got == [want for _, want in part_cases], str(got))
    # a log from before rope_train_len was trained at its seq_len: one group with a run that records it
    keys = [cr.Run(write_run(tmp, f"rtl{i}", "wikitext2", "alibi", i + 1, [6.0], cfg_extra=extra, params=PARAMS["rope"]))
            .group_key() for i, extra in enumerate(({}, {"rope_train_len": 64}, {"rope_train_len": 32}))]
    check("rope_train_len_absent_is_seq_len", keys[0] == keys[1] != keys[2], str(keys))
    # a log from before the key classifier ran the logits head: no difference with one that
    # records it, one with the fused head warned about
    heads = [cr.Run(write_run(tmp, f"head{i}", "wikitext2", "rope", i + 1, [6.0], cfg_extra=extra, params=PARAMS["rope"]))
             for i, extra in enumerate(({}, {"classifier": "logits"}, {"classifier": "fused"}))]
    differ = [[k for ks in cr.config_differences(rs).values() for k, _ in ks] for rs in (heads[:2], heads)]
    check("classifier_absent_is_logits", "classifier" not in differ[0] and "classifier" in differ[1], str(differ))
    lr, ll = lt.get(("synthetic", "rope"), {}), lt.get(("synthetic", "learned"), {})
    check("length_table_loss_and_accuracy", "## Final validation loss and marker accuracy by evaluation length" in so
          and lr.get("loss T=256") == "2.7100 ± 0.0141" and lr.get("accuracy T=128") == "0.9600 ± 0.0141"
          and lr.get("accuracy T=64") == "1.0000 ± 0.0000" and lt.get(("synthetic", "crope"), {}).get(
              "accuracy T=256") == "n/a", f"{lr} {so[-900:]}")
    check("length_table_untrained_rows_marked", ll.get("accuracy T=256") == "0.0800 ± 0.0000 †"
          and ll.get("loss T=64") == "2.8000 ± 0.0000" and "†" not in lr.get("loss T=256", "†")
          and "†: learned positions past the training seq_len read rows of their table that no training" in so, str(ll))
    svg = open(os.path.join(tmp, "out23", "cmp.svg"), encoding="utf-8").read() if rc == 0 else ""
    check("figure_accuracy_by_length_panel", "final accuracy after the markers" in svg and
          "(mean, 95 % interval over 1/2 seeds)" in svg and "hollow: learned's untrained table rows" in svg
          and "crope=rope, 7,226,624 params (165,888 attention) (2 seeds)" in svg)
    dt = parse_table(so.split("Setting:")[-1], 2) if rc == 0 else {}
    dl, dc = dt.get(("synthetic", "learned"), {}), dt.get(("synthetic", v608), {})
    check("length_diff_table_paired_intervals", "## Difference to RoPE by evaluation length" in so
          and dl.get("Δ loss T=256") == "**+0.3900 [+0.2629, +0.5171]** †"
          and dl.get("Δ accuracy T=256") == "**-0.790 [-0.917, -0.663]** †"
          and dc.get("Δ loss T=128") == "-0.0600 [-0.1871, +0.0671]" and dc.get("Δ loss T=256") == "n/a"
          and ("synthetic", "rope") not in dt and "**bold**: \"higher\" or \"lower\" by the verdicts' rule above" in so,
          f"{dl} {dc}")
    rc, so, se = run(vr + ["--out", os.path.join(tmp, "out24", "cmp"), "--summary"])
    lines = so.splitlines()
    check("summary_short", rc == 0 and lines and all(len(l) <= 100 and "|" not in l for l in lines[:-2])
          and any(l.split() == ["crope=rope", "2/2", "-0.0050", "[-0.0685,", "+0.0585]", "not",
                                "distinguishable", "from", "RoPE"] for l in lines)
          and lines[-2].endswith(os.path.join(tmp, "out24", "cmp") + ".md") and lines[-1].startswith("figures: ")
          and os.path.exists(os.path.join(tmp, "out24", "cmp.md")), so)
    cr.plot_curves(cr.make_groups([cr.Run(d) for d in vr]), "unused", 1, {})
    check("five_panels_in_two_rows", [a.axison for a in figs[-1].axes] == [True] * 5 + [False]
          and figs[-1].axes[3].get_subplotspec().rowspan.start == 1, str(len(figs[-1].axes)))
    check("legends_clear_of_data", not legends_clear(figs[-1]) and legends_in_panels(figs[-1]),
          str(legends_clear(figs[-1])[:3]))
    check("distinct_styles_variants", not distinct_styles(figs[-1]), str(distinct_styles(figs[-1])))
    ax = panel(figs[-1], "final accuracy after the markers")
    bars = [seg for c in ax.collections for seg in c.get_segments()]
    check("accuracy_by_length_95_interval", any(abs(seg[1][1] - seg[0][1] - 2 * 12.7062 * 0.01 / 1) < 1e-3
                                                and abs(seg[0][1] + seg[1][1] - 2 * 0.87) < 1e-9 for seg in bars),
          str([list(map(list, seg)) for seg in bars]))
    # the committed figures' logs: the synthetic task's figure (crope and crope=rope), the CPU grid's
    # (its legend fits in no panel: under it), their figures by length with the scalings, and the
    # extrapolation table's (every scaling of three schemes): each legend off the data and inside
    # the figure, each curve in a style of its own
    results = os.path.join("scripts", "results")
    for name, folders, curves in (("synthetic", ["synthetic_logs"], True), ("paper_cpu", ["paper_cpu_logs"], True),
                                  ("extrapolation_synthetic", ["extrapolation_logs/synthetic"], False),
                                  ("extrapolation_finetuned", ["paper_cpu_logs", "extrapolation_logs/finetuned"], False)):
        logs = [os.path.join(results, d) for d in folders]
        if not all(os.path.isdir(d) for d in logs):
            check(f"legends_clear_of_data_{name}", False, f"{logs} missing")
            continue
        runs_ = [cr.Run(os.path.join(d, f)) for d in logs for f in sorted(os.listdir(d))]
        runs_ = [v for r in runs_ for v in [r] + r.eval_variants()]
        groups_ = cr.make_groups(runs_)
        for what in (["curves"] if curves else []) + ["lengths"]:
            if what == "curves":
                cr.plot_curves([g for g in groups_ if not g.eval_only], "unused", 10, {})
            else:
                cr.plot_lengths(groups_, "unused", {})
            fig = figs[-1]
            check(f"legends_clear_of_data_{name}_{what}", not legends_clear(fig) and legends_in_panels(fig)
                  and sum(1 for a in fig.axes if a.get_legend()) + len(fig.legends) >= 1, str(legends_clear(fig)[:3]))
            check(f"distinct_styles_{name}_{what}", not distinct_styles(fig), str(distinct_styles(fig)[:4]))
    # (scipy is imported at the first interval: seeds of two schemes)
    rc, se = run_without("scipy", SCRIPT, iv + ["--out", os.path.join(tmp, "out18", "cmp")])
    check("no_scipy_clear_error", rc == 1 and "has no module 'scipy' (Debian: apt-get install python3-scipy)" in se
          and se.startswith("error: ") and "Traceback" not in se, se[-300:])

    # seeds in numeric order: 1, 2, 10
    so10 = [write_run(tmp, f"o-rope-s{i}", "ptb", "rope", i, [5.0, 4.5]) for i in (10, 2, 1)]
    rc, so, se = run(so10 + ["--out", os.path.join(tmp, "out19", "cmp")])
    check("seeds_in_numeric_order", rc == 0 and parse_table(so.split("Setting:")[-1]).get(("ptb", "rope"), {}).get(
        "seeds") == "3 (1,2,10)", so[-300:])

    # one seq_len only and no --eval-lengths: no lengths figure
    out2 = os.path.join(tmp, "out2", "cmp")
    rc, so, se = run([runs[3], runs[4], "--out", out2])
    check("single_length_no_lengths_figure", rc == 0 and not os.path.exists(out2 + "_lengths.png"), se[-300:])

    # --status for resumable scripts
    rc, so, se = run(["--status", runs[0], runs[3], os.path.join(tmp, "nope")])
    lines = so.splitlines()
    check("status_lines", rc == 0 and len(lines) == 3 and lines[0].startswith("complete")
          and lines[1].startswith("partial 60/100") and lines[2].startswith("missing"), so + se)

    # a run resumed with more steps and cut again (the runs/wt2-rope: 300 steps, resumed
    # with --steps 310, cut at 303): unfinished against config.json's steps, the change named
    ch = write_run(tmp, "c-rope-s1", "ptb", "rope", 1, [5.0, 4.5], steps=300, last_step=303, one_based=True)
    with open(os.path.join(ch, "config.json"), "w") as f:  # what the trainer writes on resume
        json.dump(dict(json.loads(open(os.path.join(ch, "log.jsonl")).readline())["config"], steps=310,
                       checkpoint_every=7), f)
    rc, so, se = run([ch, "--out", os.path.join(tmp, "out21", "cmp")])
    notes = parse_table(so.split("Setting:")[-1]).get(("ptb", "rope"), {}).get("notes", "") if rc == 0 else ""
    check("resumed_run_marked", notes == "(unfinished: step 303 of 310) (config changed on resume: steps 300 -> 310)",
          notes + se[-300:])
    check("resumed_run_warned", f"warning: ptb rope seed 1 ({ch}): unfinished: step 303 of 310\n" in se
          and f"warning: ptb rope seed 1 ({ch}): config changed on resume: steps 300 -> 310\n" in se
          and "**WARNING" in so, se[-400:])
    rc, so, se = run(["--status", ch])
    check("resumed_run_status_partial", rc == 0 and so.startswith("partial 303/310"), so + se)

    # the trainer's config_change records (config.json keeps the start): a change is named with
    # the step it applies from, unless it applied to no step (at the last step done); the steps
    # the run aims at and its config for --plan are the changed ones
    cc = write_run(tmp, "cc-rope-s1", "ptb", "rope", 1, [5.0, 4.5], steps=300, one_based=True)
    with open(os.path.join(cc, "config.json"), "w") as f:
        json.dump(json.loads(open(os.path.join(cc, "log.jsonl")).readline())["config"], f)
    with open(os.path.join(cc, "log.jsonl"), "a") as f:
        for step, changes in ((150, {"lr": [1e-3, 0.01], "checkpoint_every": [500, 50]}),
                              (200, {"steps": [200, 300]}), (300, {"eval_every": [100, 10]})):
            f.write(json.dumps({"type": "config_change", "step": step, "changes": changes}) + "\n")
    rc, so, se = run([cc, "--out", os.path.join(tmp, "out22", "cmp")])
    notes = parse_table(so.split("Setting:")[-1]).get(("ptb", "rope"), {}).get("notes", "") if rc == 0 else ""
    check("config_change_records_named", notes == "(config changed on resume: lr 0.001 -> 0.01 from step 150, "
          "steps 200 -> 300 from step 200)", notes + se[-300:])
    plan_cc = os.path.join(tmp, "plan_cc.json")
    with open(plan_cc, "w") as f:
        json.dump({"steps": 300, "eval_every": 10}, f)
    rc, so, se = run(["--status", cc, "--plan", plan_cc, "--set", "lr=0.01"])
    check("config_change_status_plan", rc == 0 and so == f"complete {cc}\n", so + se)

    # --status --plan: a run folder reused only when its config.json is the planned config
    plan = os.path.join(tmp, "plan.json")
    with open(plan, "w") as f:
        json.dump({"steps": 310, "seq_len": 64, "lr": 1e-3, "device": "cuda", "run_dir": "elsewhere"}, f)
    rc, so, se = run(["--status", ch, "--plan", plan, "--set", "pos=rope", "--set", "seed=1", "--set", "lr=1e-3"])
    check("plan_same_config", rc == 0 and so.startswith("partial 303/310"), so + se)
    rc, so, se = run(["--status", ch, "--plan", plan, "--set", "steps=3", "--set", "eval_seq_lens=64,128",
                      "--set", "pos=crope"])
    check("plan_differs_named", rc == 0 and so == f'differs {ch}: eval_seq_lens null, planned [64, 128]; '
          f'pos "rope", planned "crope"; steps 310, planned 3\n', so + se)
    rc, so, se = run(["--status", ch, "--plan", plan, "--set", "steps"])
    check("plan_bad_set", rc == 1 and se == "error: --set wants KEY=VALUE, got 'steps'\n", se)
    rc, so, se = run(["--status", ch, "--plan", os.path.join(tmp, "nope.json")])
    check("plan_missing_file", rc == 1 and se.startswith("error: ") and "nope.json: no such config file" in se, se)

    # the trainer's GFLOP/s beside tokens/s: the median over train records, where the logs have it
    fl = [write_run(tmp, "f-rope-s1", "wikitext2", "rope", 1, [5.4, 5.3], flops=2.0e9),
          write_run(tmp, "f-crope-s1", "wikitext2", "crope", 1, [5.4, 5.31], flops=3.5e9)]
    rc, so, se = run(fl + ["--out", os.path.join(tmp, "f")])
    frows = parse_table(open(os.path.join(tmp, "f.md")).read()) if rc == 0 else {}
    check("gflops_column", frows.get(("wikitext2", "rope"), {}).get("GFLOP/s") == "2.0" and
          frows.get(("wikitext2", "crope"), {}).get("GFLOP/s") == "3.5", f"rc={rc} {frows} {se[-300:]}")
    check("gflops_only_when_logged", rows and all("GFLOP/s" not in row for row in rows.values()),
          "the first table, of logs without it, has the column")

    # Evaluation-only variants (build/train --eval_only): eval.jsonl records that change rope_scaling
    # make "rope, ntk", a variant of the same trained runs (paired with rope by seed); records that
    # change only the lengths join the run's own; --extrapolation's table: mean [95 % interval] per
    # multiple of the training length; --save-logs keeps them in the run's saved log.
    def eval_log(d, name, changes, by_len, step=99):
        with open(os.path.join(d, name), "w") as f:
            f.write(json.dumps({"type": "eval_only", "step": step, "config": {}, "checkpoint": "x",
                                "changes": changes}) + "\n")
            for t, l in by_len.items():
                f.write(json.dumps({"type": "val", "step": step, "loss": l, "seq_len": t, "tokens": 512,
                                    "checkpoint": "x", "changes": changes}) + "\n")
    ntk = {"rope_scaling": ["none", "ntk"]}
    xr = []
    for pos, base in (("rope", 5.0), ("crope", 5.02)):
        for seed, off in ((1, 0.0), (2, 0.03), (3, -0.01)):
            d = write_run(tmp, f"x-{pos}-s{seed}", "ptb", pos, seed, [5.5, base + off],
                          extra_lens={128: base + off + 0.5, 256: base + off + 1.0})
            eval_log(d, "eval_ntk.jsonl", ntk, {64: base + off, 128: base + off + 0.1, 256: base + off + 0.3 + seed / 100})
            eval_log(d, "eval.jsonl", {"eval_seq_lens": [[64, 128, 256], [512]]}, {512: base + off + 2.0})
            xr.append(d)
    xout = os.path.join(tmp, "outx", "cmp")
    rc, so, se = run(xr + ["--out", xout, "--extrapolation"])
    xt = parse_table(so.split("Setting:")[-1], 1) if rc == 0 else {}
    check("eval_only_variants_labelled", rc == 0 and list(xt) == [("ptb", p) for p in ("rope", "rope, ntk", "crope", "crope, ntk")]
          and "warning" not in se, f"rc={rc} {list(xt)} {se[-300:]}")
    dt = parse_table(so.split("Difference to RoPE by evaluation length")[-1]) if rc == 0 else {}
    # rope, ntk minus rope at 256, paired by seed: (0.3 + s/100) - 1.0 = -0.69, -0.68, -0.67
    half = cr.t_quantile(0.975, 2) * 0.01 / math.sqrt(3)
    check("eval_only_variant_paired_with_rope",
          dt.get(("ptb", "rope, ntk"), {}).get("Δ loss T=256") == f"**{-0.68:+.4f} [{-0.68 - half:+.4f}, {-0.68 + half:+.4f}]**",
          str(dt.get(("ptb", "rope, ntk"))))
    xmd = open(xout + "_extrapolation.md").read() if os.path.exists(xout + "_extrapolation.md") else ""
    xlines = {l.split("|")[1].strip(): [c.strip() for c in l.strip().strip("|").split("|")]
              for l in xmd.splitlines() if l.startswith("| ") and not l.startswith("| pos")}
    sd = math.sqrt(sum((x - 0.02 / 3) ** 2 for x in (0.0, 0.03, -0.01)) / 2)
    m = 5.1 + 0.02 / 3
    want = f"{m:.4f} [{m - cr.t_quantile(0.975, 2) * sd / math.sqrt(3):.4f}, {m + cr.t_quantile(0.975, 2) * sd / math.sqrt(3):.4f}]"
    check("extrapolation_table", "### ptb (trained at T=64)" in xmd and "| pos | n | 1x | 2x | 4x | 8x |" in xmd
          and xlines.get("rope, ntk", [None] * 4)[:2] == ["rope, ntk", "3"]
          and xlines["rope, ntk"][3] == want and xlines["rope, ntk"][-1] == "n/a"
          and xlines.get("rope", [None])[-1].startswith(f"{7.0 + 0.02 / 3:.4f} ["), f"{want} {xlines}")
    check("extrapolation_figure", os.path.exists(xout + "_lengths.png"))
    # a scaling of a variant named by match_params keeps both names
    d = write_run(tmp, "x-crope=rope-s1", "ptb", "crope", 1, [5.5, 5.0], cfg_extra={"mlp_hidden": 608, "match_params": "rope"})
    eval_log(d, "eval_ntk.jsonl", ntk, {64: 5.0})
    labels = [g.label for g in cr.make_groups([v for r in [cr.Run(d)] for v in [r] + r.eval_variants()])]
    check("eval_only_variant_of_matched_scheme", labels == ["crope=rope", "crope=rope, ntk"], str(labels))
    rc, so, se = run([d, "--out", os.path.join(tmp, "xm")])
    xmm = open(os.path.join(tmp, "xm.md")).read() if rc == 0 else se
    check("matched_scheme_note_once", "crope=rope: crope at rope's parameter count" in xmm and
          "ntk's parameter count" not in xmm, xmm[-600:])
    saved = os.path.join(tmp, "savedx")
    run(xr + ["--out", os.path.join(tmp, "outx2", "cmp"), "--save-logs", saved])
    rc, so2, se = run(sorted(os.path.join(saved, f) for f in os.listdir(saved)) + ["--out", xout + "2", "--extrapolation"]) \
        if os.path.isdir(saved) else (1, "", "no saved logs")
    check("eval_only_records_in_saved_logs", rc == 0 and len(os.listdir(saved)) == 6 and
          open(xout + "2_extrapolation.md").read() == xmd.replace("cmp.md", "cmp2.md").replace("cmp_lengths", "cmp2_lengths"),
          f"rc={rc} {se[-300:]}")

    # Verdicts. An unfinished run gives none, in the table, the summary and the verdict panel
    # (wikitext2's learned: cut at 60 of 100).
    check("unfinished_no_verdict", l.get("vs rope") == "not comparable: unfinished"
          and "(not comparable)" in l.get("Δ final vs rope", ""), str(l))
    rc, so, se = run(runs[:4] + ["--out", os.path.join(tmp, "out30", "cmp"), "--summary"])
    line = [x for x in so.splitlines() if x.split()[:1] == ["learned"]]
    check("unfinished_no_verdict_summary", rc == 0 and len(line) == 1 and line[0].endswith("not comparable: unfinished")
          and "RoPE" not in line[0], so)
    svg = open(os.path.join(tmp, "out30", "cmp.svg"), encoding="utf-8").read() if rc == 0 else ""
    check("unfinished_no_verdict_figure", "+0.1500: not comparable: unfinished" in svg)
    # runs of another step count: compared, marked, no verdict (two seeds a side: an interval)
    st = [write_run(tmp, f"st-{p}-s{i}", "ptb", p, i, [5.5, f], steps=n)
          for p, n, fs in (("rope", 100, (5.0, 5.1)), ("crope", 200, (4.6, 4.65))) for i, f in enumerate(fs, 1)]
    rc, so, se = run(st + ["--out", os.path.join(tmp, "out31", "cmp")])
    sc = parse_table(so.split("Setting:")[-1]).get(("ptb", "crope"), {}) if rc == 0 else {}
    check("other_steps_no_verdict", sc.get("vs rope") == "not comparable: config differs (steps)"
          and sc.get("Δ final vs rope") == "-0.4250 (not comparable)", str(sc) + se[-300:])
    rc, so, se = run(st + ["--out", os.path.join(tmp, "out31", "cmp"), "--summary"])
    line = [x for x in so.splitlines() if x.split()[:1] == ["crope"]]
    check("other_steps_no_verdict_summary", rc == 0 and len(line) == 1 and "RoPE" not in line[0]
          and line[0].endswith("not comparable: config differs (steps)"), so)
    # the rule: "higher"/"lower" only when the interval excludes 0 at the digits printed
    check("verdict_rule", [cr.verdict(*iv) for iv in ((1e-9, 2e-9), (-3e-5, 4e-5), (4e-5, 3e-4), (1e-4, 3e-4),
                                                      (-3e-4, -6e-5), (None, None))] ==
          ["equal to RoPE to the digits printed", "equal to RoPE to the digits printed", "not distinguishable from RoPE",
           "higher than RoPE", "lower than RoPE", "no interval (one seed)"]
          and not cr.resolved(4e-4, 6e-4, 3) and cr.resolved(4e-4, 6e-4, 4), "")
    # columns of the summary never run together: a label of 4 letters, an interval wider than 28
    wide = [write_run(tmp, f"wd-{p}-s{i}", "ptb", p, i, [5.5, f], params=PARAMS["rope"])
            for p, fs in (("rope", (5.0, 5.3)), ("nope", (2.0, 8.0))) for i, f in enumerate(fs, 1)]
    rc, so, se = run(wide + ["--out", os.path.join(tmp, "out32", "cmp"), "--summary"])
    lines = so.splitlines()
    check("summary_columns_apart", rc == 0 and lines[1].split("  ")[1:2] == ["scheme"]
          and "scheme  " in lines[1] and "]  not distinguishable from RoPE" in so
          and all("  " in x.strip() for x in lines[1:4]), so)

    # Evaluation-only variants stay out of the training summary (table, summary, curves) and are
    # compared with RoPE only paired: on one of RoPE's two seeds, not at all; their rows by length
    # are there. At 1x a difference below the printed digits (1e-9, the same in every seed) is not
    # "higher" (not bold).
    eo = []
    for seed in (1, 2, 3):
        d = write_run(tmp, f"eo-rope-s{seed}", "ptb", "rope", seed, [5.5, 5.0 + seed / 100], extra_lens={128: 5.3})
        eval_log(d, "eval_ntk.jsonl", ntk, {64: 5.0 + seed / 100 + 1e-9 + seed * 1e-10, 128: 5.2 + seed / 1000})
        if seed == 1:
            eval_log(d, "eval_dynamic.jsonl", {"rope_scaling": ["none", "dynamic"]}, {64: 5.01, 128: 5.21})
        eo.append(d)
    rc, so, se = run(eo + ["--out", os.path.join(tmp, "out33", "cmp")])
    main_rows = parse_table(so.split("Setting:")[-1]) if rc == 0 else {}
    by_len = parse_table(so.split("Difference to RoPE by evaluation length")[-1]) if rc == 0 else {}
    ntk_row, dyn_row = by_len.get(("ptb", "rope, ntk"), {}), by_len.get(("ptb", "rope, dynamic"), {})
    check("eval_only_not_in_training_table", list(main_rows) == [("ptb", "rope")]
          and "have no training of their own: not in this table" in so, f"{list(main_rows)} {se[-300:]}")
    check("eval_only_below_printed_digits_not_resolved", ntk_row.get("Δ loss T=64") == "+0.0000 [+0.0000, +0.0000]"
          and ntk_row.get("Δ loss T=128", "").startswith("**-0.0980 ["), str(ntk_row))
    check("eval_only_one_seed_not_paired", dyn_row.get("Δ loss T=64") == "not paired" and dyn_row.get("Δ loss T=128")
          == "not paired" and "not paired: an evaluation-only row is compared with RoPE only by seed" in so, str(dyn_row))
    rc, so, se = run(eo + ["--out", os.path.join(tmp, "out34", "cmp"), "--summary"])
    check("eval_only_not_in_summary", rc == 0 and "ntk" not in so and "dynamic" not in so, so)
    svg = open(os.path.join(tmp, "out34", "cmp.svg"), encoding="utf-8").read() if rc == 0 else ""
    lsvg = open(os.path.join(tmp, "out34", "cmp_lengths.svg"), encoding="utf-8").read() if rc == 0 else ""
    check("eval_only_not_in_curves", "rope, 264,192 attention params" in svg and "ntk" not in svg
          and "dynamic" not in svg and "rope, ntk" in lsvg and "rope, dynamic" in lsvg, "")
    # the extrapolation table says once why ntk and dynamic rows at factor 0 are the same
    rc, so, se = run(eo + ["--out", os.path.join(tmp, "out35", "cmp"), "--extrapolation"])
    xm = open(os.path.join(tmp, "out35", "cmp_extrapolation.md")).read() if rc == 0 else ""
    check("ntk_dynamic_same_said", xm.count("identical by construction") == 1 and "max(1, L / L_train)" in xm
          and "identical by construction" not in xmd, xm[-500:])

    # errors
    rc, so, se = run([os.path.join(tmp, "nope"), "--out", os.path.join(tmp, "e")])
    check("missing_log_error", rc == 1 and se.startswith("error: ") and "nope" in se, f"rc={rc} {se!r}")
    bad = os.path.join(tmp, "bad")
    os.makedirs(bad)
    with open(os.path.join(bad, "log.jsonl"), "w") as f:
        f.write('{"type": "config", "config": {"pos": "rope"}, "params": {}}\n{"type": "train", "step"\n'
                '{"type": "train", "step": 1, "loss": 5.0}\n')
    rc, so, se = run([bad, "--out", os.path.join(tmp, "e")])
    check("malformed_middle_line_error", rc == 1 and se.startswith("error: ") and "log.jsonl:2" in se,
          f"rc={rc} {se!r}")
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    open(os.path.join(empty, "log.jsonl"), "w").close()
    rc, so, se = run([empty, "--out", os.path.join(tmp, "e")])
    check("empty_log_error", rc == 1 and se.startswith("error: ") and "empty" in se, f"rc={rc} {se!r}")
    check("no_traceback", "Traceback" not in se)
    if os.environ.get("KEEP_TMP"):
        print(f"kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
