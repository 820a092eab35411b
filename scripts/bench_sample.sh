#!/usr/bin/env bash
# Generation speed of build/sample on the CPU: tokens/s with the KV cache against the full
# recompute (--no_cache), for the paper's model (rope: V=50257, C=128, L=4, H=4) and GPT-2 124M
# (learned: C=768, L=12, H=12), both with max_seq_len 1024, generating 256 and 1,024 tokens after
# a one-token prompt, greedy, on randomly initialised weights (speed does not depend on them).
# The cache's number is the whole run's (its steps grow with the context). The full recompute runs
# one forward pass over a fixed window (the prompt and the tokens: 257 or 1,024 positions) for
# every token, the same work at every step, so it is timed over a short run that fills that
# window: a prompt of the window less --recompute_tokens, then those tokens (the first from the
# prefill). Both from build/sample's speed line, one after the other in the same run. Writes a
# Markdown table with the command, machine, load and commit.
#
# usage: scripts/bench_sample.sh [--out scripts/results/bench_sample.md] [--recompute_tokens 4]
# Environment: TRAIN and SAMPLE (default build/train, build/sample).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=scripts/results/bench_sample.md
K=4
while [ $# -gt 0 ]; do
  case $1 in
    --out) OUT=$2; shift 2 ;;
    --recompute_tokens) K=$2; shift 2 ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "error: unknown option '$1' (see --help)" >&2; exit 1 ;;
  esac
done
[[ $K =~ ^[1-9][0-9]*$ ]] && [ "$K" -ge 2 ] ||
  { echo "error: --recompute_tokens must be an integer of at least 2, got '$K'" >&2; exit 1; }
TRAIN=${TRAIN:-build/train}
SAMPLE=${SAMPLE:-build/sample}
for b in "$TRAIN" "$SAMPLE"; do
  [ -x "$b" ] || { echo "error: $b not found; build it first (make)" >&2; exit 1; }
done
PY=$(scripts/pick_python.sh)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# a shard of random tokens: the trainer needs data to write a checkpoint of its initial weights
"$PY" - "$tmp" <<'PY'
import random, sys
sys.path.insert(0, "data")
from shards import write_shard
random.seed(0)
write_shard(sys.argv[1] + "/r_000000.bin", [random.randrange(50257) for _ in range(4096)])
PY
# name pos C L H
MODELS=("paper rope 128 4 4" "gpt2-124M learned 768 12 12")
for m in "${MODELS[@]}"; do
  set -- $m
  "$TRAIN" --train_data "$tmp/r_000000.bin" --pos "$2" --n_embd "$3" --n_layer "$4" --n_head "$5" --vocab_size 50257 \
    --max_seq_len 1024 --seq_len 64 --batch_size 1 --steps 0 --eval_every 0 --checkpoint_every 1 --device cpu \
    --run_dir "$tmp/$1" >/dev/null
done
ids() { "$PY" -c "import random; random.seed($1); print(' '.join(str(random.randrange(50257)) for _ in range($1)))"; }

# speed NAME ARGS...: build/sample's generation tokens/s (its speed line)
speed() {
  local name=$1; shift
  "$SAMPLE" --checkpoint "$tmp/$name" --temperature 0 --encoder_json "$tmp/none.json" "$@" 2>&1 >/dev/null |
    sed -n 's/^speed: .* generation [0-9]* tokens at \([0-9.]*\) tokens\/s.*/\1/p'
}
load_before=$(uptime | sed 's/.*load average: //')
rows=""
for m in "${MODELS[@]}"; do
  set -- $m
  for n in 256 1024; do
    cached=$(speed "$1" --prompt_ids "$(ids 1)" --tokens "$n")
    full=$(speed "$1" --prompt_ids "$(ids $((n + 1 - K)))" --tokens "$K" --no_cache)
    ratio=$("$PY" -c "print(f'{$cached / $full:.0f}x')")
    echo "$1 ($2), $n tokens: KV cache $cached tokens/s, full recompute $full tokens/s, $ratio" >&2
    rows+="| $1 ($2) | $n | $cached | $full | $ratio |"$'\n'
  done
done
load_after=$(uptime | sed 's/.*load average: //')

{
  echo "# Generation speed: KV cache against the full recompute (CPU)"
  echo
  echo "Generation tokens/s of \`build/sample\` (greedy, one-token prompt, randomly initialised weights,"
  echo "max_seq_len 1024) with the KV cache (the whole run) and with \`--no_cache\` (one forward pass over"
  echo "the whole window per token, timed over the $((K - 1)) tokens after the first of a $K-token run that"
  echo "fills the window). Each number is one run, the two of a row a few minutes apart: with other jobs"
  echo "on the machine (the load below, on $(nproc) cores) each had a share of the cores that changed from"
  echo "run to run, so a row's ratio is as uncertain as that share."
  echo
  echo "| model | tokens | KV cache (tokens/s) | full recompute (tokens/s) | speed-up |"
  echo "|---|---:|---:|---:|---:|"
  printf '%s' "$rows"
  echo
  echo "- command: \`scripts/bench_sample.sh --recompute_tokens $K\`"
  echo "- machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
  echo "- load average (1, 5, 15 min) before: $load_before; after: $load_after"
  echo "- commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src cuda || echo ' (with uncommitted changes)')"
} >"$OUT"
echo "wrote $OUT" >&2
