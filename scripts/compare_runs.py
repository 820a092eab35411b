#!/usr/bin/env python3
"""Compare training runs of build/train: loss curves in the style of the CRoPE
paper's Figure 4 and a Markdown table of final numbers.

usage: compare_runs.py RUN_DIR... [--out PREFIX] [--smooth N] [--eval-lengths] [--extrapolation]
       compare_runs.py --status RUN_DIR... [--plan CONFIG.json [--set KEY=VALUE]...]

Each RUN_DIR holds log.jsonl (first record {"type":"config",...}, then "train"
and "val" records; see MODEL.md). Runs are grouped by dataset, pos, variant
(VARIANT_KEYS: a non-standard mlp_hidden is "crope, mlp 608", a rope_scaling
"rope, ntk") and the rest of their config; runs that differ only in seed form
one group and are drawn as a mean line with a min-max band, and summarised as mean +- std. Each
scheme's final validation loss is compared with RoPE's: the mean difference and
its 95 % interval over seeds (Student's t; paired by seed when the seeds match)
and a verdict by VERDICT_RULE (printed under the table). The val records of
build/train --eval_only in RUN_DIR/eval*.jsonl count too: those evaluated under
other keys (a rope_scaling) are a variant of the same trained runs, in the tables
and figure by length only and compared only paired; those that only add lengths
join the run's own.

Outputs: PREFIX.png, PREFIX.svg (one column per dataset: validation loss at the
training seq_len on top, its difference to RoPE, training loss, the intervals of
the differences; with marker accuracy, its curves and, at several lengths, the
final accuracy against the length), PREFIX.md (the table, also printed; at
several lengths, or with --eval-lengths, a table of the final loss and accuracy
per length), and then PREFIX_lengths.png/.svg: final validation loss against the
evaluation length. --extrapolation: PREFIX_extrapolation.md, per dataset the
final validation loss at each multiple of the training length, mean [95 % interval]
over seeds, one row per scheme and scaling.

--status prints one line per RUN_DIR, "complete", "partial DONE/STEPS" or
"missing" (no usable log), for scripts that resume cut runs; with --plan CONFIG.json
[--set KEY=VALUE...], "differs RUN_DIR: ..." for a run trained with another config.
"""
import argparse
import copy
import gzip
import json
import math
import os
import re
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "data"))
from fetch import require  # noqa: E402  (a missing module is one error line)
from shards import dataset_of_pattern  # noqa: E402  (the shard name rule of every tool)


def t_quantile(p, df):
    """Student's t quantile, for the intervals of the differences to RoPE (scipy is imported
    here, at the first interval: half a second a start that tables without intervals skip)."""
    return require("scipy.stats").t.ppf(p, df)


def pos_schemes():
    """The position schemes of src/pos.h's kPosSchemes, their one home, in its order: (name,
    learned_table) pairs, learned_table being a row's first trait; and kSinScale, the sinusoidal
    table's default factor (read from the header, so no build is needed)."""
    path = os.path.join(ROOT, "src", "pos.h")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        sys.exit(f"error: cannot read the position schemes from {path} (compare_runs.py runs inside the "
                 f"repository): {e.strerror}")
    table = re.search(r"kPosSchemes\[\]\s*=\s*\{(.*?)\n\};", text, re.S)
    rows = re.findall(r'\{\s*Pos::\w+,\s*"([^"]+)",\s*(true|false)\b', table.group(1)) if table else []
    if not rows:
        sys.exit(f"error: {path}: no kPosSchemes table of {{Pos::NAME, \"name\", true|false, ...}} rows found")
    scale = re.search(r"kSinScale\s*=\s*([0-9.eE+-]+);", text)
    if not scale:
        sys.exit(f"error: {path}: no kSinScale = NUMBER; found")
    return [(name, learned == "true") for name, learned in rows], float(scale.group(1))


POS_SCHEMES, SIN_SCALE = pos_schemes()
POS_ORDER = [name for name, _ in POS_SCHEMES]
# Schemes with a trained position table: evaluated past the training length, they read rows that
# no training step reached.
LEARNED_TABLE = {name for name, learned in POS_SCHEMES if learned}
# Fixed colour per known position scheme so every figure of the project reads alike; a scheme
# added to pos.h since takes the next of FALLBACK_COLOURS (by its place in POS_ORDER).
POS_COLOURS = {
    "learned": "#2ca02c",     # green
    "sinusoidal": "#9467bd",  # purple
    "rope": "#1f77b4",        # blue
    "crope": "#d62728",       # red
    "nope": "#8c564b",        # brown
    "alibi": "#ff7f0e",       # orange
    "xpos": "#e377c2",        # pink
}
FALLBACK_COLOURS = ["#17becf", "#bcbd22", "#000000"]
# CRoPE dashed, drawn after RoPE: where the two curves coincide RoPE's shows between the dashes.
POS_STYLES = {"crope": "--", "sinusoidal": "-."}
# A scheme's further groups (variants, scalings) in its colour: the k-th takes the k-th line style
# other than the scheme's own, marker k + 1 and shade k (> 0: towards black, < 0: towards white).
# No plain ':' style: the training panel marks where a cut run stops with dotted lines.
VARIANT_STYLES = ["-", "--", "-.", (0, (1, 1.5)), (0, (6, 2, 1, 2, 1, 2)), (0, (10, 3)), (0, (3, 1, 1, 1)),
                  (0, (2, 3))]
VARIANT_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">"]
VARIANT_SHADES = [0.45, -0.45, 0.25, -0.25, 0.6, -0.6, 0.1, -0.1]
DATASET_ORDER = ["wikitext2", "ptb", "pg19", "synthetic"]
# Config keys that do not change what a run computes (or are the seed itself):
# runs differing only in these belong to the same group.
NON_GROUP_KEYS = {
    "seed", "run_dir", "device", "checkpoint_every", "sample_every", "resume",
    "init_from", "init-from", "train_data", "val_data", "dataset", "pos",
    "eval_every", "eval_batches", "eval_seq_lens", "eval_long_every",
}
# Keys whose differences are expected in a comparison (the two axes varied) or
# change nothing in the numbers (where files go, how often they are written);
# a difference in any other key is warned about.
NOT_WARNED_KEYS = {"pos", "seed", "run_dir", "checkpoint_every", "sample_every", "encoder_json",
                   "eval_long_every", "init_from"}  # when the longer lengths are evaluated; the final evaluation has them all
# Keys that make a labelled variant of a scheme ("crope, mlp 608"): its own group and row, compared
# with RoPE like any scheme, not a difference warned about. key: (name in the label, the values
# that are the standard model given the config: absent, the default 0, or what 0 resolves to).
# sin_scale: only sinusoidal runs set it (the trainer refuses it elsewhere); one from before the key
# existed ran the unscaled table, which resolved_config records as 1.
# rope_scaling (and its factor, "factor 4"): a scaling of the rotary positions, trained with or only
# evaluated with (build/train --eval_only: "rope, ntk", the same trained runs, paired by seed).
# partial_rotary_factor: a share of each head's channels rotating ("rope, partial 0.25").
VARIANT_KEYS = {"mlp_hidden": ("mlp", lambda c: (None, 0, 4 * c.get("n_embd", 0))),
                "sin_scale": ("sin_scale", lambda c: (SIN_SCALE,) if c.get("pos") == "sinusoidal" else (c.get("sin_scale"),)),
                "partial_rotary_factor": ("partial", lambda c: (None, 1, 1.0)),
                "rope_scaling": ("", lambda c: (None, "none")),
                "rope_scaling_factor": ("factor", lambda c: (None, 0, 0.0))}
# match_params only chooses mlp_hidden, which the trainer records resolved: the model is the same
# however its width was asked for
NON_GROUP_KEYS |= set(VARIANT_KEYS) | {"match_params"}
NOT_WARNED_KEYS |= set(VARIANT_KEYS) | {"match_params"}
# A run started from another's weights (--init_from) is fine-tuned: its own row ("rope, linear,
# factor 4, fine-tuned at 256"). These keys are its fine-tuning's own settings: they are compared
# among fine-tuned runs and among the others, not between the two.
FINE_TUNED = "fine-tuned at"  # its variant's name, before its seq_len
FINE_TUNE_KEYS = {"steps", "lr", "schedule", "step_size", "gamma", "warmup_steps", "min_lr",
                  "batch_size", "seq_len", "rope_train_len", "grad_accum"}
# Keys an evaluation-only record may change without making a variant of the trained run: which
# lengths are evaluated and where (its records join the run's own).
EVAL_SAME_KEYS = {"eval_seq_lens", "eval_every", "eval_long_every", "device", "run_dir", "val_data"}
# Keys that may change between a run's start and its resume without changing what it computes
# (a moved folder; how often files are written), and those a resumed run may not change.
NOT_CHANGED_KEYS = {"run_dir", "checkpoint_every", "sample_every", "encoder_json"}
# The synthetic task counts as solved above this marker accuracy.
SOLVED = 0.99
# --paper: the final validation losses the CRoPE paper reports (arXiv 2601.02728, Table 1),
# at its setting (configs/paper.json: GPT-2 L=4 H=4 C=128, B=16, T=1024, 10,000 AdamW steps).
# Only RoPE's and CRoPE's figures are quoted here; learned positions' are left out ("not quoted").
PAPER_FINAL = {
    ("wikitext2", "rope"): 5.364, ("wikitext2", "crope"): 5.373,
    ("ptb", "rope"): 4.021, ("ptb", "crope"): 4.016,
    ("pg19", "rope"): 6.581, ("pg19", "crope"): 6.584,
}
# the shard patterns, compared by name (config_value)
DATA_KEYS = ("train_data", "val_data")
# the keys of configs/paper.json that make a run one at the paper's setting
PAPER_SETTING_KEYS = ("n_layer", "n_head", "n_embd", "batch_size", "seq_len", "steps")


class InputError(Exception):
    """Bad input: reported as one 'error: ...' line and exit status 1."""


# ---------------------------------------------------------------- reading


def eval_logs_of(run_dir):
    """The logs of build/train --eval_only beside a run's log.jsonl: RUN_DIR/eval*.jsonl[.gz]."""
    if not os.path.isdir(run_dir):
        return []
    return sorted(os.path.join(run_dir, f) for f in os.listdir(run_dir)
                  if f.startswith("eval") and (f.endswith(".jsonl") or f.endswith(".jsonl.gz")))


