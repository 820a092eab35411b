#!/usr/bin/env python3
"""Long-term decay: RoFormer's bound for RoPE's frequencies beside the attention trained models
give each query-key distance.

usage: plot_decay.py INPUT... [--out decay.png] [--windows 8] [--length T] [--val SHARD]
                     [--sample build_cpu/sample] [--maps_dir DIR] [--head_dim 32] [--rope_base 10000]
                     [--max_distance 1024]

Panel (a): RoFormer's relative upper bound (Su et al. 2021, section 3.4.3) against the relative
distance r = m - n, for a head of --head_dim channels turning at θ_k = rope_base^(-2k/D):
(2/D) Σ_{j=1}^{D/2} |S_j| with S_j = Σ_{k<j} e^{i r θ_k}; at r = 0 it is (D/2 + 1) / 2.

Panel (b): each scheme's attention at distance d = query - key relative to uniform causal
attention: the mean of (i + 1) p(i, i - d) over every layer, head and query i that can see
distance d (i = d … T-1), pooled over all its inputs. Query i spread evenly over its i + 1 keys
gives 1 at every distance (the dashed line); above 1, the distance gets more than its share.
An INPUT is a run folder, whose latest checkpoint reads --windows validation windows of --length
tokens (evenly spaced over the shard) through `build/sample --attention`, or an attention-map
JSON file that command wrote (MODEL.md, "Attention maps"). Inputs of the same scheme (seeds,
windows) are averaged together; all must have the same length T. Prints a markdown table of
the means at a few distances.
"""
import glob
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "data"))
from fetch import ArgParser, DataError, require  # noqa: E402  (errors are one line)
from shards import read_shard  # noqa: E402  (the shard reader of every tool)
from plot_attention import attention, read_json  # noqa: E402  (sample's maps of a run)

np = require("numpy")


