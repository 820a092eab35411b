#!/usr/bin/env python3
"""Synthetic "token-dependent position comparison" task (after section 4 of
the CRoPE paper): which earlier position the model must look at depends on
the identity of the current token.

The token stream is a sequence of documents. Each document starts with an
end-of-text token EOT and continues with random content tokens 0..V-1
(uniform, independent). At random places a marker token is inserted; marker k
(id V+k) means "the next token is a copy of the token offsets[k] positions
before me". With the default offsets (1, 2):

    ... c7 c3 M1 c3 c9 c2 c5 M2 c2 ...      M1 copies 1 back, M2 copies 2 back

So the token after a marker (the answer) is fully predictable from the marker
and the tokens before it, while content tokens are pure noise (loss ln V) and
the marker positions are random. A model solves the task only if its
attention looks 1 or 2 positions back *depending on which marker it sees*,
i.e. if the relative-position preference of a query depends on its token.

Placement rules, so that every answer is well defined in any window:
  * the offsets[-1] tokens before a marker are content tokens (no marker, no
    EOT), so markers are at least max(offsets)+1 apart and never copy across
    a document boundary;
  * the answer always falls inside the same document;
  * with --window T (the trainer's seq_len, when it is shorter than a
    document), a marker is at least max(offsets) tokens into its window of T
    tokens (windows start at multiples of T), so the token it copies is in the
    window: every marker the trainer scores can be answered.

Vocabulary (vocab_size = V + len(offsets) + 1): content 0..V-1, markers
V..V+K-1, EOT = V+K. Scoring (done by the trainer): over target positions t
of a window x[0..T-1] (target y[t] = x[t+1]) whose input token x[t] is a
marker with offset d and t >= d (the copied token x[t-d] is inside the
window); correct when argmax of the logits at t equals y[t] (= x[t-d]).
meta.json records all of this.

Writes OUT/synthetic_train_000000.bin, OUT/synthetic_val_000000.bin (llm.c
shard format) and OUT/meta.json. Deterministic for a given seed.
"""
import argparse
import json
import os
import sys

# Shards are written by the project's shard module (data/shards.py).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fetch import DataError, require  # noqa: E402
from shards import shard_name, write_shard  # noqa: E402

np = require("numpy")


def generate(n_tokens, rng, n_content, offsets, doc_len, marker_prob, window):
    """Returns (tokens uint16 array of length n_tokens, stats dict)."""
    n_markers = len(offsets)
    eot = n_content + n_markers
    need = max(offsets)  # content tokens required right before a marker
    # Draw all randomness up front (fast, and the stream depends only on rng).
    content = rng.integers(0, n_content, size=n_tokens)
    coin = rng.random(n_tokens)
    kind = rng.integers(0, n_markers, size=n_tokens)
    out = [0] * n_tokens
    counts = [0] * n_markers
    clean = 0  # how many content tokens directly precede position i
    doc_pos = 0  # position inside the current document
    i = 0
    while i < n_tokens:
        if doc_pos == 0:
            out[i] = eot
            clean = 0
            i += 1
            doc_pos = 1 if doc_len > 1 else 0
            continue
        # a marker needs `need` clean tokens before it, in its window, and room
        # for its answer in the same document and in the stream
        if (clean >= need and i % window >= need and doc_pos + 1 < doc_len
                and i + 1 < n_tokens and coin[i] < marker_prob):
            k = int(kind[i])
            out[i] = n_content + k
            out[i + 1] = out[i - offsets[k]]  # the answer: a content token
            counts[k] += 1
            clean = 1  # the answer counts as content for the next marker
            i += 2
            doc_pos += 2
        else:
            out[i] = int(content[i])
            clean += 1
            i += 1
            doc_pos += 1
        if doc_pos >= doc_len:
            doc_pos = 0
    return np.array(out, dtype=np.uint16), {"markers": counts}