def log_path_of(run_dir):
    if os.path.isfile(run_dir):  # a log file given directly
        return run_dir
    return os.path.join(run_dir, "log.jsonl")


def read_log(path):
    """Returns the list of records of a JSONL log. A malformed last line is
    ignored (a run still writing it); a malformed line elsewhere is an error."""
    if not os.path.exists(path):
        raise InputError(f"{path}: no such log (is the run folder right?)")
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            lines = f.read().split("\n")
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise InputError(f"{path}: cannot read log: {e}")
    # index of the last non-blank line, the only one allowed to be cut short
    last = max((i for i, l in enumerate(lines) if l.strip()), default=-1)
    if last < 0:
        raise InputError(f"{path}: log is empty")
    records = []
    for i, line in enumerate(lines[: last + 1]):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            if not isinstance(rec, dict):
                raise ValueError("not a JSON object")
        except (ValueError, RecursionError) as e:  # RecursionError: nested too deep for json
            if i == last:
                print(f"note: {path}:{i + 1}: ignoring incomplete last line "
                      f"(run still writing?)", file=sys.stderr)
                break
            raise InputError(f"{path}:{i + 1}: malformed JSON line: {e}")
        records.append(rec)
    if not records:
        raise InputError(f"{path}: log has no complete record")
    return records


def dataset_of(config):
    """Dataset name: a "dataset" key, else the folder under data/ of
    train_data ('data/ptb/ptb_train_*.bin' -> 'ptb'), else the shard name's
    dataset (data/shards.py's rule: my_val_set_train_*.bin -> 'my_val_set')."""
    if config.get("dataset"):
        return str(config["dataset"])
    td = str(config.get("train_data") or "")
    if not td:
        return "?"
    parts = [p for p in td.replace("\\", "/").split("/") if p and p != "."]
    if not parts:
        return "?"
    # a folder right under data/ that is not itself the last component
    if "data" in parts and parts.index("data") + 1 < len(parts) - 1:
        return parts[parts.index("data") + 1]
    last = parts[-1]
    name = dataset_of_pattern(last)
    if name:
        return name
    if last.endswith(".bin") or "*" in last:
        return parts[-2] if len(parts) >= 2 else last
    return last  # a folder of shards


def read_config_json(path):
    """A run folder's config.json as a dict; None when there is none."""
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (ValueError, RecursionError) as e:
        raise InputError(f"{path}: malformed JSON: {e}")
    if not isinstance(config, dict):
        raise InputError(f"{path}: not a JSON object")
    return config


def resolved_config(config):
    """A config as the trainer reads it back (src/config.cpp, config_from_json): a sinusoidal run
    from before the key sin_scale existed ran the unscaled table; rope_train_len at its seq_len is
    what a config from before the key means, so it is dropped; a run from before the key
    classifier ran the logits head (its config records the head it ran)."""
    if not isinstance(config, dict):
        return config
    if "classifier" not in config:
        config = dict(config, classifier="logits")
    if config.get("pos") == "sinusoidal" and "sin_scale" not in config:
        config = dict(config, sin_scale=1.0)
    if "rope_train_len" in config and config["rope_train_len"] == config.get("seq_len"):
        config = {k: v for k, v in config.items() if k != "rope_train_len"}
    return config


class Run:
    def __init__(self, run_dir):
        self.dir = run_dir
        self.log = log_path_of(run_dir)
        records = read_log(self.log)
        for path in eval_logs_of(run_dir):
            records = records + read_log(path)
        self.records = records
        config, params = None, {}
        for r in records:
            if r.get("type") == "config":
                config = r.get("config") or {}
                params = r.get("params") or {}
                break
        if config is None:
            cfg_path = os.path.join(os.path.dirname(self.log), "config.json")
            config = read_config_json(cfg_path)
            if config is None:
                raise InputError(f"{self.log}: no config record and no "
                                 f"{cfg_path}")
        if not isinstance(config, dict):
            raise InputError(f"{self.log}: config is not a JSON object")
        self.config = config = resolved_config(config)
        # The keys a resume changed, as (step it applies from, key, was, now): the log's
        # config_change records (MODEL.md); config.json keeps the run's start. Trainers before
        # those records rewrote config.json at each resume: a key it holds otherwise than the
        # log's config record is such a change (step None).
        self.changed = []
        now = resolved_config(read_config_json(os.path.join(os.path.dirname(self.log), "config.json"))) \
            if self.log.endswith("log.jsonl") else None
        if now is not None and now is not config:
            self.changed = [(None, k, config.get(k), now.get(k)) for k in sorted(set(config) | set(now))
                            if k not in NOT_CHANGED_KEYS and config.get(k) != now.get(k)]
        self.current = dict(now or config)  # the config the run now trains with
        for r in records:
            if r.get("type") == "config_change" and isinstance(r.get("changes"), dict):
                for k, was_to in sorted(r["changes"].items()):
                    if not (isinstance(was_to, list) and len(was_to) == 2):
                        raise InputError(f"{self.log}: config_change of {k} is not [was, now]")
                    self.current[k] = was_to[1]
                    if k not in NOT_CHANGED_KEYS:
                        self.changed.append((r.get("step"), k, *was_to))
        self.params = params
        # the arithmetic of each stretch of the run (the first record's, then each resume's);
        # empty in logs written before the trainer recorded it
        self.arithmetic = []
        for r in records:
            on = r.get("run_on") if r.get("type") in ("config", "resumed") else None
            a = str(on.get("arithmetic")) if isinstance(on, dict) and "arithmetic" in on else None
            if a is not None and a not in self.arithmetic:
                self.arithmetic.append(a)
        self.pos = str(config.get("pos", "?"))
        self.dataset = dataset_of(config)
        self.seed = config.get("seed")
        self.seq_len = config.get("seq_len")
        # the length the weights were first trained at: a fine-tuned run's rope_train_len (the
        # trainer resolves it from the --init_from checkpoint), else its own seq_len
        self.fine_tuned = bool(config.get("init_from"))
        self.base_len = (config.get("rope_train_len") or self.seq_len) if self.fine_tuned else self.seq_len
        self.steps = self.current.get("steps")
        try:
            self.train = sorted(
                ((int(r["step"]), float(r["loss"]), r.get("tokens_per_s"))
                 for r in records if r.get("type") == "train"),
                key=lambda x: x[0])
            # FLOP/s of each step (MODEL.md "FLOPs"; logs of older trainers have none)
            self.flops = [float(r["flops_per_s"]) for r in records
                          if r.get("type") == "train" and r.get("flops_per_s") is not None]
            # (step, loss, length, accuracy after the accuracy_tokens (the synthetic task) or None)
            val = [(int(r["step"]), float(r["loss"]), int(r.get("seq_len") or self.seq_len or 0),
                    None if r.get("accuracy") is None else float(r["accuracy"]))
                   for r in records if r.get("type") == "val" and not self.eval_changes(r)]
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"{self.log}: train/val record without a valid "
                             f"step or loss ({e!r})")
        self.set_val(val)

    def eval_changes(self, rec):
        """An evaluation-only record's changed keys {key: value evaluated with} that make it a
        variant of this run ({}: a record of the run itself, at more lengths perhaps)."""
        changes = rec.get("changes") if isinstance(rec.get("changes"), dict) else {}
        out = {}
        for k, was_now in changes.items():
            if not (isinstance(was_now, list) and len(was_now) == 2):
                raise InputError(f"{self.log}: eval_only change of {k} is not [was, now]")
            if k not in EVAL_SAME_KEYS:
                out[k] = was_now[1]
        return out

    def eval_variants(self):
        """A Run per setting that evaluation-only records evaluated this run's weights under (e.g.
        rope_scaling ntk): the same seed and training, its config with those keys, its val records."""
        by_key = {}
        for r in self.records:
            changes = self.eval_changes(r) if r.get("type") == "val" else {}
            if changes:
                by_key.setdefault(json.dumps(changes, sort_keys=True), []).append(r)
        out = []
        for key, recs in sorted(by_key.items()):
            v = copy.copy(self)
            v.eval_only = json.loads(key)
            v.config = dict(self.config, **v.eval_only)
            try:
                v.set_val([(int(r["step"]), float(r["loss"]), int(r.get("seq_len") or self.seq_len or 0),
                            None if r.get("accuracy") is None else float(r["accuracy"])) for r in recs])
            except (KeyError, TypeError, ValueError) as e:
                raise InputError(f"{self.log}: eval_only val record without a valid step or loss ({e!r})")
            out.append(v)
        return out

    def set_val(self, val):
        self.val = sorted(val, key=lambda v: v[:3])
        # the training-length curves: records at seq_len, or all if unknown
        self.val_lens = sorted({v[2] for v in self.val})
        at = self.seq_len if self.seq_len in self.val_lens else (
            self.val_lens[0] if len(self.val_lens) == 1 else None)
        self.val_curve = [(s, l) for s, l, t, _ in self.val if t == at]
        self.acc_curve = [(s, a) for s, _, t, a in self.val if t == at and a is not None]
        self.final_accuracy = self.acc_curve[-1][1] if self.acc_curve else None

    # Steps may be logged 0-based (0..steps-1) or 1-based (1..steps): a log
    # that has a step-0 train record is 0-based.
    def steps_done(self):
        if not self.train:
            return 0
        last = self.train[-1][0]
        return last + 1 if self.train[0][0] == 0 else last

    def is_cut(self):
        return self.steps is not None and self.steps_done() < int(self.steps)

    def final_val(self):
        return self.val_curve[-1][1] if self.val_curve else None

    def best_val(self):
        return min(l for _, l in self.val_curve) if self.val_curve else None

    def final_by_len(self, accuracy=False):
        """{seq_len: the loss (or the accuracy) of the last val record at that length that has one}"""
        out = {}
        for _, l, t, a in self.val:  # sorted by step, so the last one wins
            if not accuracy or a is not None:
                out[t] = a if accuracy else l
        return out

    def label(self):
        return f"{self.pos} seed {self.seed}"

    eval_only = {}  # an eval_variants() copy: the keys it was evaluated with

    def variant(self):
        """((name, value), ...): the VARIANT_KEYS this run sets to something other than the standard
        (the scaling last: "crope, mlp 608, ntk"), then the other keys an evaluation-only variant changed
        ("eval_batches 2")."""
        keys = sorted(VARIANT_KEYS, key=lambda k: (k.startswith("rope_scaling"), k))
        return tuple((VARIANT_KEYS[k][0], self.config[k]) for k in keys
                     if self.config.get(k) not in VARIANT_KEYS[k][1](self.config)) + \
            (((FINE_TUNED, self.seq_len),) if self.fine_tuned else ()) + \
            tuple((k, v) for k, v in sorted(self.eval_only.items()) if k not in VARIANT_KEYS)

    def group_key(self):
        rest = tuple(sorted((k, json.dumps(v, sort_keys=True))
                            for k, v in self.config.items()
                            if k not in NON_GROUP_KEYS))
        return (self.dataset, self.pos, self.variant(), rest)


