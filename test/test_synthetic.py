"""Tests data/make_synthetic.py: deterministic per seed, different for
another seed, valid llm.c shards, tokens inside the vocabulary of meta.json,
every answer after a marker equals the token `offset` places before it, and
with --window every marker's source is inside its window."""
import filecmp
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))
from testlib import check, finish  # noqa: E402

SCRIPT = os.path.join("data", "make_synthetic.py")
PY = sys.executable


def make(out, seed, extra=()):
    p = subprocess.run([PY, SCRIPT, "--out", out, "--seed", str(seed), "--train-tokens", "30000",
                        "--val-tokens", "5001"] + list(extra), capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def read_shard(path):
    """(header ints, tokens) with the checks of MODEL.md reported by the caller."""
    with open(path, "rb") as f:
        data = f.read()
    header = struct.unpack("<256i", data[:1024])
    n = (len(data) - 1024) // 2
    tokens = list(struct.unpack(f"<{n}H", data[1024:1024 + 2 * n]))
    return header, tokens, len(data)


def main():
    tmp = tempfile.mkdtemp(prefix="test_synthetic_")
    a, b, c = (os.path.join(tmp, x) for x in "abc")
    rc1, so, se = make(a, 7)
    check("make_synthetic_exit_0", rc1 == 0, se[-300:])
    rc2, _, _ = make(b, 7)
    rc3, _, _ = make(c, 8)
    names = ["synthetic_train_000000.bin", "synthetic_val_000000.bin", "meta.json"]
    if rc1 or rc2 or rc3:
        check("generated", False, "generator failed")
        finish()
    check("files_written", all(os.path.exists(os.path.join(a, n)) for n in names))

    def meta_of(d):  # meta.json less the flags line, which names the folder
        with open(os.path.join(d, "meta.json")) as f:
            m = json.load(f)
        m.pop("suggested_train_flags", None)
        return m
    check("deterministic_for_seed",
          all(filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False) for n in names[:2])
          and meta_of(a) == meta_of(b))
    check("different_seed_differs",
          not filecmp.cmp(os.path.join(a, names[0]), os.path.join(c, names[0]), shallow=False)
          and not filecmp.cmp(os.path.join(a, names[1]), os.path.join(c, names[1]), shallow=False))
    with open(os.path.join(a, "meta.json")) as f:
        meta = json.load(f)
    vocab = meta["vocab_size"]
    offsets = {m["id"]: m["offset"] for m in meta["markers"]}
    eot = meta["eot"]
    check("meta_vocab", vocab == 16 + 2 + 1 and sorted(offsets.values()) == [1, 2] and eot == 18,
          f"vocab {vocab} markers {offsets} eot {eot}")
    for split, n_want in (("train", 30000), ("val", 5001)):
        header, toks, size = read_shard(os.path.join(a, f"synthetic_{split}_000000.bin"))
        check(f"{split}_header", header[0] == 20240520 and header[1] == 1 and header[2] == n_want
              and all(h == 0 for h in header[3:]), str(header[:4]))
        check(f"{split}_size", size == 1024 + 2 * n_want, f"{size} bytes")
        check(f"{split}_tokens_in_vocab", max(toks) < vocab and min(toks) >= 0, f"max {max(toks)}")
        bad_answer = bad_context = 0
        seen = {m: 0 for m in offsets}
        for i, t in enumerate(toks):
            if t not in offsets:
                continue
            seen[t] += 1
            d = offsets[t]
            if i + 1 >= len(toks) or i - d < 0 or toks[i + 1] != toks[i - d]:
                bad_answer += 1
            # the tokens the marker may look at are content, inside its document
            if any(toks[j] in offsets or toks[j] == eot for j in range(max(0, i - max(offsets.values())), i)):
                bad_context += 1
        check(f"{split}_answers_copy_offset", bad_answer == 0, f"{bad_answer} wrong answers")
        check(f"{split}_markers_preceded_by_content", bad_context == 0, f"{bad_context} bad")
        check(f"{split}_both_markers_present", all(v > n_want // 100 for v in seen.values()), str(seen))
        check(f"{split}_marker_counts_in_meta",
              meta["splits"][split]["markers"] == {str(k): v for k, v in seen.items()},
              f"{meta['splits'][split]['markers']} vs {seen}")
        check(f"{split}_documents_start_with_eot",
              all(toks[i] == eot for i in range(0, len(toks), meta["doc_len"]))
              and toks.count(eot) == (len(toks) + meta["doc_len"] - 1) // meta["doc_len"])
    # --window 16 (a seq_len shorter than the 64-token documents): every marker is at least 2
    # tokens into its window of 16, so the token it copies is in the window; without it some are not
    w = os.path.join(tmp, "w")
    rc, _, se = make(w, 7, ["--window", "16"])
    _, wt, _ = read_shard(os.path.join(w, "synthetic_train_000000.bin")) if rc == 0 else (None, [], None)
    _, at, _ = read_shard(os.path.join(a, "synthetic_train_000000.bin"))
    early = [i for i, t in enumerate(wt) if t in offsets and i % 16 < 2]
    check("window_markers_copy_inside_window", rc == 0 and wt and not early
          and any(t in offsets and i % 16 < 2 for i, t in enumerate(at)), f"{len(early)} early markers {se[-200:]}")
    with open(os.path.join(w, "meta.json")) as f:
        check("window_in_meta", rc == 0 and json.load(f)["window"] == 16 and meta["window"] == meta["doc_len"])
    rc, so, se = make(os.path.join(tmp, "e2"), 1, ["--window", "2"])
    check("window_too_small_error", rc == 1 and se.startswith("error: --window must be >= 3"), se[-300:])
    # bad arguments: a clear error, no traceback
    rc, so, se = make(os.path.join(tmp, "e"), 1, ["--offsets", "0,x"])
    check("bad_offsets_error", rc == 1 and se.startswith("error: ") and "Traceback" not in se, se[-300:])
    shutil.rmtree(tmp, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
