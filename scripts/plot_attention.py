#!/usr/bin/env python3
"""Attention maps of trained runs on the synthetic task (data/make_synthetic.py), side by side:
one panel per run, on the same validation window, beside the task's ideal pattern.

usage: plot_attention.py RUN_DIR... [--out attention.png] [--window N] [--layer L --head H]
                         [--data data/synthetic] [--sample build_cpu/sample]

Each run's latest checkpoint reads window N of the task's validation shard (the tokens
[N T, N T + T), T the first run's seq_len; default N: the first window holding every marker)
through `build/sample --attention` (MODEL.md, "Attention maps"). A run's panel shows one
head's probabilities (row: the query's position, column: the key's): --layer and --head, or by
default the head of any layer that matches the task best, the one whose marker rows put the
most probability on the answer's position; its title names it with that mean probability
("match"). The ideal panel: after a marker with offset d, all attention on the token d back;
the other rows (content tokens, noise with nothing to look at) are empty. Marker rows are
labelled in red and the ideal cells outlined in red in every panel.
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "data"))
from fetch import ArgParser, DataError, require  # noqa: E402  (errors are one line)
from shards import read_shard  # noqa: E402  (the shard reader of every tool)

np = require("numpy")


def read_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise DataError(f"cannot read {what} {path}: {e}")


def read_task(data_dir):
    """The markers {id: offset} and the validation tokens of the task in data_dir."""
    meta = read_json(os.path.join(data_dir, "meta.json"), "the synthetic task's")
    markers = {m["id"]: m["offset"] for m in meta["markers"]}
    return markers, read_shard(os.path.join(data_dir, meta["splits"]["val"]["file"]))


def pick_window(tokens, T, markers, index):
    """(index, the window's T input tokens); index None: the first window with every marker."""
    n = (len(tokens) - 1) // T  # the trainer's windows of T + 1 tokens
    if index is None:
        index = next((w for w in range(n) if set(markers) <= set(tokens[w * T:(w + 1) * T].tolist())), 0)
    if not 0 <= index < n:
        raise DataError(f"--window {index}: the validation shard holds windows 0..{n - 1} of {T} tokens")
    return index, [int(t) for t in tokens[index * T:(index + 1) * T]]


def ideal_pattern(ids, markers):
    """(T, T): after a marker with offset d, one on the token d back; other rows zero."""
    T = len(ids)
    m = np.zeros((T, T))
    for t, x in enumerate(ids):
        if x in markers and t >= markers[x]:
            m[t, t - markers[x]] = 1.0
    return m


def attention(run, ids, sample, tmp):
    """(scheme, probabilities (L, H, T, T)) of run's latest checkpoint over ids."""
    path = os.path.join(tmp, f"{len(os.listdir(tmp))}.json")
    cmd = [sample, "--checkpoint", run, "--prompt_ids", " ".join(map(str, ids)), "--attention", path]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise DataError(f"cannot run {sample}: {e}")
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["failed"])[-1]
        raise DataError(f"{sample} on {run}: {last.removeprefix('error: ')}")
    d = read_json(path, "the attention maps")
    return d["pos"], np.array(d["attention"])


def match(att, ideal):
    """(L, H): the mean probability each head's marker rows put on the answer's position."""
    rows = ideal.any(axis=1)
    if not rows.any():
        return np.zeros(att.shape[:2])
    return (att[:, :, rows, :] * ideal[rows]).sum(-1).mean(-1)


def choose_head(att, ideal, layer, head):
    """(layer, head, its match): the one asked for, or the best match."""
    L, H = att.shape[:2]
    score = match(att, ideal)
    if layer is None:
        layer, head = (int(i) for i in np.unravel_index(np.argmax(score), score.shape))
    if not (0 <= layer < L and 0 <= head < H):
        raise DataError(f"--layer {layer} --head {head}: the model has layers 0..{L - 1} and heads 0..{H - 1}")
    return layer, head, float(score[layer, head])


def plot(panels, ids, ideal, markers, title, out):
    """panels: [(title, (T, T) map)], the ideal one first, four to a row; writes out."""
    try:
        import matplotlib
    except ImportError:
        raise DataError("matplotlib is not installed (Debian: python3-matplotlib; pip: matplotlib)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    T = len(ids)
    nc = min(4, len(panels))
    nr = -(-len(panels) // nc)
    fig, axes = plt.subplots(nr, nc, figsize=(2.9 * nc + 0.8, 3.3 * nr + 0.3), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (name, m) in zip(axes.flat, panels):
        im = ax.imshow(m, cmap="Blues", vmin=0, vmax=1)
        ax.set_title(name, fontsize=8)
        for t, s in zip(*np.nonzero(ideal)):
            ax.add_patch(Rectangle((s - 0.5, t - 0.5), 1, 1, fill=False, edgecolor="#cc0000", lw=1.2))
        ax.set_xticks(range(T))
        ax.set_yticks(range(T))
        ax.set_xticklabels(ids, fontsize=5, rotation=90)
        ax.set_yticklabels(ids, fontsize=5)
        for labels in (ax.get_xticklabels(), ax.get_yticklabels()):
            for t, lab in enumerate(labels):
                if ids[t] in markers:
                    lab.set_color("#cc0000")
                    lab.set_fontweight("bold")
        ax.set_xlabel("key (token id)", fontsize=7)
        ax.set_ylabel("query (token id)", fontsize=7)
    fig.colorbar(im, ax=list(axes.flat), fraction=0.015, pad=0.01)
    fig.suptitle(title, fontsize=9)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)


def main(argv):
    ap = ArgParser(description="Attention maps of synthetic-task runs side by side (see the module docstring).")
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR")
    ap.add_argument("--out", default="attention.png", help="the figure (default attention.png)")
    ap.add_argument("--window", type=int, help="validation window (default: the first with every marker)")
    ap.add_argument("--layer", type=int, help="with --head: this head in every panel (default: the best match)")
    ap.add_argument("--head", type=int)
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "synthetic"), help="the task's folder")
    built = [b for b in ("build", "build_cpu") if os.access(os.path.join(ROOT, b, "sample"), os.X_OK)]
    ap.add_argument("--sample", default=os.path.join(ROOT, (built or ["build"])[0], "sample"),
                    help="the sample binary (default: make's build/, else make run's build_cpu/)")
    a = ap.parse_args(argv)
    if (a.layer is None) != (a.head is None):
        ap.error("--layer and --head go together")
    markers, tokens = read_task(a.data)
    T = read_json(os.path.join(a.runs[0], "config.json"), "the run's config")["seq_len"]
    w, ids = pick_window(tokens, T, markers, a.window)
    ideal = ideal_pattern(ids, markers)
    panels = [("ideal\n" + ", ".join(f"marker {k}: {d} back" for k, d in sorted(markers.items())), ideal)]
    with tempfile.TemporaryDirectory() as tmp:
        for run in a.runs:
            pos, att = attention(run, ids, a.sample, tmp)
            layer, head, score = choose_head(att, ideal, a.layer, a.head)
            how = "match" if a.layer is not None else "the best match"
            panels.append((f"{pos} ({os.path.basename(os.path.normpath(run))})\n"
                           f"layer {layer} head {head}: {how}, {score:.2f}", att[layer, head]))
    plot(panels, ids, ideal, markers,
         f"Attention on validation window {w} of {os.path.relpath(a.data, ROOT)}: row = query, column = key; "
         "red: the markers and the answer's position", a.out)
    print(f"attention figure: {a.out} (window {w}: {' '.join(map(str, ids))})")


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