# ---------------------------------------------------------------- grouping


def order_key(ds, pos):
    di = DATASET_ORDER.index(ds) if ds in DATASET_ORDER else len(DATASET_ORDER)
    pi = POS_ORDER.index(pos) if pos in POS_ORDER else len(POS_ORDER)
    return (di, ds, pi, pos)


class Group:
    def __init__(self, runs):
        # seeds in numeric order (1, 2, 10), then any that are not numbers
        self.runs = sorted(runs, key=lambda r: (not isinstance(r.seed, int), r.seed if isinstance(r.seed, int) else 0,
                                                str(r.seed), r.dir))
        self.dataset = runs[0].dataset
        self.pos = runs[0].pos
        self.config = runs[0].config
        # a variant is labelled by its keys ("crope, mlp 608"; its parameter count is in the table
        # and the legends) and drawn in its scheme's colour with another line style
        self.variant = runs[0].variant()
        # a variant made by match_params REF is named as --pos names it, "crope=rope" (one name for
        # it everywhere); another by its keys
        match = next((r.config["match_params"] for r in runs if r.config.get("match_params")), None)
        rest = [(name, v) for name, v in self.variant if not (match and name == "mlp")]
        self.label = (f"{self.pos}={match}" if len(rest) < len(self.variant) else self.pos) + \
            "".join(f", {name} {v:g}" if isinstance(v, float) else f", {name} {v}" if name else f", {v}"
                    for name, v in rest)
        # evaluation-only (build/train --eval_only): the trained runs under other keys, no training of
        # its own; it belongs to the tables and figure by length, not to the training summary
        self.eval_only = bool(runs[0].eval_only)
        # line style, marker and shade: set by make_groups, one of each per group of a scheme
        self.style, self.marker, self.shade = POS_STYLES.get(self.pos, "-"), VARIANT_MARKERS[0], 0.0


def make_groups(runs):
    by_key = {}
    for r in runs:
        by_key.setdefault(r.group_key(), []).append(r)
    groups = [Group(rs) for rs in by_key.values()]
    groups.sort(key=lambda g: order_key(g.dataset, g.pos) +
                (bool(g.variant), [json.dumps(v) for v in g.variant],
                 json.dumps(g.config, sort_keys=True, default=str)))
    # Config keys on which groups of the same (dataset, pos, variant) differ go into their labels.
    by_dpv = {}
    for g in groups:
        by_dpv.setdefault((g.dataset, g.pos, g.variant), []).append(g)
    for gs in by_dpv.values():
        if len(gs) < 2:
            continue
        keys = sorted({k for g in gs for k in g.config
                       if k not in NON_GROUP_KEYS and
                       len({json.dumps(h.config.get(k), sort_keys=True)
                            for h in gs}) > 1})
        for g in gs:
            g.label += " (" + ", ".join(f"{k}={g.config.get(k)}" for k in keys) + ")"
    # The groups of one scheme share its colour; each after the first (a variant, a scaling, another
    # config) gets its own line style, marker and shade of that colour, so that none looks like another.
    by_dp = {}
    for g in groups:
        by_dp.setdefault((g.dataset, g.pos), []).append(g)
    for gs in by_dp.values():
        styles = [s for s in VARIANT_STYLES if s != gs[0].style]
        for i, g in enumerate(gs[1:]):
            g.style, g.marker = styles[i % len(styles)], VARIANT_MARKERS[(i + 1) % len(VARIANT_MARKERS)]
            g.shade = VARIANT_SHADES[i % len(VARIANT_SHADES)]
    return groups


# ---------------------------------------------------------------- config differences


def who(runs):
    """'rope s1,s2, crope s1': the runs named by pos and seed."""
    by_pos = {}
    for r in runs:
        by_pos.setdefault(r.pos, []).append(str(r.seed))
    return ", ".join(f"{p} s{','.join(seeds)}" for p, seeds in
                     sorted(by_pos.items(), key=lambda kv: order_key("", kv[0])))


def config_value(run, key):
    """A warned key's value as text; None for "arithmetic" (not a config key: the log's
    run_on records) in logs written before the trainer recorded it. The data keys by their shards'
    names alone: the same shards in another folder (runs from another machine) are the same data."""
    if key == "arithmetic":
        return " then ".join(run.arithmetic) or None
    if key in DATA_KEYS and isinstance(run.config.get(key), str):
        return json.dumps(os.path.basename(run.config[key]))
    return json.dumps(run.config[key], sort_keys=True) if key in run.config else "unset"


def config_differences(runs):
    """{dataset: [(key, [(value, runs)...])...]}: every config key, other than
    NOT_WARNED_KEYS, on which runs of the same dataset disagree (a key a run
    does not record counts as "unset"), and the arithmetic the runs recorded
    (fp32 on a GPU: with or without TF32; runs that did not record it are left
    out of that one). Values with the most runs come first."""
    by_ds = {}
    for r in runs:
        by_ds.setdefault(r.dataset, []).append(r)
    out = {}
    for ds, rs in by_ds.items():
        diffs = []
        for k in sorted({k for r in rs for k in r.config} - NOT_WARNED_KEYS) + ["arithmetic"]:
            sides = [[r for r in rs if r.fine_tuned == t] for t in (False, True)] if k in FINE_TUNE_KEYS else [rs]
            for side in sides:
                vals = {}
                for r in side:
                    v = config_value(r, k)
                    if v is not None:
                        vals.setdefault(v, []).append(r)
                if len(vals) > 1:
                    diffs.append((k, sorted(vals.items(), key=lambda kv: -len(kv[1]))))
        if diffs:
            out[ds] = diffs
    return out


def warning_lines(diffs):
    return [f"{ds}: the runs differ in {k}: " + "; ".join(f"{v} ({who(rs)})" for v, rs in vals)
            for ds, ks in diffs.items() for k, vals in ks]


def differing_keys(g, ref, diffs):
    """The warned keys on which the runs of group g and of its reference differ (a fine-tuned
    group and its reference may differ in the fine-tuning's keys)."""
    runs = g.runs + (ref.runs if ref is not None else [])
    return sorted({k for k, _ in diffs.get(g.dataset, [])
                   if not (k in FINE_TUNE_KEYS and len({r.fine_tuned for r in runs}) > 1) and
                   len({config_value(r, k) for r in runs} - {None}) > 1})


def setting_text(runs):
    """'300 steps, B=8, T=64, seeds 1,2' (values that differ joined by '/'), with the precision
    after T unless every run is fp32 (logs older than the precision key were fp32)."""
    def vals(key, default="?"):
        return "/".join(sorted({str(r.config.get(key, default)) for r in runs}, key=lambda v: (len(v), v)))
    seeds = sorted({str(r.seed) for r in runs}, key=lambda v: (len(v), v))
    prec = vals("precision", "fp32")
    return (f"{vals('steps')} steps, B={vals('batch_size')}, T={vals('seq_len')}, "
            f"{'' if prec == 'fp32' else prec + ', '}"
            f"{'seed' if len(seeds) == 1 else 'seeds'} {','.join(seeds)}")


# ---------------------------------------------------------------- numbers