def main(argv):
    ap = argparse.ArgumentParser(
        description="Write the synthetic token-dependent position comparison "
                    "task (markers that ask to copy the token 1 or 2 back) as "
                    "llm.c shards plus meta.json. See the module docstring.")
    ap.add_argument("--out", default="data/synthetic", help="output folder (default data/synthetic)")
    ap.add_argument("--train-tokens", type=int, default=262144, help="default 262144")
    ap.add_argument("--val-tokens", type=int, default=32768, help="default 32768")
    ap.add_argument("--seed", type=int, default=1234, help="default 1234")
    ap.add_argument("--content-vocab", type=int, default=16,
                    help="number of content tokens V (default 16)")
    ap.add_argument("--offsets", default="1,2",
                    help="comma list, marker k copies the token offsets[k] back (default 1,2)")
    ap.add_argument("--doc-len", type=int, default=64,
                    help="tokens per document including its leading EOT (default 64)")
    ap.add_argument("--marker-prob", type=float, default=0.15,
                    help="chance of a marker at each eligible position (default 0.15)")
    ap.add_argument("--window", type=int, default=None,
                    help="the trainer's seq_len, when shorter than a document: a marker is at least "
                         "max(offsets) tokens into its window, so what it copies is in the window "
                         "(default: --doc-len)")
    a = ap.parse_args(argv)
    try:
        offsets = [int(x) for x in a.offsets.split(",") if x.strip()]
    except ValueError:
        offsets = []
    if not offsets or min(offsets) < 1:
        raise ValueError(f"--offsets must be a comma list of integers >= 1, got {a.offsets!r}")
    if a.train_tokens < 1 or a.val_tokens < 1:
        raise ValueError("--train-tokens and --val-tokens must be >= 1")
    if a.content_vocab < 2:
        raise ValueError("--content-vocab must be >= 2")
    vocab = a.content_vocab + len(offsets) + 1
    if vocab > 65536:
        raise ValueError("vocabulary does not fit uint16 tokens")
    if a.doc_len < max(offsets) + 3:
        raise ValueError(f"--doc-len must be >= {max(offsets) + 3} to hold a marker")
    if not 0.0 <= a.marker_prob <= 1.0:
        raise ValueError("--marker-prob must be in [0, 1]")
    window = a.doc_len if a.window is None else a.window
    if window < max(offsets) + 1:
        raise ValueError(f"--window must be >= {max(offsets) + 1} to hold a marker")

    os.makedirs(a.out, exist_ok=True)
    splits = {}
    for idx, (split, n) in enumerate((("train", a.train_tokens), ("val", a.val_tokens))):
        # independent streams per split, both fixed by the seed
        rng = np.random.default_rng([a.seed, idx])
        toks, st = generate(n, rng, a.content_vocab, offsets, a.doc_len, a.marker_prob, window)
        path = os.path.join(a.out, shard_name("synthetic", split, 0))
        write_shard(path, toks)
        splits[split] = {"file": os.path.basename(path), "tokens": int(n),
                         "markers": {str(a.content_vocab + k): c
                                     for k, c in enumerate(st["markers"])}}
    eot = a.content_vocab + len(offsets)
    meta = {
        "task": "token-dependent position comparison (CRoPE paper, section 4)",
        "vocab_size": vocab,
        "content_tokens": [0, a.content_vocab - 1],
        "markers": [{"id": a.content_vocab + k, "offset": d,
                     "meaning": f"the next token equals the token {d} position(s) before this marker"}
                    for k, d in enumerate(offsets)],
        "eot": eot,
        "doc_len": a.doc_len,
        "window": window,
        "marker_prob": a.marker_prob,
        "seed": a.seed,
        "splits": splits,
        "scoring": {
            "positions": "targets y[t] = x[t+1] of a window x[0..T-1] whose input x[t] is a marker "
                         "with offset d; t >= d (the copied token is inside the window) holds for "
                         "every marker when T is the window (or a multiple of it)",
            "correct": "argmax of the logits at t equals y[t], which is always x[t-d]",
            "chance_accuracy": 1.0 / a.content_vocab,
            # copying from one fixed offset whatever the marker: right for
            # 1/K of the markers, and by coincidence 1/V of the time otherwise
            "marker_blind_accuracy": 1.0 / len(offsets)
            + (1 - 1.0 / len(offsets)) / a.content_vocab,
            "note": "content tokens are uniform noise: their loss cannot go below ln(content_vocab)",
        },
        "suggested_train_flags": f"--vocab_size {vocab} --train_data {a.out}/synthetic_train_*.bin "
                                 f"--val_data {a.out}/synthetic_val_*.bin",
    }
    with open(os.path.join(a.out, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print(f"wrote {a.out}: vocab_size {vocab}, train {a.train_tokens} tokens "
          f"({sum(splits['train']['markers'].values())} markers), val {a.val_tokens} tokens")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (ValueError, OSError, DataError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
