#!/usr/bin/env bash
# The CRoPE paper's Table 1 grid (WikiText-2, PTB, PG-19 x learned, rope, crope; configs/paper.json:
# B=16, T=1024, 10k steps, evaluation every 20 steps) in whatever time a GPU slot leaves: run by
# run, seed by seed, within a time budget, so the science accumulates over several short slots.
#   - the prepared shards are checked first; a dataset without them is named and skipped;
#   - a run whose log is already committed (RESULTS/NAME.jsonl or .jsonl.gz, NAME = DATASET-POS-sSEED)
#     is skipped;
#   - each finished run's log is copied to OUT/NAME.jsonl the moment it ends (commit it under
#     scripts/results/paper/ and scripts/compare_runs.py draws Figure 4 and Table 1 from it);
#   - a run is started only while the time left covers the last run's duration, and is cut at the
#     end of the budget (its log is then not copied: only whole runs count).
# gpu_check.sh --paper-grid runs it after the tests and the benchmark with the time left.
set -u

usage() {
  cat <<'EOF'
usage: scripts/paper_grid.sh --out DIR [--budget SECONDS] [--seeds N] [--dry-run] [-- TRAIN_ARGS...]
  --out DIR         where each finished run's log goes, as DIR/DATASET-POS-sSEED.jsonl
  --budget SECONDS  stop starting runs when this time is spent; cut a run still going (default 3600)
  --seeds N         seeds 1..N, the outer loop (default 1)
  --dry-run         say what would run, run nothing
  -- TRAIN_ARGS     passed on to the trainer after the config (e.g. --device cuda)
Environment (paths relative to the repository root): TRAIN (default build/train), CONFIG (default configs/paper.json), DATA (default
data: shards in DATA/NAME/NAME_{train,val}_*.bin), RESULTS (default scripts/results/paper: the
committed logs), DATASETS (default "wikitext2 ptb pg19"), POS (default "learned rope crope").
EOF
}

die() { echo "error: $*" >&2; exit 2; }

OUT="" BUDGET=3600 SEEDS=1 DRY=0 EXTRA=()
while [ $# -gt 0 ]; do
  case $1 in
    --out) [ $# -ge 2 ] || die "--out needs a folder"; OUT=$2; shift 2 ;;
    --budget) [ $# -ge 2 ] || die "--budget needs a number of seconds"; BUDGET=$2; shift 2 ;;
    --seeds) [ $# -ge 2 ] || die "--seeds needs a number"; SEEDS=$2; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ -n "$OUT" ] || die "--out is required (see --help)"
mkdir -p "$OUT/runs" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
[[ $BUDGET =~ ^[0-9]+$ ]] && [ "$BUDGET" -gt 0 ] || die "--budget must be a positive number of seconds, got '$BUDGET'"
[[ $SEEDS =~ ^[1-9][0-9]*$ ]] || die "--seeds must be a positive integer, got '$SEEDS'"
cd "$(dirname "$0")/.." || exit 2
TRAIN=${TRAIN:-build/train} CONFIG=${CONFIG:-configs/paper.json} DATA=${DATA:-data}
RESULTS=${RESULTS:-scripts/results/paper} DATASETS=${DATASETS:-wikitext2 ptb pg19} POS=${POS:-learned rope crope}
[ -f "$CONFIG" ] || die "config $CONFIG not found"
[ $DRY = 1 ] || [ -x "$TRAIN" ] || die "$TRAIN not found (build it first)"
T0=$SECONDS
left() { echo $((BUDGET - (SECONDS - T0))); }

# the shards first: a missing dataset is said now, not after hours of the others
ready=() missing=()
for d in $DATASETS; do
  if compgen -G "$DATA/$d/${d}_train_*.bin" >/dev/null && compgen -G "$DATA/$d/${d}_val_*.bin" >/dev/null; then
    ready+=("$d")
  else
    missing+=("$d")
  fi
done
[ ${#missing[@]} = 0 ] ||
  echo "missing shards: ${missing[*]} (expected $DATA/NAME/NAME_train_*.bin and NAME_val_*.bin; prepare them with data/prepare_data.py NAME)"
[ ${#ready[@]} -gt 0 ] || { echo "error: no dataset has its shards; nothing to run" >&2; exit 1; }

# one line per run: done | committed | no shards | not run (time budget) | cut (time budget) | FAILED
finished=0 failed=0 last=0
for s in $(seq 1 "$SEEDS"); do
  for d in $DATASETS; do
    for p in $POS; do
      name="$d-$p-s$s"
      if [ -e "$RESULTS/$name.jsonl" ] || [ -e "$RESULTS/$name.jsonl.gz" ]; then echo "$name: committed, skipped"; continue; fi
      if [[ " ${missing[*]} " == *" $d "* ]]; then echo "$name: no shards, skipped"; continue; fi
      if [ "$(left)" -le "$last" ] || [ "$(left)" -le 0 ]; then echo "$name: not run (time budget: $(left) s left)"; continue; fi
      cmd=("$TRAIN" --config "$CONFIG" --pos "$p" --seed "$s" --train_data "$DATA/$d/${d}_train_*.bin"
           --val_data "$DATA/$d/${d}_val_*.bin" --checkpoint_every 0 --run_dir "$OUT/runs/$name" --overwrite "${EXTRA[@]}")
      if [ $DRY = 1 ]; then echo "$name: would run ${cmd[*]}"; continue; fi
      start=$SECONDS
      timeout -k 10 "$(left)" "${cmd[@]}" >"$OUT/runs/$name.txt" 2>&1
      rc=$?
      last=$((SECONDS - start))
      if [ "$rc" = 0 ]; then
        cp "$OUT/runs/$name/log.jsonl" "$OUT/$name.jsonl.tmp" && mv "$OUT/$name.jsonl.tmp" "$OUT/$name.jsonl"
        echo "$name: done in $last s -> $OUT/$name.jsonl"
        finished=$((finished + 1))
      elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        echo "$name: cut (time budget) after $last s; its log is not kept"
      else
        echo "$name: FAILED (exit $rc): $(grep -m1 '^error' "$OUT/runs/$name.txt" || tail -n 1 "$OUT/runs/$name.txt")"
        failed=$((failed + 1))
      fi
    done
  done
done
echo "paper grid: $finished run(s) finished, $failed failed, logs in $OUT"
[ "$failed" = 0 ]