def mean_std(xs):
    """Mean and sample standard deviation (ddof=1; 0 for a single value)."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return None, None
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, 0.0
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def median(xs):
    xs = sorted(xs)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def fmt_ms(m, s, n):
    if m is None:
        return "n/a"
    return f"{m:.4f}" if n < 2 else f"{m:.4f} ± {s:.4f}"


def fmt_int(x):
    return "n/a" if x is None else f"{int(round(x)):,}"


def fmt_gflops(x):
    return "n/a" if x is None else f"{x:,.1f}"


def summarise(g):
    finals = [r.final_val() for r in g.runs]
    bests = [r.best_val() for r in g.runs]
    n_val = sum(1 for f in finals if f is not None)
    fm, fs = mean_std(finals)
    bm, bs = mean_std(bests)
    tps = [float(t) for r in g.runs for _, _, t in r.train if t is not None]
    am, as_ = mean_std([r.final_accuracy for r in g.runs])
    p0 = g.runs[0].params or {}
    return {
        "final": (fm, fs), "best": (bm, bs), "n_val": n_val,
        "accuracy": (am, as_),
        "n_acc": sum(1 for r in g.runs if r.final_accuracy is not None),
        "ppl": math.exp(fm) if fm is not None and fm < 700 else None,
        "tokens_per_s": median(tps),
        "gflops": median([f / 1e9 for r in g.runs for f in r.flops]),
        "params_total": p0.get("total"), "params_attention": p0.get("attention"),
        "cut": [f"({'seed %s: ' % r.seed if len(g.runs) > 1 else ''}{problem})"
                for r in g.runs for problem in run_problems(r)],
    }


def run_problems(r):
    """What makes a run's numbers not those of its config run to the end: unfinished (its last
    step short of the steps it aims at), or resumed with another config."""
    out = [f"unfinished: step {r.steps_done()} of {r.steps}"] if r.is_cut() else []
    # a change at the last step done applied to no step (a finished run resumed with another lr)
    changed = [(s, k, a, b) for s, k, a, b in r.changed if s is None or s < r.steps_done()]
    if changed:
        out.append("config changed on resume: " + ", ".join(
            f"{k} {json.dumps(a)} -> {json.dumps(b)}" + ("" if s is None else f" from step {s}")
            for s, k, a, b in changed))
    return out


def problem_lines(runs):
    return [f"{r.dataset} {r.pos} seed {r.seed} ({r.dir}): {p}" for r in runs for p in run_problems(r)]


def reference_group(g, groups):
    """The RoPE group of the same dataset the difference is taken against: a standard one (no
    variant but fine-tuning) where there is one, with the same other config if there is one, else
    the first. So a fine-tuned group is compared with RoPE fine-tuned alike, and RoPE fine-tuned
    with RoPE as first trained."""
    ropes = [h for h in groups if h.dataset == g.dataset and h.pos == "rope"]
    ropes = [h for h in ropes if all(name == FINE_TUNED for name, _ in h.variant)] or ropes
    if not ropes:
        return None
    for h in ropes:
        if h.runs[0].group_key()[3] == g.runs[0].group_key()[3] and (h is not g or not g.variant):
            return h
    return next((h for h in ropes if not h.variant), ropes[0])


def t_half(sd, n):
    """The half width of the 95 % interval of a mean of n values of sample std sd (Student's t)."""
    return t_quantile(0.975, n - 1) * sd / math.sqrt(n)


def mean_interval(xs):
    """(mean, lo, hi, n) of the values that are not None: the mean and its 95 % interval
    (Student's t), lo and hi None with fewer than two values, the mean None with none."""
    xs = [x for x in xs if x is not None]
    m, sd = mean_std(xs)
    if len(xs) < 2:
        return m, None, None, len(xs)
    half = t_half(sd, len(xs))
    return m, m - half, m + half, len(xs)


def final_val(r):
    return r.final_val()


# Whether g's final loss is at another length than its reference's (RoPE fine-tuned at a longer
# one against RoPE as first trained): compared by evaluation length only, OTHER_LENGTH says so.
OTHER_LENGTH = "trained at another length: see the tables by length"


def other_length(g, ref):
    return g.config.get("seq_len") != ref.config.get("seq_len")


def diff_interval(g, ref, value=final_val):
    """g's value (by default the final validation loss) minus ref's (RoPE's) over seeds, with its
    95 % interval from Student's t: paired by seed when both groups ran the same seeds (the mean of
    each seed's difference), else Welch's interval of the difference of the two means. value(run)
    is a run's number, None where it has none. An evaluation-only variant (the same trained runs
    under a scaling) is compared only paired, where every seed of RoPE has it: else mean None and
    how NOT_PAIRED. Returns (mean, lo, hi, how), lo and hi None with fewer than two seeds on a
    side; how says which, e.g. "paired, 5 seeds"."""
    a = {r.seed: value(r) for r in g.runs if value(r) is not None}
    b = {r.seed: value(r) for r in ref.runs if value(r) is not None}
    if not a or not b:
        return None, None, None, "no final validation loss"
    if g.eval_only and set(a) != set(b):  # the same trained runs: against RoPE's own seeds only
        return None, None, None, NOT_PAIRED
    if set(a) == set(b):
        m, sd = mean_std([a[s] - b[s] for s in a])
        n = len(a)
        if n < 2:
            return m, None, None, "1 seed"
        half = t_half(sd, n)
        return m, m - half, m + half, f"paired, {n} seeds"
    (ma, sa), (mb, sb), na, nb = mean_std(list(a.values())), mean_std(list(b.values())), len(a), len(b)
    if na < 2 or nb < 2:
        return ma - mb, None, None, f"unpaired, {na} and {nb} seeds"
    va, vb = sa * sa / na, sb * sb / nb
    df = (va + vb) ** 2 / (va * va / (na - 1) + vb * vb / (nb - 1)) if va + vb > 0 else na + nb - 2
    half = t_quantile(0.975, df) * math.sqrt(va + vb)
    return ma - mb, ma - mb - half, ma - mb + half, f"unpaired (Welch), {na} and {nb} seeds"


# An evaluation-only variant that not every seed of RoPE was evaluated under: not compared.
NOT_PAIRED = "not paired: not every seed of RoPE evaluated under it"
# What a verdict means: its one statement, printed under the table.
VERDICT_RULE = (
    "\"higher\"/\"lower than RoPE\" when the interval, rounded to the digits printed (4 for a loss, 3 for an "
    "accuracy), excludes 0; \"equal to RoPE to the digits printed\" when it rounds to [0, 0] at both ends; "
    "else \"not distinguishable from RoPE\"; no verdict (\"not comparable\") where a run of either side is "
    "unfinished or was resumed with another config, or the two sides' configs differ in more than the "
    "scheme (steps, seq_len, ...)")


def verdict(lo, hi, digits=4):
    """What the interval says about the scheme against RoPE (VERDICT_RULE): only an interval
    that excludes 0 at the digits the table prints is a difference; a smaller one (the bits of
    another thread count, say) is not."""
    if lo is None:
        return "no interval (one seed)"
    if round(lo, digits) == 0 and round(hi, digits) == 0:
        return "equal to RoPE to the digits printed"
    if not resolved(lo, hi, digits):
        return "not distinguishable from RoPE"
    return "lower than RoPE" if hi < 0 else "higher than RoPE"


def not_comparable(g, ref, diffs):
    """Why g's difference to ref gets no verdict ('unfinished', 'config changed on resume', 'config
    differs (steps)'), '' when it gets one: a run of either group did not run its config to the
    end (run_problems), or the groups differ in a warned key (differing_keys)."""
    problems = sorted({p.split(":")[0] for r in g.runs + ref.runs for p in run_problems(r)})
    keys = differing_keys(g, ref, diffs)
    return ", ".join(problems + ([f"config differs ({', '.join(keys)})"] if keys else []))


def first_solved(r):
    """The step of the first evaluation whose marker accuracy reached SOLVED, for a run that ends
    solved; None for one that does not."""
    if r.final_accuracy is None or r.final_accuracy < SOLVED:
        return None
    return next(st for st, a in r.acc_curve if a >= SOLVED)


def solved_summary(g):
    """(k, n, median, firsts): k of the n seeds with accuracy end solved; the median over all n of
    the step each first reached SOLVED (a seed that ends unsolved counts as never: math.inf); each
    seed's step (None: never)."""
    runs = [r for r in g.runs if r.acc_curve]
    firsts = [first_solved(r) for r in runs]
    k = sum(f is not None for f in firsts)
    n = len(firsts)
    med = statistics.median(math.inf if f is None else f for f in firsts) if n else None
    return k, n, med, firsts


def step_text(x):
    return "never" if x is None or x == math.inf else f"{x:g}"


def paper_value(g, delta):
    """The paper's final validation loss for g's (dataset, pos), or with delta its difference
    to the paper's RoPE; None where the paper's figure is not quoted."""
    v = PAPER_FINAL.get((g.dataset, g.pos))
    if v is None or not delta:
        return v
    return v - PAPER_FINAL[(g.dataset, "rope")]


def paper_cells(g):
    """--paper: the table's two cells, the paper's final loss and its difference to RoPE."""
    v = paper_value(g, False)
    if v is None:
        return ["not quoted", "not quoted"]
    return [f"{v:.3f}", "ref" if g.pos == "rope" else f"{paper_value(g, True):+.3f}"]


def build_table(groups, stats, diffs, paper=False):
    head = ["dataset", "pos", "seeds", "params", "attention params",
            "final val loss", "best val loss", "val ppl", "tokens/s",
            "Δ final vs rope", "Δ 95 % interval", "vs rope"] + \
        (["paper: final val loss", "paper: Δ vs rope"] if paper else []) + ["notes"]
    # the synthetic task's marker accuracy and how many seeds solved it, when the runs measured it
    with_acc = any(stats[id(g)]["n_acc"] for g in groups)
    # the trainer's GFLOP/s beside tokens/s, when the runs logged it
    with_flops = any(stats[id(g)]["gflops"] is not None for g in groups)
    if with_flops:
        head[9:9] = ["GFLOP/s"]
    if with_acc:
        head[8:8] = ["marker accuracy", f"solved (≥ {SOLVED:g})", "first solved: median (per seed)"]
    rows = []
    for g in groups:
        st = stats[id(g)]
        ref = reference_group(g, groups)
        interval, says = "", ""
        if ref is g:
            diff = interval = says = "ref"
        elif ref is None or st["final"][0] is None or \
                stats[id(ref)]["final"][0] is None:
            diff = "n/a"
        elif other_length(g, ref):
            diff, says = "n/a", OTHER_LENGTH
        else:
            diff = f"{st['final'][0] - stats[id(ref)]['final'][0]:+.4f}"
            _, lo, hi, how = diff_interval(g, ref)
            interval = how if lo is None else f"[{lo:+.4f}, {hi:+.4f}], {how}"
            says = verdict(lo, hi)
        why = not_comparable(g, ref, diffs) if ref not in (None, g) else ""
        if why:
            diff += " (not comparable)"
            says = f"not comparable: {why}"
        keys = differing_keys(g, ref, diffs)
        notes = st["cut"] + ([f"WARNING: config differs ({', '.join(keys)})"] if keys else [])
        n = len(g.runs)
        seeds = ",".join("?" if r.seed is None else str(r.seed) for r in g.runs)
        nv = st["n_val"]
        rows.append([
            g.dataset, g.label, f"{n} ({seeds})",
            fmt_int(st["params_total"]), fmt_int(st["params_attention"]),
            fmt_ms(*st["final"], nv), fmt_ms(*st["best"], nv),
            "n/a" if st["ppl"] is None else f"{st['ppl']:.2f}",
            fmt_int(st["tokens_per_s"])] + ([fmt_gflops(st["gflops"])] if with_flops else []) +
            [diff, interval, says] + (paper_cells(g) if paper else []) + [" ".join(notes)])
        if with_acc:
            k, n, med, firsts = solved_summary(g)
            rows[-1][8:8] = [fmt_ms(*st["accuracy"], st["n_acc"]), f"{k} of {n}",
                             "n/a (evaluated only)" if g.runs[0].eval_only else
                             f"{step_text(med)} ({', '.join(step_text(f) for f in firsts)})" if n else "n/a"]
    return md_table(head, rows)


def columns(rows, indent="  "):
    """Text rows as columns: each cell padded to its column's widest and two spaces after it, so
    that no two cells run together (the last column unpadded)."""
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(max(len(r) for r in rows))]
    return [indent + "".join(c.ljust(w + 2) for c, w in zip(r, widths)).rstrip() for r in rows]


