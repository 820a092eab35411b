#!/usr/bin/env bash
# Writes the fuzz targets' seed corpora, test/fuzz/corpus/NAME/, from real files: a checkpoint of a
# tiny run of build_cpu/train (make cpu), configs/*.json, shards, GPT-2's tokenizer files (data/gpt2,
# from data/prepare_data.py) and inputs the bad-input tests give; and test/fuzz/gpt2_small/, GPT-2's
# 256 byte tokens and first 500 merges. Its output is committed; run it again after a format changes.
#   test/fuzz/make_seeds.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
TRAIN=${TRAIN:-build_cpu/train} PYTHON=${PYTHON:-$(scripts/pick_python.sh)}
[ -x "$TRAIN" ] || { echo "error: $TRAIN is not built (make cpu)" >&2; exit 1; }
[ -f data/gpt2/vocab.bpe ] || { echo "error: no data/gpt2/vocab.bpe (python3 data/prepare_data.py wikitext2)" >&2; exit 1; }
out=test/fuzz/corpus
rm -rf "$out" test/fuzz/gpt2_small
mkdir -p "$out"/{safetensors,checkpoint,config,shard,tokenizer,log} test/fuzz/gpt2_small
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
SEP=$'\n=====FILE=====\n'  # test/fuzz/fuzz.h's kFileSep
join() { local first=1 f; for f in "$@"; do [ $first = 1 ] || printf '%s' "$SEP"; first=0; cat "$f"; done; }

# the tiny run: the model fuzz_safetensors.cpp loads (n_layer 1, n_head 2, n_embd 8, vocab_size 32,
# max_seq_len 16), 3 steps, a checkpoint at step 3 (fuzz_checkpoint.cpp's folder)
"$PYTHON" - "$tmp" <<'PY'
import sys
sys.path.insert(0, "data")
from shards import write_shard
write_shard(f"{sys.argv[1]}/tiny_train_000000.bin", [i * 7 % 32 for i in range(200)])
write_shard(f"{sys.argv[1]}/tiny_val_000000.bin", [i * 5 % 32 for i in range(100)])
PY
"$TRAIN" --pos rope --n_layer 1 --n_head 2 --n_embd 8 --vocab_size 32 --max_seq_len 16 --seq_len 8 --batch_size 2 \
  --steps 3 --checkpoint_every 3 --eval_every 3 --eval_batches 1 --train_data "$tmp" --val_data "$tmp" \
  --device cpu --run_dir "$tmp/run" >/dev/null
run=$tmp/run ck=$tmp/run/ckpt_000003
cp "$ck/model.safetensors" "$out/safetensors/model"
cp "$ck/optim.safetensors" "$out/safetensors/optim"
head -c 300 "$ck/model.safetensors" >"$out/safetensors/truncated"
printf '\x10\x00\x00\x00\x00\x00\x00\x00{"a":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}  \x00\x3c' >"$out/safetensors/f16"
printf '\xff\xff\xff\xff\xff\xff\xff\x7f{}' >"$out/safetensors/huge_header"
join "$run/config.json" "$run/log.jsonl" "$run/latest" "$ck/state.json" "$ck/model.safetensors" "$ck/optim.safetensors" \
  >"$out/checkpoint/run"
head -c 5000 "$ck/optim.safetensors" >"$tmp/torn"
join "$run/config.json" "$run/log.jsonl" "$run/latest" "$ck/state.json" "$ck/model.safetensors" "$tmp/torn" \
  >"$out/checkpoint/torn_optim"

for c in configs/*.json; do { printf -- '--device\ncpu'; printf '%s' "$SEP"; cat "$c"; } >"$out/config/$(basename "$c" .json)"; done
cp "$run/config.json" "$tmp/c" && { printf -- '--steps=5\n--eval_seq_lens\n8,16'; printf '%s' "$SEP"; cat "$tmp/c"; } >"$out/config/run"
printf -- '--train_data\nx\n--pos\ncrope\n--match_params\nrope\n--rope_scaling\nyarn\n--rope_scaling_factor\n4' >"$out/config/cli"
printf -- '--train_data\nx\n--seed\n-1\n--lr\nnan\n--eval_seq_lens\n8,\n--stpes\n3' >"$out/config/bad_values"
printf -- '--resume\n%s\n--init_from\nx' "/nonexistent" >"$out/config/resume"

cp "$tmp/tiny_val_000000.bin" "$out/shard/tiny"
"$PYTHON" - "$out/shard/real" <<'PY'
import glob, sys
sys.path.insert(0, "data")
from shards import read_shard, write_shard
found = sorted(glob.glob("data/*/*_val_000000.bin"))
write_shard(sys.argv[1], read_shard(found[0])[:300] if found else list(range(300)))
PY
head -c 1100 "$out/shard/real" >"$out/shard/truncated"
printf 'This is text, not a shard.\n' >"$out/shard/text"

"$PYTHON" - test/fuzz/gpt2_small <<'PY'
import json, sys
enc = json.load(open("data/gpt2/encoder.json", encoding="utf-8"))
merges = open("data/gpt2/vocab.bpe", encoding="utf-8").read().split("\n")[1:501]
by_id = {i: t for t, i in enc.items()}
small = {by_id[i]: i for i in range(256 + len(merges))}  # GPT-2's id 256 + k is merge k's result
with open(f"{sys.argv[1]}/encoder.json", "w", encoding="utf-8") as f:
    json.dump(small, f, ensure_ascii=False)
with open(f"{sys.argv[1]}/vocab.bpe", "w", encoding="utf-8") as f:
    f.write("#version: 0.2\n" + "\n".join(merges) + "\n")
PY
printf 'Hello world, they'"'"'ll say: 42 times!\n\n  ok' >"$out/tokenizer/english"
printf 'Grüße, 東京 — naïve café ½ ٣ 🙂\t\u00a0x' >"$out/tokenizer/unicode"
printf 'ok \xc3\x28 \xed\xa0\x80 \xf4\x90\x80\x80 \xc0\xaf' >"$out/tokenizer/invalid_utf8"
printf '<|endoftext|>The end' >"$out/tokenizer/endoftext"
{ printf 'the small vocabulary'; printf '%s' "$SEP"; cat test/fuzz/gpt2_small/encoder.json; printf '%s' "$SEP"
  cat test/fuzz/gpt2_small/vocab.bpe; } >"$out/tokenizer/files"

join "$run/log.jsonl" "$run/config.json" >"$out/log/run"
{ cat "$run/log.jsonl"; printf '{"type": "config_change", "step": 2, "changes": {"lr": [0.001, 0.002]}}\n{"type": "tra'
  printf '%s' "$SEP"; cat "$run/config.json"; } >"$out/log/changed_torn"
echo "seeds: $(find "$out" -type f | wc -l) files, $(du -sh "$out" | cut -f1)"
