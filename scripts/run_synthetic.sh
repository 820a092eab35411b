#!/usr/bin/env bash
# The main job (`make run`): the CRoPE paper's synthetic "token-dependent position
# comparison" task (data/make_synthetic.py) trained with every position scheme
# (build/train --list-pos) and CRoPE at RoPE's parameter count (crope=rope: --match_params rope, a
# wider MLP), ten seeds each, on the CPU (configs/synthetic.json); then the comparison
# table (loss, accuracy after the markers, seeds that solved it) and figure, the attention maps of
# each scheme's first seed (scripts/plot_attention.py) and a greedy sample from rope seed 1's
# checkpoint. No network, no downloads.
#   scripts/run_synthetic.sh [--seeds "1 2 ... 10"] [--pos "rope crope=rope ..."] [--out runs/synthetic]
#                            [--jobs N] [--results DIR] [-- TRAIN_FLAGS...]
# --jobs: runs trained at once, one OpenMP thread each (default: the number of cores; the
# numbers are the same for any N). --results DIR: also write DIR/synthetic.md, DIR/synthetic.png,
# DIR/synthetic_lengths.png, DIR/attention.png and the runs' gzipped logs in DIR/synthetic_logs/
# (scripts/results: the README's). Flags after -- go to every build/train run (-- --steps 1000).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$(scripts/pick_python.sh)}
TRAIN=${TRAIN:-build/train}
SAMPLE=${SAMPLE:-build/sample}
seeds="1 2 3 4 5 6 7 8 9 10"
positions=""  # every scheme, and crope=rope
out=runs/synthetic
jobs=$(nproc)
results=""
# value OPTION VALUE...: the value, or one error line when it is missing
value() {
  [ $# -ge 2 ] || { echo "error: the value of $1 is missing (see --help)" >&2; return 1; }
  echo "$2"
}
while [ $# -gt 0 ]; do
  case $1 in
    --seeds) seeds=$(value "$@"); shift 2 ;;
    --pos) positions=$(value "$@"); shift 2 ;;
    --out) out=$(value "$@"); shift 2 ;;
    --jobs) jobs=$(value "$@"); shift 2 ;;
    --results) results=$(value "$@"); shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "error: unknown argument '$1' (see --help)" >&2; exit 1 ;;
  esac
done
flags=("$@")  # after --
[ -n "$positions" ] || positions="$("$TRAIN" --list-pos | tr '\n' ' ')crope=rope"
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "error: --jobs must be a whole number >= 1, got '$jobs'" >&2; exit 1; }
# the task's shards, written each time (in a second; the same bytes every time), with markers far
# enough into each window of the config's seq_len that every one can be answered
seq_len=$("$PYTHON" -c 'import json; print(json.load(open("configs/synthetic.json"))["seq_len"])')
"$PYTHON" data/make_synthetic.py --out data/synthetic --window "$seq_len" >/dev/null
mkdir -p "$out"

# train POS SEED: one run into $out/POS-sSEED (its output in .txt beside it), then its last line;
# POS is a scheme, or SCHEME=REF: SCHEME with REF's parameter count
train() {
  local run="$out/$1-s$2" start match=()
  [[ $1 == *=* ]] && match=(--match_params "${1#*=}")
  start=$(date +%s)
  rm -rf "$run"
  # one OpenMP thread per run, however many run at once: runs side by side use the cores better
  # than threads (a step 7.3 ms on one thread, 4.9 on two), and some OpenBLAS kernels (0.3.21's
  # Haswell ones) round a product differently when split among other thread counts
  if OMP_NUM_THREADS=1 "$TRAIN" --config configs/synthetic.json --pos "${1%%=*}" "${match[@]}" --seed "$2" \
    --run_dir "$run" "${flags[@]}" >"$run.txt" 2>&1; then
    echo "$1 seed $2: $(grep "^val | step [0-9]* | seq_len $seq_len |" "$run.txt" | tail -1 | cut -d'|' -f4-) ($(($(date +%s) - start)) s)"
  else
    echo "error: $1 seed $2 failed, see $run.txt:" >&2
    tail -3 "$run.txt" >&2
    return 1
  fi
}
runs=() pids=() failed=0
echo "each run's last validation at $seq_len tokens; accuracy A (N): A of N markers answered right"
for seed in $seeds; do
  for pos in $positions; do
    if [ ${#pids[@]} -ge "$jobs" ]; then  # wait for the oldest run: they take about as long
      wait "${pids[0]}" || failed=1
      pids=("${pids[@]:1}")
    fi
    train "$pos" "$seed" &
    pids+=($!) runs+=("$out/$pos-s$seed")
  done
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
[ $failed -eq 0 ] || exit 1

# one comparison; with --results it also saves the logs, and its table and figure are copied
save=()
if [ -n "$results" ]; then
  rm -rf "$results/synthetic_logs"
  save=(--save-logs "$results/synthetic_logs")
fi
echo
"$PYTHON" scripts/compare_runs.py "${runs[@]}" --out "$out/compare" --summary "${save[@]}"
[[ " $positions " != *" crope=rope "* ]] || echo "crope=rope: crope with a wider MLP, at rope's parameter count"
# what each scheme looks at (its first seed), on one validation window
read -r first _ <<<"$seeds"
firsts=()
for pos in $positions; do [[ $pos == *=* ]] || firsts+=("$out/$pos-s$first"); done
"$PYTHON" scripts/plot_attention.py "${firsts[@]}" --sample "$SAMPLE" --out "$out/attention.png"
if [ -n "$results" ]; then
  cp "$out/compare.md" "$results/synthetic.md"
  cp "$out/compare.png" "$results/synthetic.png"  # the README shows the PNG
  # (written when the runs were validated at more than one length)
  if [ -f "$out/compare_lengths.png" ]; then cp "$out/compare_lengths.png" "$results/synthetic_lengths.png"; fi
  cp "$out/attention.png" "$results/attention.png"
  echo "results in $results/: synthetic.md, synthetic.png, synthetic_lengths.png, attention.png, synthetic_logs/"
fi

# what a trained model does (rope, the first seed): after marker 16 the token 1 back, after marker
# 17 the token 2 back (18 starts a document)
if [[ " $positions " == *" rope "* ]]; then
  echo "rope seed $first's greedy next token after a marker: 16 asks for the token 1 back, 17 for 2 back"
  err=$(mktemp)
  for prompt in "18 5 9 2 16" "18 5 9 2 17"; do
    cmd=("$SAMPLE" --checkpoint "$out/rope-s$first" --prompt_ids "$prompt" --tokens 1 --temperature 0)
    got=$("${cmd[@]}" 2>"$err") || cat "$err" >&2  # its memory and speed lines only on failure
    echo "sample: ${cmd[*]}  ->  $got"
  done
  rm -f "$err"
fi