def summary_text(groups, md_path, diffs):
    """A short summary for a terminal, one line per trained scheme and dataset: the seeds that
    solved the task (when measured), the final validation loss minus RoPE's with its 95 % interval,
    and what the interval says (no verdict where not_comparable); the tables are in md_path."""
    with_acc = any(r.acc_curve for g in groups for r in g.runs)
    out = []
    for ds in datasets_of(groups):
        gs = [g for g in groups if g.dataset == ds]
        out.append(f"{ds}: {setting_text([r for g in gs for r in g.runs])}")
        rows = [["scheme"] + (["solved"] if with_acc else []) + ["final loss - RoPE [95 %]", "verdict"]]
        for g in gs:
            ref = reference_group(g, groups)
            if ref is g:
                diff, says = "ref", ""
            elif ref is None:
                diff, says = "n/a", "no RoPE runs"
            elif other_length(g, ref):
                diff, says = "n/a", OTHER_LENGTH
            else:
                m, lo, hi, how = diff_interval(g, ref)
                diff, says = ("n/a", how) if m is None else (diff_text(m, lo, hi), verdict(lo, hi))
                why = not_comparable(g, ref, diffs)
                says = f"not comparable: {why}" if why else says
            solved = []
            if with_acc:
                k, n, _, _ = solved_summary(g)
                solved = [f"{k}/{n}"]
            rows.append([g.label] + solved + [diff, says])
        out += columns(rows)
    out.append(f"tables (by evaluation length too, each with its interval): {md_path}")
    return "\n".join(out) + "\n"


def untrained(g, t):
    """Whether group g at evaluation length t reads a learned position table past the training
    length: rows no training step reached."""
    return g.pos in LEARNED_TABLE and t > (g.config.get("seq_len") or t)


def resolved(lo, hi, digits=4):
    """Whether a 95 % interval of a difference excludes 0 as printed, both ends rounded to digits
    on one side of it (VERDICT_RULE)."""
    return lo is not None and (round(lo, digits) > 0 or round(hi, digits) < 0)


def diff_text(m, lo, hi, digits=4):
    """'+0.1650 [+0.0890, +0.2420]', the mean alone without an interval."""
    return f"{m:+.{digits}f}" + ("" if lo is None else f" [{lo:+.{digits}f}, {hi:+.{digits}f}]")


def md_table(head, rows):
    """A Markdown table of the head's columns and the rows' cells."""
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"] +
                     ["| " + " | ".join(r) + " |" for r in rows])


def length_columns(groups, accuracy):
    """The length tables' columns, (accuracy?, length): the loss at each length, then the accuracy."""
    lens = sorted({t for g in groups for r in g.runs for t in r.val_lens})
    return [(a, t) for a in ([False, True] if accuracy else [False]) for t in lens]


def build_length_diff_table(groups, accuracy, diffs):
    """Each scheme's final validation loss (then marker accuracy) minus RoPE's at each evaluation
    length: the mean difference over seeds and its 95 % interval (diff_interval), in bold where
    resolved() and the two are comparable (the row says why not). Every statement about lengths
    rests on these."""
    cols = length_columns(groups, accuracy)
    rows = []
    for g in groups:
        ref = reference_group(g, groups)
        if ref in (None, g):
            continue
        why = not_comparable(g, ref, diffs)
        rows.append([g.dataset, g.label + (f" (vs {ref.label})" if ref.variant else "") +
                     (f" (not comparable: {why})" if why else "")])
        for a, t in cols:
            m, lo, hi, how = diff_interval(g, ref, lambda r: r.final_by_len(a).get(t))
            digits = 3 if a else 4
            cell = ("not paired" if how == NOT_PAIRED else "n/a") if m is None else diff_text(m, lo, hi, digits)
            bold = resolved(lo, hi, digits) and not why
            rows[-1].append((f"**{cell}**" if bold else cell) + (" †" if untrained(g, t) else ""))
    head = ["dataset", "pos"] + [f"Δ {'accuracy' if a else 'loss'} T={t}" for a, t in cols]
    return md_table(head, rows) if rows else ""


def build_length_table(groups, accuracy):
    """The final validation loss at each evaluation length, then (accuracy) the marker accuracy:
    mean ± std over seeds, n/a where not evaluated, † where untrained()."""
    cols = length_columns(groups, accuracy)
    rows = []
    for g in groups:
        rows.append([g.dataset, g.label])
        for a, t in cols:
            xs = [r.final_by_len(a).get(t) for r in g.runs]
            n = sum(x is not None for x in xs)
            rows[-1].append(fmt_ms(*mean_std(xs), n) + (" †" if n and untrained(g, t) else ""))
    return md_table(["dataset", "pos"] + [f"{'accuracy' if a else 'loss'} T={t}" for a, t in cols], rows)


def build_extrapolation_tables(groups):
    """Per dataset, the final validation loss of each scheme (and scaling, variant) at each
    evaluation length as a multiple of the training length: 'mean [lo, hi]', the 95 % interval
    over seeds (mean_interval), † where untrained(), n/a where not evaluated; n: the seeds."""
    out = []
    for ds in datasets_of(groups):
        gs = [g for g in groups if g.dataset == ds]
        mults = sorted({t / r.base_len for g in gs for r in g.runs if r.base_len for t in r.val_lens})
        rows = []
        for g in gs:
            cells, ns = [], set()
            for x in mults:
                m, lo, hi, n = mean_interval([r.final_by_len().get(round(x * r.base_len)) for r in g.runs if r.base_len])
                ns.add(n)
                cells.append("n/a" if m is None else f"{m:.4f}" + ("" if lo is None else f" [{lo:.4f}, {hi:.4f}]") +
                             (" †" if untrained(g, round(x * (g.runs[0].base_len or 0))) else ""))
            rows.append([g.label, "/".join(str(n) for n in sorted(ns - {0}))] + cells)
        head = ["pos", "n"] + [f"{x:g}x" for x in mults]
        trained = "/".join(sorted({str(r.base_len) for g in gs for r in g.runs}))
        tuned = "/".join(sorted({str(r.seq_len) for g in gs for r in g.runs if r.fine_tuned}))
        out.append(f"### {ds} (trained at T={trained}{f'; fine-tuned rows then at T={tuned}' if tuned else ''})\n\n" +
                   md_table(head, rows))
    return "\n\n".join(out)


# ---------------------------------------------------------------- curves


def smooth(ys, n):
    """Trailing moving average over n points (fewer at the start)."""
    if n <= 1 or not ys:
        return list(ys)
    out, acc = [], 0.0
    for i, y in enumerate(ys):
        acc += y
        if i >= n:
            acc -= ys[i - n]
        out.append(acc / min(i + 1, n))
    return out


def band(curves):
    """curves: list of [(step, value)]. Returns steps, mean, min, max over the
    curves that have each step (a cut seed drops out where it stops)."""
    at = {}
    for c in curves:
        for s, v in c:
            at.setdefault(s, []).append(v)
    steps = sorted(at)
    return (steps, [sum(at[s]) / len(at[s]) for s in steps],
            [min(at[s]) for s in steps], [max(at[s]) for s in steps])


def pos_colour(pos):
    """A scheme's colour: its own, else a fallback by its place among pos.h's schemes without
    one; grey for a name pos.h does not know (an old log)."""
    if pos in POS_COLOURS:
        return POS_COLOURS[pos]
    new = [p for p in POS_ORDER if p not in POS_COLOURS]
    return FALLBACK_COLOURS[new.index(pos) % len(FALLBACK_COLOURS)] if pos in new else "#7f7f7f"


def colour(g):
    """A group's colour: its scheme's, shaded towards black or white for a variant (Group.shade)."""
    import matplotlib.colors as mc
    rgb = mc.to_rgb(pos_colour(g.pos))
    to = 0.0 if g.shade > 0 else 1.0
    return mc.to_hex([c + abs(g.shade) * (to - c) for c in rgb])


