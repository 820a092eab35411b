#!/usr/bin/env python3
"""Validate a token dataset the way the trainer does.

    check_dataset.py DIR_OR_GLOB [--vocab-size 50257]

DIR: every *.bin in the folder; it must hold NAME_{train,val,test}_NNNNNN.bin shards with
non-empty train and val splits (test is optional), numbered 000000, 000001, ... per split.
GLOB: the matching files, whatever their names (at least one).
Each shard: magic 20240520, version 1, size == 1024 + 2N, N > 0, every token < V.
Prints a summary per split; every problem is an `error: ...` line; exit 1 if any.
"""
import os
import sys

from fetch import ArgParser, DataError
from shards import SPLITS, check_shard, find_shards, parse_shard_name


def main(argv=None):
    ap = ArgParser(description="Validate token shards (MODEL.md format) as the trainer does.")
    ap.add_argument("path", metavar="DIR_OR_GLOB")
    ap.add_argument("--vocab-size", type=int, default=50257)
    args = ap.parse_args(argv)
    if args.vocab_size <= 0 or args.vocab_size > 65536:
        ap.error("--vocab-size must be in 1..65536 (tokens are uint16)")
    errors = []
    is_dir = os.path.isdir(args.path)
    groups = find_shards(args.path)
    if not groups:
        errors.append(f"no shards found at {args.path}" + (" (no *.bin files in the folder)" if is_dir else ""))
    if is_dir and groups:
        for p in groups.get(None, []):
            errors.append(f"{p}: name does not follow NAME_{{train,val,test}}_NNNNNN.bin")
        for split in ("train", "val"):
            if split not in groups:
                errors.append(f"split {split} is empty: no {split} shards in {args.path}")
        for split, paths in groups.items():
            if split is None:
                continue
            idx = sorted(parse_shard_name(p)[2] for p in paths)
            if idx != list(range(len(idx))):
                errors.append(f"split {split}: shard numbers {idx} are not 0..{len(idx) - 1} without gaps")
    for split in [s for s in SPLITS if s in groups] + ([None] if None in groups else []):
        total, lo, hi, ok = 0, None, None, 0
        for p in groups[split]:
            try:
                n, a, b = check_shard(p, args.vocab_size)
            except DataError as e:
                errors.append(str(e))
                continue
            ok += 1
            total += n
            lo = a if lo is None else min(lo, a)
            hi = b if hi is None else max(hi, b)
        label = split or "other"
        if ok:
            print(f"{label}: {len(groups[split])} shard(s), {total:,} tokens, ids {lo}..{hi}")
        else:
            print(f"{label}: {len(groups[split])} shard(s), none valid")
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    if errors:
        return 1
    print(f"ok: {args.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