def rope_bound(D, base, distances):
    """RoFormer's relative upper bound (1/(D/2)) Σ_j |S_j| at each distance: (len(distances),)."""
    theta = base ** (-2.0 * np.arange(D // 2) / D)  # (D/2,)
    S = np.cumsum(np.exp(1j * np.outer(distances, theta)), axis=1)  # (N, D/2): S_1 … S_{D/2}
    return np.abs(S).mean(axis=1)


def check_maps(att, name):
    """att (L, H, T, T) must hold causal probability rows."""
    if att.ndim != 4 or att.shape[2] != att.shape[3] or att.shape[2] == 0:
        raise DataError(f"{name}: attention has shape {list(att.shape)}, expected (L, H, T, T)")
    if not np.isfinite(att).all() or (att < 0).any() or np.triu(att, 1).any() \
            or np.abs(att.sum(-1) - 1).max() > 1e-4:
        raise DataError(f"{name}: attention rows are not causal probabilities (non-negative, "
                        "zero above the diagonal, summing to 1)")


def read_maps(path):
    """(scheme, probabilities (L, H, T, T)) of a JSON file that sample --attention wrote."""
    d = read_json(path, "the attention maps")
    if not isinstance(d, dict) or "pos" not in d or "attention" not in d:
        raise DataError(f"{path}: not an attention-map file (no 'pos' or 'attention')")
    try:
        att = np.array(d["attention"], dtype=np.float64)
    except (ValueError, TypeError):
        raise DataError(f"{path}: attention is not a rectangular array of numbers")
    if list(att.shape) != d.get("shape"):
        raise DataError(f"{path}: attention has shape {list(att.shape)}, the file says {d.get('shape')}")
    check_maps(att, path)
    return d["pos"], att


def by_distance(att):
    """(sum over layers, heads and queries of (i + 1) p(i, i - d), number of terms): (T,) each."""
    L, H, T, _ = att.shape
    per_query = att.reshape(L * H, T, T) * np.arange(1, T + 1)[:, None]  # relative to uniform
    total = np.array([np.trace(per_query, offset=-d, axis1=1, axis2=2).sum() for d in range(T)])
    return total, L * H * (T - np.arange(T))


def val_windows(shard, T, n):
    """n windows of T tokens evenly spaced over the shard (the trainer's windows of T + 1)."""
    tokens = read_shard(shard)
    count = (len(tokens) - 1) // T
    if count < 1:
        raise DataError(f"{shard}: {len(tokens)} tokens hold no window of {T} tokens")
    starts = np.unique(np.linspace(0, count - 1, min(n, count)).astype(int))
    return [[int(t) for t in tokens[w * T:(w + 1) * T]] for w in starts]


def gather(inputs, a):
    """{scheme: [sum (T,), count (T,), inputs]} pooled over the inputs."""
    groups = {}
    T = None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if a.maps_dir:
                os.makedirs(a.maps_dir, exist_ok=True)
        except OSError as e:
            raise DataError(f"cannot make --maps_dir {a.maps_dir}: {e}")
        for path in inputs:
            if os.path.isdir(path):
                cfg = read_json(os.path.join(path, "config.json"), "the run's config")
                if not isinstance(cfg, dict) or "seq_len" not in cfg or "val_data" not in cfg:
                    raise DataError(f"{path}/config.json: not a run's config (no seq_len or val_data)")
                T = T or a.length or cfg["seq_len"]
                shard = a.val or next(iter(sorted(glob.glob(cfg["val_data"]))), None)
                if shard is None:
                    raise DataError(f"no validation shard matches {cfg['val_data']!r} of {path} (give --val)")
                maps = [attention(path, ids, a.sample, a.maps_dir or tmp) for ids in val_windows(shard, T, a.windows)]
                for _, att in maps:
                    check_maps(att, path)
            elif os.path.exists(path):
                maps = [read_maps(path)]
            else:
                raise DataError(f"{path}: no such file or folder")
            for pos, att in maps:
                T = T or att.shape[2]
                if att.shape[2] != T:
                    raise DataError(f"{path}: maps of {att.shape[2]} tokens beside others of {T}")
                total, count = by_distance(att)
                g = groups.setdefault(pos, [0.0, 0, 0])
                g[0], g[1], g[2] = g[0] + total, g[1] + count, g[2] + 1
    return groups, T


ORDER = ["learned", "sinusoidal", "rope", "crope", "nope", "alibi", "xpos"]
COLORS = {"learned": "#1f77b4", "sinusoidal": "#ff7f0e", "rope": "#2ca02c", "crope": "#d62728",
          "nope": "#9467bd", "alibi": "#8c564b", "xpos": "#e377c2"}


def table(curves, T):
    """Markdown: attention relative to uniform at a few distances, and near over far (d 1–4 / d ≥ T/2)."""
    ds = sorted({d for d in (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if d < T} | {T - 1})
    lines = ["| scheme | maps | " + " | ".join(f"d={d}" for d in ds) + f" | d 1–4 / d {T // 2}–{T - 1} |",
             "|---|---|" + "---|" * (len(ds) + 1)]
    for name, (p, n) in curves.items():
        ratio = p[1:5].mean() / p[T // 2:].mean() if T > 5 else float("nan")
        lines.append(f"| {name} | {n} | " + " | ".join(f"{p[d]:.4f}" for d in ds) + f" | {ratio:.2f} |")
    return "\n".join(lines)


def plot(bound_d, bound, curves, T, D, base, out):
    try:
        import matplotlib
    except ImportError:
        raise DataError("matplotlib is not installed (Debian: python3-matplotlib; pip: matplotlib)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.plot(bound_d[1:], bound[1:], color=COLORS["rope"])
    ax1.axvline(T, color="grey", ls=":", lw=1)
    ax1.set_xscale("log")
    ax1.set_xlabel("relative distance m - n")
    ax1.set_ylabel("relative upper bound  (2/D) Σ_j |S_j|")
    ax1.set_title(f"(a) RoFormer's bound, D = {D}, base {base:g} (value {bound[0]:g} at 0; "
                  f"dotted: T = {T})", fontsize=9)
    d = np.arange(1, T)
    for name, (p, n) in curves.items():
        ax2.plot(d, p[1:], label=f"{name} ({n} maps)", color=COLORS.get(name))
    ax2.axhline(1.0, color="black", ls="--", lw=1, label="uniform causal")
    ax2.set_xscale("log")
    ax2.set_xlabel("query - key distance d")
    ax2.set_ylabel("attention relative to uniform, mean (i+1) p(i, i-d)")
    ax2.set_title("(b) trained models: mean over layers, heads, queries i ≥ d, windows", fontsize=9)
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main(argv):
    ap = ArgParser(description="Long-term decay: RoFormer's bound and trained models' attention "
                   "by distance (see the module docstring).")
    ap.add_argument("inputs", nargs="+", metavar="INPUT", help="run folder or attention-map JSON file")
    ap.add_argument("--out", default="decay.png", help="the figure (default decay.png)")
    ap.add_argument("--windows", type=int, default=8, help="validation windows per run folder (default 8)")
    ap.add_argument("--length", type=int, help="window length (default: the first run's seq_len)")
    ap.add_argument("--val", help="validation shard (default: the first match of the run's val_data)")
    built = [b for b in ("build", "build_cpu") if os.access(os.path.join(ROOT, b, "sample"), os.X_OK)]
    ap.add_argument("--sample", default=os.path.join(ROOT, (built or ["build"])[0], "sample"),
                    help="the sample binary (default: make's build/, else make run's build_cpu/)")
    ap.add_argument("--maps_dir", help="keep the maps sample writes in this folder, to be read again as inputs "
                    "(default: a temporary folder)")
    ap.add_argument("--head_dim", type=int, default=32, help="D of the bound (default 32)")
    ap.add_argument("--rope_base", type=float, default=10000.0, help="base of the bound (default 10000)")
    ap.add_argument("--max_distance", type=int, default=1024, help="the bound's last distance (default 1024)")
    a = ap.parse_args(argv)
    if a.head_dim < 2 or a.head_dim % 2:
        ap.error(f"--head_dim {a.head_dim}: must be even and at least 2")
    for name in ("windows", "length", "max_distance"):
        v = getattr(a, name)
        if v is not None and v < 1:
            ap.error(f"--{name} {v}: must be at least 1")
    if a.rope_base <= 0:
        ap.error(f"--rope_base {a.rope_base:g}: must be positive")
    groups, T = gather(a.inputs, a)
    order = sorted(groups, key=lambda s: (ORDER.index(s) if s in ORDER else len(ORDER), s))
    curves = {s: (groups[s][0] / groups[s][1], groups[s][2]) for s in order}
    bound_d = np.arange(a.max_distance + 1)
    plot(bound_d, rope_bound(a.head_dim, a.rope_base, bound_d), curves, T, a.head_dim, a.rope_base, a.out)
    print(f"decay figure: {a.out} (T {T}; bound at D {a.head_dim}, base {a.rope_base:g})")
    print(table(curves, T))


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