def draw(ax, g, curves, per_seed=False, label=None):
    """One group's curves: a thin line per seed (per_seed), else the mean with
    a min-max band over seeds."""
    curves = [c for c in curves if c]
    if not curves:
        return
    if label is None:
        p = g.runs[0].params or {}
        attention = "" if p.get("attention") is None else f", {p['attention']:,} attention params"
        if g.variant and p.get("total") is not None:  # the variant's point: its total
            attention = f", {p['total']:,} params" + (f" ({p['attention']:,} attention)" if attention else "")
        label = g.label + attention + (f" ({len(curves)} seeds)" if len(curves) > 1 else "")
    # a point or two is no line: marked; a variant's line carries its marker about 8 times
    n = max(len(c) for c in curves)
    marker = g.marker if n < 4 or g.marker != VARIANT_MARKERS[0] else None
    mark = dict(marker=marker, ms=3, markevery=1 if n < 4 else max(1, n // 8))
    if per_seed:
        for i, c in enumerate(curves):
            ax.plot([x for x, _ in c], [y for _, y in c], ls=g.style, color=colour(g), lw=0.9,
                    alpha=0.8, label=label if i == 0 else None, **mark)
        return
    steps, m, lo, hi = band(curves)
    ax.plot(steps, m, ls=g.style, color=colour(g), lw=1.3, label=label, **mark)
    if len(curves) > 1:
        ax.fill_between(steps, lo, hi, color=colour(g), alpha=0.2, lw=0)


def zoom(ax, keep=None, skip=0.15, after_first=False):
    """Fit the y range to the curves and their bands after the first `skip` of the steps, or
    (after_first) after the first step (and to the value keep): the first steps fall from ~ln V
    and would otherwise squash the differences at the end, which are what the comparison is
    about."""
    pts = [(x, y) for line in ax.lines if line.get_linestyle() not in ("None", ":")
           for x, y in zip(line.get_xdata(), line.get_ydata())]
    pts += [tuple(v) for band in ax.collections for path in band.get_paths() for v in path.vertices]
    if len(pts) < 2:
        return
    x0, x1 = min(x for x, _ in pts), max(x for x, _ in pts)
    ys = [y for x, y in pts if (x > x0 if after_first else x >= x0 + skip * (x1 - x0))] or [y for _, y in pts]
    ys += [] if keep is None else [keep]
    lo, hi = min(ys), max(ys)
    pad = 0.05 * (hi - lo) or 0.05
    ax.set_ylim(lo - pad, hi + pad)


def mark_outside(ax):
    """Each point of the curves above or below the y range: a triangle at that edge, with its
    step and value."""
    lo, hi = ax.get_ylim()
    for line in list(ax.lines):
        for x, y in zip(line.get_xdata(), line.get_ydata()):
            if lo <= y <= hi:
                continue
            edge, marker, va = (hi, "^", "top") if y > hi else (lo, "v", "bottom")
            ax.plot([x], [edge], marker=marker, ms=6, color=line.get_color(), clip_on=False, ls="None")
            ax.annotate(f"step {x:g}: {y:+.3f}", (x, edge), xytext=(6, 0), textcoords="offset points",
                        fontsize=7, color=line.get_color(), va=va)


def finish_axes(ax):
    """Grid lines, and the legend unless a panel finished before it shows the same one: a grid
    of datasets x panels gets one legend, not one over every panel's curves."""
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    shown = [other.get_legend_handles_labels()[1] for other in ax.figure.axes if other.get_legend()]
    if handles and labels not in shown:
        ax.legend(fontsize=8 if len(handles) <= 6 else 7)


def warn_figure(fig, diffs):
    """The config differences in red under the title."""
    lines = [f"WARNING: the {ds} runs differ in {', '.join(k for k, _ in ks)}, not only in pos "
             f"and seed (see the table)" for ds, ks in diffs.items()]
    if lines:
        fig.text(0.5, 1 - 0.5 / fig.get_figheight(), "\n".join(lines), ha="center", va="top",
                 color="#cc0000", fontsize=9, fontweight="bold")
    return len(lines)


# Where a legend may go in its panel, in the order tried.
LEGEND_LOCS = ("upper right", "upper left", "lower left", "lower right", "center right", "center left",
               "upper center", "lower center", "center")


def data_paths(ax):
    """What ax draws from the data, as (display path, filled) pairs: each line, each path of its
    collections (error bars; the bands, filled). Reference lines across the panel (axhline,
    axvline: not in data coordinates) are not data."""
    import numpy as np
    from matplotlib.collections import PolyCollection
    from matplotlib.path import Path
    data = [a for a in ax.lines + ax.collections if a.get_visible() and a.get_transform() == ax.transData]
    out = [(Path(ax.transData.transform(np.column_stack([a.get_xdata(), a.get_ydata()]).astype(float))), False)
           for a in data if hasattr(a, "get_xdata") and len(a.get_xdata())]
    return out + [(Path(ax.transData.transform(p.vertices)), isinstance(a, PolyCollection))
                  for a in data if not hasattr(a, "get_xdata") for p in a.get_paths() if len(p.vertices)]


def covers(box, paths):
    """Whether the display bounding box covers any point of the data_paths, or of a line between
    two (of a band, any point inside it)."""
    return any(box.contains(*p.vertices[0]) if len(p.vertices) == 1 else p.intersects_bbox(box, filled=filled)
               for p, filled in paths)


def holds(outer, box):
    """Whether the display bounding box outer holds box."""
    return outer.x0 <= box.x0 and box.x1 <= outer.x1 and outer.y0 <= box.y0 and box.y1 <= outer.y1


def place_legends(fig):
    """Puts each panel's legend off its data: at the first of LEGEND_LOCS whose box lies in the
    panel and covers none of its data_paths; where none does, in an empty panel of the figure that
    holds it, else under the figure. Returns the legends put under the figure."""
    renderer = fig.canvas.get_renderer()
    spare = [a for a in fig.axes if not a.axison and not a.get_legend()]
    below = []
    for ax in [a for a in fig.axes if a.get_legend() and a.axison]:
        handles, labels = ax.get_legend_handles_labels()
        size = ax.get_legend().get_texts()[0].get_fontsize()
        paths, panel = data_paths(ax), ax.get_window_extent(renderer)
        free = None
        for loc in LEGEND_LOCS:
            box = ax.legend(handles, labels, loc=loc, fontsize=size).get_window_extent(renderer)
            if holds(panel, box) and not covers(box, paths):
                free = loc
                break
        ax.get_legend().remove()
        if free:
            ax.legend(handles, labels, loc=free, fontsize=size)
            continue
        if spare:
            leg = spare[0].legend(handles, labels, loc="center", fontsize=size)
            if holds(spare[0].get_window_extent(renderer), leg.get_window_extent(renderer)):
                spare.pop(0)
                continue
            leg.remove()
        for ncol in range(min(3, len(handles)), 0, -1):  # as many columns (up to 3) as the width holds
            leg = fig.legend(handles, labels, loc="lower center", fontsize=size, ncol=ncol, bbox_to_anchor=(0.5, 0))
            if ncol == 1 or leg.get_window_extent(renderer).width <= fig.bbox.width:
                break
            leg.remove()
        below.append(leg)
    return below


def lay_out(fig, n_warnings=0):
    """tight_layout with room at the top for the title and n_warnings lines of warning, then the
    legends off the data (place_legends), and room under the figure for any put there; the panels
    then move, so the legends in them are placed again until none more goes under."""
    h = fig.get_figheight()
    top = 1 - (0.5 + 0.2 * n_warnings) / h if n_warnings else 1
    fig.tight_layout(rect=(0, 0, 1, top))
    below = []
    while True:
        new = place_legends(fig)
        if not new:
            return
        below += new
        heights = [leg.get_window_extent(fig.canvas.get_renderer()).height / fig.dpi for leg in below]
        under = sum(heights)
        fig.set_figheight(h + under)  # the panels keep their size; the legends go in the added strip
        for i, leg in enumerate(below):  # one above the other
            leg.set_bbox_to_anchor((0.5, sum(heights[i + 1:]) / (h + under)), transform=fig.transFigure)
        fig.tight_layout(rect=(0, under / (h + under), 1, 1 - (1 - top) * h / (h + under)))


def save(fig, prefix, n_warnings=0):
    """Writes PREFIX.png and PREFIX.svg (lay_out) and closes the figure."""
    import matplotlib.pyplot as plt
    lay_out(fig, n_warnings)
    for ext in ("png", "svg"):
        fig.savefig(f"{prefix}.{ext}", dpi=120)
    plt.close(fig)


def pyplot():
    try:
        import matplotlib
    except ImportError:  # the table is written by now; say what is missing, not a traceback
        raise InputError("matplotlib is not installed (Debian: python3-matplotlib; pip: matplotlib): "
                         "the table is written, the figures are not")
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # SVG text stays text: smaller, searchable
    import matplotlib.pyplot as plt
    return plt


def datasets_of(groups):
    return sorted({g.dataset for g in groups}, key=lambda d: order_key(d, "")[:2])


def model_text(runs):
    keys = [("n_layer", "L"), ("n_head", "H"), ("n_embd", "C")]
    return " ".join(f"{short}=" + "/".join(sorted({str(r.config.get(k, "?")) for r in runs}))
                    for k, short in keys)


def delta_curves(g, groups):
    """Per seed of g: its validation loss minus the RoPE group's mean, at the
    steps both have (RoPE's own seeds give its spread around 0)."""
    ref = reference_group(g, groups)
    if ref is None:
        return []
    steps, mean, _, _ = band([r.val_curve for r in ref.runs if r.val_curve])
    at = dict(zip(steps, mean))
    return [[(st, v - at[st]) for st, v in r.val_curve if st in at] for r in g.runs]


def paper_marks(ax, gs, runs, delta):
    """--paper: the paper's final validation loss of each group's (dataset, pos), or with delta
    its difference to the paper's RoPE, as a dashed line over the last tenth of the steps."""
    last = max((st for r in runs for st, _ in r.val_curve), default=0)
    for g in gs:
        v = paper_value(g, delta)
        if v is None or last <= 0 or (delta and g.pos == "rope"):
            continue
        ax.plot([0.9 * last, last], [v, v], "--", color=colour(g), lw=1.6,
                label=f"paper: {g.pos} {v:+.3f}" if delta else f"paper: {g.pos} {v:.3f}")


def plot_curves(groups, prefix, smooth_n, diffs, paper=False):
    """Panels (rows; a single dataset lays them out in a row): marker accuracy
    (when measured), the final one against the evaluation length (when measured
    at several), validation loss, its difference to RoPE (when there is
    RoPE and something to compare it with, and no accuracy panel), training
    loss. With accuracy (the synthetic task) every seed is its own thin line,
    since a seed that fails makes a mean that matches no run."""
    plt = pyplot()
    datasets = datasets_of(groups)
    has_acc = any(r.acc_curve for g in groups for r in g.runs)
    several = len({t for g in groups for r in g.runs for t in r.val_lens}) > 1
    rows = (["acc"] if has_acc else []) + (["acc_len"] if has_acc and several else []) + ["val"]
    compared = any(reference_group(g, groups) not in (None, g) for g in groups)
    if not has_acc and compared:
        rows.append("delta")
    rows.append("train")
    if compared:
        rows.append("interval")
    one = len(datasets) == 1
    # one dataset: its panels in a row, or in two rows when there are more than four
    nr, nc = ((1, len(rows)) if len(rows) <= 4 else (2, (len(rows) + 1) // 2)) if one else (len(rows), len(datasets))
    fig, axes = plt.subplots(nr, nc, squeeze=False, figsize=(4.8 * nc, 3.6 * nr + 0.6))
    for ax in axes.flat[len(rows):] if one else []:
        ax.axis("off")
    runs = [r for g in groups for r in g.runs]
    what = ("one thin line per seed" if has_acc else "mean line, band = min-max over seeds"
            if any(len(g.runs) > 1 for g in groups) else "one seed per scheme")
    title = f"GPT-2 {model_text(runs)}: {what}"
    if one:
        title = f"{datasets[0]}: {setting_text(runs)} | " + title
    fig.suptitle(title, fontsize=11, y=1 - 0.15 / fig.get_figheight(), va="top")
    n_warn = warn_figure(fig, diffs)
    for j, ds in enumerate(datasets):
        gs = [g for g in groups if g.dataset == ds]
        ds_runs = [r for g in gs for r in g.runs]
        seq = sorted({str(g.config.get("seq_len")) for g in gs})
        for i, row in enumerate(rows):
            ax = axes.flat[i] if one else axes[i][j]
            if row == "acc":
                for g in gs:  # the answer in the legend: how many seeds solved the task
                    done = [r for r in g.runs if r.acc_curve]
                    solved = sum(1 for r in done if r.acc_curve[-1][1] >= SOLVED)
                    draw(ax, g, [r.acc_curve for r in done], per_seed=True,
                         label=f"{g.label}: {solved}/{len(done)} seeds solved")
                ax.axhline(SOLVED, color="#444444", ls="--", lw=0.9, label=f"solved ({SOLVED:g})")
                ax.set_ylim(-0.03, 1.03)
                toks = sorted({str(t) for r in ds_runs for t in (r.config.get("accuracy_tokens") or [])})
                ax.set_ylabel("accuracy after the markers" + (f" ({', '.join(toks)})" if toks else ""))
            elif row == "acc_len":
                draw_by_length(ax, gs, "final accuracy after the markers", accuracy=True, legend=False)
                ax.axhline(SOLVED, color="#444444", ls="--", lw=0.9)
                ax.set_ylim(-0.03, 1.03)
            elif row == "val":
                for g in gs:
                    draw(ax, g, [r.val_curve for r in g.runs], per_seed=has_acc)
                if paper:
                    paper_marks(ax, gs, ds_runs, False)
                ax.set_ylabel(f"validation loss (T={'/'.join(seq)})")
            elif row == "delta":
                for g in gs:
                    draw(ax, g, delta_curves(g, groups))
                if paper:
                    paper_marks(ax, gs, ds_runs, True)
                ax.axhline(0, color="#444444", lw=0.8)
                # the scale of the trained part: step 0 compares two initialisations, and its
                # difference, often larger, would flatten the rest; it is marked at the edge
                zoom(ax, keep=0.0, after_first=True)
                mark_outside(ax)
                ax.set_ylabel("validation loss minus RoPE's mean")
            elif row == "interval":
                draw_intervals(ax, gs, groups, diffs)
            else:
                for g in gs:
                    draw(ax, g, [list(zip([st for st, _, _ in r.train],
                                          smooth([l for _, l, _ in r.train], smooth_n)))
                                 for r in g.runs], per_seed=has_acc)
                    for r in g.runs:  # mark where a cut run stops
                        if r.is_cut() and r.train:
                            ax.axvline(r.train[-1][0], color=colour(g), ls=":", lw=0.8)
                zoom(ax)
                ax.set_ylabel("training loss" + (f" (moving avg {smooth_n} steps)" if smooth_n > 1 else ""))
            if row not in ("interval", "acc_len"):
                ax.set_xlabel("step")
            finish_axes(ax)
            if i == 0 and not one:
                ax.set_title(f"{ds}\n{setting_text(ds_runs)}", fontsize=10)
    save(fig, prefix, n_warn)


# The verdict panel's x axis spans at least +-this much loss, centred on 0: a difference of a few
# ten-thousandths on an axis fitted to it would look as large as one of a tenth.
MIN_DIFF_HALF_SPAN = 0.02


def seed_differences(g, ref):
    """Each seed's final validation loss minus RoPE's: that seed's when both ran it (paired),
    else RoPE's mean."""
    a = {r.seed: r.final_val() for r in g.runs if r.final_val() is not None}
    b = {r.seed: r.final_val() for r in ref.runs if r.final_val() is not None}
    if not a or not b:
        return []
    if set(a) == set(b):
        return [a[s] - b[s] for s in a]
    mb = sum(b.values()) / len(b)
    return [v - mb for v in a.values()]


def draw_intervals(ax, gs, groups, diffs):
    """Each scheme's final validation loss minus RoPE's, one line of the panel per scheme: the
    mean and its 95 % interval over seeds (diff_interval) with one label saying what it says, and
    each seed's difference as a small dot under it. The axis is symmetric about 0, at least
    +-MIN_DIFF_HALF_SPAN wide, and holds every point."""
    names, xs = [], [0.0]
    for g in gs:
        ref = reference_group(g, groups)
        if ref in (None, g):
            continue
        m, lo, hi, how = diff_interval(g, ref)
        if m is None:
            continue
        y = len(names)
        ax.errorbar([m], [y], xerr=None if lo is None else [[m - lo], [hi - m]], fmt="o", ms=5,
                    capsize=4, color=colour(g))
        seeds = seed_differences(g, ref)
        if len(seeds) > 1:
            ax.plot(seeds, [y + 0.18] * len(seeds), "o", ms=3, mfc="none", color=colour(g), alpha=0.8)
        why = not_comparable(g, ref, diffs)
        says = f"not comparable: {why}" if why else verdict(lo, hi)
        text = f"{m:+.4f}: {says}" if lo is None else f"{m:+.4f} [{lo:+.4f}, {hi:+.4f}]: {says} ({how})"
        ax.annotate(text, (0.02, y), xycoords=("axes fraction", "data"), xytext=(0, 8), textcoords="offset points",
                    fontsize=7.5, color=colour(g))
        names.append(g.label)
        xs += [m] + seeds + ([] if lo is None else [lo, hi])
    ax.axvline(0, color="#444444", lw=0.8)
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names)
    ax.set_ylim(len(names) - 0.4, -0.6)  # the first scheme on top, as in the legends
    half = max(MIN_DIFF_HALF_SPAN, 1.1 * max(abs(x) for x in xs))
    ax.set_xlim(-half, half)
    ax.set_xlabel("final validation loss minus RoPE's: mean, 95 % interval\n"
                  "over seeds (Student's t); dots: each seed")


def draw_by_length(ax, gs, what, accuracy=False, legend=True):
    """Each group's final validation loss (or marker accuracy) against the evaluation length: the
    mean over seeds and its 95 % interval (Student's t; none, and said so, for one seed), each
    scheme a little to the side so that the bars at one length do not overlap; hollow points where
    untrained(); dotted: the training length. The y label is `what` and the number of seeds; without
    legend (a panel beside others of the same colours, too full for one) the title tells the hollow."""
    seeds = set()
    for k, g in enumerate(gs):
        shift = 2 ** (0.04 * (k - (len(gs) - 1) / 2))
        at = {}
        for r in g.runs:
            for t, v in r.final_by_len(accuracy).items():
                at.setdefault(t, []).append(v)
        if not at:  # a length a run never evaluated is not applicable
            continue
        lens = sorted(at)
        stats = [mean_interval(at[t]) for t in lens]
        halves = [0 if lo is None else m - lo for m, lo, _, _ in stats]
        seeds |= {len(v) for v in at.values()}
        hollow = [untrained(g, t) for t in lens]
        ax.errorbar([t * shift for t in lens], [m for m, *_ in stats], yerr=halves if any(halves) else None,
                    ls=g.style, marker=g.marker, ms=4, capsize=3, color=colour(g),
                    label=g.label + (": hollow, untrained table rows" if any(hollow) else "") if legend else None)
        if any(hollow) and not legend:
            ax.set_title(f"colours as beside; hollow: {g.label}'s untrained table rows", fontsize=9)
        for t, (m, *_), h in zip(lens, stats, hollow):
            if h:
                ax.plot([t * shift], [m], g.marker, ms=4, color=colour(g), mfc="white", zorder=3)
        if g.config.get("seq_len"):
            ax.axvline(g.config["seq_len"], color="#999999", ls=":", lw=0.8)
    ax.set_xscale("log", base=2)
    ticks = sorted({t for g in gs for r in g.runs for t in r.val_lens})
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlabel("evaluation length (tokens); dotted = training length")
    n = "/".join(str(x) for x in sorted(seeds))
    ax.set_ylabel(what + ("\n(1 seed: no interval)" if n == "1" else f"\n(mean, 95 % interval over {n} seeds)"))


EXTRAPOLATION_HEAD = "## Validation loss by evaluation length, as a multiple of the training length\n\n"
EXTRAPOLATION_NOTE = (
    "Each cell: the mean over seeds of each run's last validation loss at that length and its 95 % interval "
    "(Student's t; none for one seed); n: the seeds. A scaling after the scheme (\"rope, ntk\") is the same "
    "trained runs evaluated under it (build/train --eval_only) unless its runs were trained with it. "
    "†: learned positions past the training length read rows no training step reached. The differences to "
    "RoPE, paired by seed, are in PREFIX.md's \"Difference to RoPE by evaluation length\"; the figure: "
    "PREFIX_lengths.png.\n")


def same_by_construction(groups):
    """The extrapolation table's note on its ntk and dynamic rows where both were evaluated with
    rope_scaling_factor 0: identical by construction (MODEL.md, RoPE scaling)."""
    factor0 = {g.config.get("rope_scaling") for g in groups if not g.config.get("rope_scaling_factor")}
    if not {"ntk", "dynamic"} <= factor0:
        return ""
    return ("The ntk and dynamic rows without a factor are identical by construction: with rope_scaling_factor 0, "
            "ntk's s is max(1, L / L_train) for each evaluation length L, which is what dynamic's always is "
            "(MODEL.md, RoPE scaling); they differ only with a factor set.\n")


# The lengths figure's y axis spans at least this much loss: the differences between lengths
# are often a few thousandths, which a span fitted to them would draw as large.
MIN_LOSS_SPAN = 0.1


def plot_lengths(groups, prefix, diffs):
    """Final validation loss against the evaluation length (draw_by_length), one panel per dataset."""
    plt = pyplot()
    datasets = datasets_of(groups)
    fig, axes = plt.subplots(1, len(datasets), squeeze=False,
                             figsize=(4.8 * len(datasets), 4.2))
    n_warn = warn_figure(fig, diffs)
    for j, ds in enumerate(datasets):
        ax = axes[0][j]
        gs = [g for g in groups if g.dataset == ds]
        draw_by_length(ax, gs, "validation loss")
        ax.set_title(f"{ds}: final val loss vs eval length\n{setting_text([r for g in gs for r in g.runs])}",
                     fontsize=10)
        lo, hi = ax.get_ylim()
        if hi - lo < MIN_LOSS_SPAN:
            mid = (lo + hi) / 2
            ax.set_ylim(mid - MIN_LOSS_SPAN / 2, mid + MIN_LOSS_SPAN / 2)
            ax.set_ylabel(ax.get_ylabel() + f" (axis widened to span {MIN_LOSS_SPAN:g})")
        finish_axes(ax)
    save(fig, prefix, n_warn)


# ---------------------------------------------------------------- main


def save_logs(runs, folder):
    """A small gzipped copy of each run's log in folder, NAME.jsonl.gz (NAME: the run
    folder's name), holding what the table and figures read: the config and val records
    whole, train records as step, loss (6 decimals), tokens/s (whole) and FLOP/s (4 digits).
    compare_runs.py reads them back."""
    os.makedirs(folder, exist_ok=True)
    written = []
    for r in runs:
        name = os.path.basename(os.path.normpath(r.dir))
        for ext in (".gz", ".jsonl", ".txt"):
            name = name[: -len(ext)] if name.endswith(ext) else name
        lines = []
        for rec in r.records:
            if rec.get("type") == "train":
                loss, tps, flops = rec.get("loss"), rec.get("tokens_per_s"), rec.get("flops_per_s")
                rec = {"type": "train", "step": rec.get("step"),   # drawn, never tabled: 6 digits do
                       "loss": round(loss, 6) if isinstance(loss, float) else loss,
                       "tokens_per_s": round(tps) if isinstance(tps, float) else tps}
                if isinstance(flops, float):
                    rec["flops_per_s"] = float(f"{flops:.4g}")
            lines.append(json.dumps(rec, separators=(",", ":")) + "\n")
        path = os.path.join(folder, name + ".jsonl.gz")
        with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as g:
            g.write("".join(lines).encode("utf-8"))  # mtime 0: the same runs give the same bytes
        written.append(path)
    return written


def paper_note(runs):
    """What the paper columns are, and whether these runs were trained at the paper's setting."""
    text = ("Paper: the final validation losses of the CRoPE paper (arXiv 2601.02728, Table 1) at "
            "its setting, GPT-2 L=4 H=4 C=128, B=16, T=1024, 10,000 steps; learned positions' "
            "figures are not quoted here.")
    with open(os.path.join(ROOT, "configs", "paper.json"), encoding="utf-8") as f:
        paper = json.load(f)
    off = [f"{k} {'/'.join(sorted({str(r.config.get(k, '?')) for r in runs}))}"
           for k in PAPER_SETTING_KEYS if any(r.config.get(k) != paper[k] for r in runs)]
    if off:
        return text + (" **These runs are not at that setting** (" + ", ".join(off) +
                       "): compare the differences to RoPE, not the losses.\n")
    return text + " These runs are at that setting.\n"


def planned_config(path, sets):
    """The config a new run would get from the config file at path and the command line's
    KEY=VALUE pairs (values as the trainer reads them: JSON numbers, lists as 1,2,3, else text).
    Only the keys named: the trainer's defaults for the others are its own."""
    plan = read_config_json(path)
    if plan is None:
        raise InputError(f"{path}: no such config file")
    for kv in sets:
        key, eq, text = kv.partition("=")
        if not eq or not key:
            raise InputError(f"--set wants KEY=VALUE, got {kv!r}")
        try:
            value = [json.loads(x) for x in text.split(",")] if "," in text else json.loads(text)
        except (ValueError, RecursionError):
            value = text
        plan[key.replace("-", "_")] = value
    return plan


def plan_differences(run, plan):
    """'steps 3, planned 300; ...': where the run's config (config.json with its resumes'
    changes) differs from the plan (NOT_CHANGED_KEYS and device, which says where a run goes,
    not what it computes, aside)."""
    now = run.current
    def same(a, b):  # a list of one, as the command line gives it, is that value
        return a == b or (isinstance(a, list) and a == [b]) or (isinstance(b, list) and [a] == b)
    return "; ".join(f"{k} {json.dumps(now.get(k))}, planned {json.dumps(v)}" for k, v in sorted(plan.items())
                     if k not in NOT_CHANGED_KEYS | {"device"} and not same(now.get(k), v))


def status(paths, plan=None):
    for p in paths:
        try:
            r = Run(p)
        except InputError:
            print(f"missing {p}")
            continue
        differs = plan_differences(r, plan) if plan is not None else ""
        if differs:
            print(f"differs {p}: {differs}")
        elif r.is_cut() or r.steps is None:
            print(f"partial {r.steps_done()}/{r.steps} {p}")
        else:
            print(f"complete {p}")


def main(argv):
    ap = argparse.ArgumentParser(
        description="Compare build/train runs: Figure-4-style loss curves and a "
                    "Markdown table (see the module docstring).")
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR")
    ap.add_argument("--out", default="compare", metavar="PREFIX",
                    help="output prefix: PREFIX.png/.svg/.md (default: compare)")
    ap.add_argument("--smooth", type=int, default=None, metavar="N",
                    help="moving average of the training loss over N steps (1: none; "
                         "default: 1/40 of the longest run)")
    ap.add_argument("--eval-lengths", action="store_true",
                    help="always write PREFIX_lengths.png/.svg and the length table "
                         "(default: only when val records have several seq_len values)")
    ap.add_argument("--save-logs", metavar="DIR",
                    help="also write a small gzipped copy of each log to DIR/NAME.jsonl.gz, "
                         "enough to redraw the table and figures without the runs")
    ap.add_argument("--paper", action="store_true",
                    help="beside the runs' numbers, the CRoPE paper's final validation losses "
                         "(Table 1; RoPE and CRoPE) in the table and as dashed lines in the figure")
    ap.add_argument("--extrapolation", action="store_true",
                    help="also write PREFIX_extrapolation.md: per dataset, the final validation loss of each "
                         "scheme and scaling at each multiple of the training length, mean [95 %% interval] "
                         "over seeds (and the lengths figure)")
    ap.add_argument("--summary", action="store_true",
                    help="print a short summary (scheme, seeds solved, difference to RoPE with its "
                         "interval, verdict) instead of the tables; they are in PREFIX.md")
    ap.add_argument("--status", action="store_true",
                    help="only print complete / partial DONE/STEPS / missing per RUN_DIR")
    ap.add_argument("--plan", metavar="CONFIG.json",
                    help="with --status: a run whose config.json differs from this config file and the "
                         "--set values prints 'differs RUN_DIR: KEY VALUE, planned VALUE; ...'")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="with --plan: a value the command line sets (repeatable)")
    a = ap.parse_args(argv)
    if a.status:
        status(a.runs, planned_config(a.plan, a.set) if a.plan else None)
        return 0
    if a.smooth is not None and a.smooth < 1:
        raise InputError("--smooth must be >= 1")
    runs = [v for p in a.runs for r in [Run(p)] for v in [r] + r.eval_variants()]
    smooth_n = a.smooth or max(1, round(max(r.steps_done() for r in runs) / 40))
    groups = make_groups(runs)
    stats = {id(g): summarise(g) for g in groups}
    diffs = config_differences(runs)
    warnings = warning_lines(diffs) + problem_lines(runs)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    # the training summary (the table, the console's summary, the curves) is of trained groups; the
    # evaluation-only ones join the tables and figure by length
    trained = [g for g in groups if not g.eval_only]
    table = build_table(trained, stats, diffs, a.paper)
    md = "## Final losses\n\n"
    if warnings:
        md += ("**WARNING: these runs differ in more than the position scheme and the seed, or did not "
               "run their config to the end**, so their differences are not the effect of the scheme "
               "alone:\n\n" + "".join(f"- {w}\n" for w in warnings) + "\n")
    md += "Setting: " + "; ".join(f"{ds}: {setting_text([r for r in runs if r.dataset == ds])}"
                                  for ds in datasets_of(groups)) + ".\n\n"
    md += table + "\n\n" + \
        "Final/best: validation loss at the training seq_len, mean ± sample std over seeds; " \
        "val ppl = exp(mean final); tokens/s (and GFLOP/s, where logged) = median over train records; " \
        "Δ = mean final minus the RoPE group of the same dataset (of a fine-tuned row: RoPE " \
        "fine-tuned alike; of RoPE fine-tuned: RoPE as first trained, by length); its 95 % interval from Student's t " \
        "over seeds, paired by seed when both groups ran the same seeds, else Welch's; " + VERDICT_RULE + ".\n"
    if len(trained) < len(groups):
        md += ("Evaluation-only rows (build/train --eval_only: the same trained runs under a scaling, \"rope, "
               "ntk\") have no training of their own: not in this table, they are in those per evaluation length below.\n")
    accuracy = any(r.acc_curve for r in runs)
    if accuracy:
        md += (f"Solved: final marker accuracy (at the training seq_len) ≥ {SOLVED:g}; first solved: the "
               "step of the first evaluation at or above it, the median over all seeds (a seed that ends "
               "unsolved counts as never).\n")
    for scheme, ref, width in sorted({(g.pos, g.config["match_params"], g.config.get("mlp_hidden"))
                                      for g in groups if g.config.get("match_params")}):
        md += f"{scheme}={ref}: {scheme} at {ref}'s parameter count (match_params {ref}: its MLP {width} wide).\n"
    if a.paper:
        md += "\n" + paper_note(runs)
    all_lens = sorted({t for r in runs for t in r.val_lens})
    lengths = a.eval_lengths or a.extrapolation or len(all_lens) > 1 or len(trained) < len(groups)
    if lengths:
        md += (f"\n## Final validation loss{' and marker accuracy' if accuracy else ''} by evaluation length\n\n"
               + build_length_table(groups, accuracy) + "\n\nMean ± sample std over seeds of each run's "
               "last evaluation at that length.\n")
        diff_table = build_length_diff_table(groups, accuracy, diffs)
        if diff_table:
            md += ("\n## Difference to RoPE by evaluation length\n\n" + diff_table + "\n\nEach scheme's "
                   "final value minus RoPE's at that length: the mean over seeds and its 95 % interval "
                   "(Student's t, paired by seed when both ran the same seeds, else Welch's); **bold**: "
                   "\"higher\" or \"lower\" by the verdicts' rule above, a difference these seeds resolve; the "
                   "others they do not.\n")
            if "not paired" in diff_table:
                md += ("not paired: an evaluation-only row is compared with RoPE only by seed, where every "
                       "seed of RoPE was evaluated under it.\n")
        if any(untrained(g, t) for g in groups for r in g.runs for t in r.val_lens):
            md += ("†: learned positions past the training seq_len read rows of their table that no "
                   "training step reached (their initial random values, weight decay aside).\n")
        if "| n/a |" in md.split("by evaluation length")[-1]:
            md += "n/a: not evaluated at that length (learned positions stop at max_seq_len).\n"
    out_dir = os.path.dirname(a.out)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    with open(a.out + ".md", "w", encoding="utf-8") as f:
        f.write(md)
    print(summary_text(trained, a.out + ".md", diffs) if a.summary else md, end="")
    plot_curves(trained, a.out, smooth_n, diffs, a.paper)
    written = [a.out + ".png", a.out + ".svg", a.out + ".md"]
    if lengths:
        plot_lengths(groups, a.out + "_lengths", diffs)
        written += [a.out + "_lengths.png", a.out + "_lengths.svg"]
    if a.extrapolation:
        with open(a.out + "_extrapolation.md", "w", encoding="utf-8") as f:
            f.write(EXTRAPOLATION_HEAD + build_extrapolation_tables(groups) + "\n\n" +
                    EXTRAPOLATION_NOTE.replace("PREFIX", os.path.basename(a.out)) + same_by_construction(groups))
        written.append(a.out + "_extrapolation.md")
    if a.save_logs:
        written += save_logs([r for r in runs if not r.eval_only], a.save_logs)
    if a.summary:  # the summary named the tables; the figures, one line
        print("figures: " + ", ".join(w for w in written if w.endswith(".png")) + " (and .svg)")
    else:
        print("\nwrote " + ", ".join(written), file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
