#!/usr/bin/env bash
# Reproduces the CRoPE paper's language-model comparison (Figure 4, Table 1):
# trains every (dataset, pos, seed) with one config file (--scale), resumes cut runs,
# skips finished ones, then compares them all with scripts/compare_runs.py.
# Run from anywhere; paths are relative to the repository root.

# --- the two scales are two config files, so a run of this script and a run of
# build/train --config FILE train exactly the same thing:
#   paper: configs/paper.json (10,000 steps of 16 x 1024 tokens; a GPU job)
#   cpu:   configs/cpu_small.json (the same model; 300 steps of 8 x 64 tokens, lr x0.8
#          every 30 steps: the paper's 10 decays over the run; validation at 1x, 2x
#          and 4x the training length), sized so 9 runs finish in about 12 minutes
#          on 2 quiet CPU cores.
CPU_SMOOTH=10      # moving average of the train loss in the figure
PAPER_SMOOTH=50

usage() {
  cat <<'EOF'
usage: scripts/reproduce_paper.sh [options] [-- EXTRA_TRAIN_ARGS...]

Trains GPT-2 (L=4, H=4, C=128, AdamW 1e-3, StepLR 0.8) on each dataset with
each position scheme and seed, every run with the same config, then writes
OUT/compare.png, OUT/compare.svg and OUT/compare.md (scripts/compare_runs.py).
Runs go to OUT/NAME-POS-sSEED; their console output to OUT/NAME-POS-sSEED.txt.

options:
  --seeds N            seeds 1..N per (dataset, pos)          (default 1)
  --datasets "A B"     datasets                               (default "wikitext2 ptb pg19")
  --pos "A B"          position schemes, of those build/train --list-pos names
                                                              (default "learned rope crope")
  --scale paper|cpu    paper: configs/paper.json (10,000 steps of 16 x 1024 tokens; a GPU job)
                       cpu: configs/cpu_small.json (the same model, 300 steps of 8 x 64
                       tokens; about 12 minutes for 9 runs on 2 quiet cores)   (default paper)
  --mirror DIR         local mirror for data/prepare_data.py when a dataset is missing
  --out DIR            where the runs and the comparison go  (default runs/paper)
  --smooth N           train-loss moving average in the figure (default 50 paper, 10 cpu)
  --no-build           do not run make first
  --dry-run            print what would run, run nothing
  -h, --help           this text
  -- ARGS...           passed on to build/train for new runs (not for resumed ones)

Resuming: a run whose log reached its final step is skipped; a cut run with a
`latest` checkpoint is continued with `build/train --resume RUN_DIR`; a cut run
without a checkpoint is moved aside (RUN_DIR.stale-TIME) and started again.
Environment: PYTHON (default: scripts/pick_python.sh), TRAIN (default build/train),
CONFIG (default: the scale's config file).
EOF
}

die() { echo "error: $*" >&2; exit 1; }

cd "$(dirname "$0")/.." || die "cannot enter the repository root"

SEEDS=1
DATASETS="wikitext2 ptb pg19"
POS_LIST="learned rope crope"
SCALE=paper
MIRROR=""
OUT=runs/paper
SMOOTH=""
BUILD=1
DRY=0
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --seeds|--datasets|--pos|--scale|--mirror|--out|--smooth)
      [ $# -ge 2 ] || die "$1 needs a value (see --help)"
      case "$1" in
        --seeds) SEEDS=$2 ;; --datasets) DATASETS=$2 ;; --pos) POS_LIST=$2 ;;
        --scale) SCALE=$2 ;; --mirror) MIRROR=$2 ;; --out) OUT=$2 ;; --smooth) SMOOTH=$2 ;;
      esac
      shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --dry-run) DRY=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

[[ "$SEEDS" =~ ^[1-9][0-9]*$ ]] || die "--seeds must be a positive integer, got '$SEEDS'"
[ -n "$SMOOTH" ] && { [[ "$SMOOTH" =~ ^[1-9][0-9]*$ ]] || die "--smooth must be a positive integer"; }
case "$SCALE" in
  paper) SCALE_CONFIG=configs/paper.json; SMOOTH=${SMOOTH:-$PAPER_SMOOTH} ;;
  cpu) SCALE_CONFIG=configs/cpu_small.json; SMOOTH=${SMOOTH:-$CPU_SMOOTH} ;;
  *) die "--scale must be paper or cpu, got '$SCALE'" ;;
esac
[ -n "$DATASETS" ] || die "--datasets is empty"
[ -n "$POS_LIST" ] || die "--pos is empty"
for d in $DATASETS; do [[ "$d" =~ ^[A-Za-z0-9_.-]+$ ]] || die "bad dataset name '$d'"; done
[ -n "$OUT" ] || die "--out is empty"

PYTHON=${PYTHON:-$(scripts/pick_python.sh)}
TRAIN=${TRAIN:-build/train}
CONFIG=${CONFIG:-$SCALE_CONFIG}
[ -f "$CONFIG" ] || die "$CONFIG not found (the --scale $SCALE preset)"

# run CMD...: echo it; run it unless --dry-run
run() {
  echo "+ $*"
  [ "$DRY" = 1 ] || "$@"
}

# --- build, then the schemes asked for: those src/pos.h defines (build/train --list-pos)
if [ "$BUILD" = 1 ]; then
  run make BUILD="$(dirname "$TRAIN")" || die "build failed"
fi
if [ -x "$TRAIN" ]; then
  known=$("$TRAIN" --list-pos) || die "$TRAIN --list-pos failed"
  for p in $POS_LIST; do
    grep -qx -- "$p" <<<"$known" || die "unknown pos '$p' (one of: $(echo $known))"
  done
elif [ "$DRY" = 0 ]; then
  die "$TRAIN not found or not executable"
fi

# --- data
for d in $DATASETS; do
  if compgen -G "data/$d/${d}_train_*.bin" >/dev/null && compgen -G "data/$d/${d}_val_*.bin" >/dev/null; then
    continue
  fi
  echo "== preparing data/$d"
  if [ -n "$MIRROR" ]; then
    run "$PYTHON" data/prepare_data.py "$d" --mirror "$MIRROR" --out "data/$d" || die "preparing $d failed"
  else
    run "$PYTHON" data/prepare_data.py "$d" --out "data/$d" || die "preparing $d failed"
  fi
done

# --- runs: seed outermost, so every comparison has one seed before any has two
[ "$DRY" = 1 ] || mkdir -p "$OUT" || die "cannot create $OUT"
n_total=$(( SEEDS * $(wc -w <<<"$DATASETS") * $(wc -w <<<"$POS_LIST") ))
i=0 failed=() dirs=()
for s in $(seq 1 "$SEEDS"); do
  for d in $DATASETS; do
    for p in $POS_LIST; do
      i=$((i + 1))
      dir="$OUT/$d-$p-s$s"
      dirs+=("$dir")
      state=missing
      if [ -e "$dir" ]; then
        state=$("$PYTHON" scripts/compare_runs.py --status "$dir" 2>/dev/null | awk '{print $1}')
      fi
      tag="[$i/$n_total] $d $p seed $s"
      if [ "$state" = complete ]; then
        echo "== $tag: complete, skipped"
        continue
      fi
      start=$(date +%s)
      if [ "$state" = partial ] && [ -e "$dir/latest" ]; then
        echo "== $tag: resuming $dir"
        cmd=("$TRAIN" --resume "$dir")
      else
        if [ -e "$dir" ]; then
          stale="$dir.stale-$(date +%Y%m%d-%H%M%S)"
          echo "== $tag: $dir is cut short without a checkpoint; moved to $stale"
          run mv "$dir" "$stale" || die "cannot move $dir aside"
        fi
        echo "== $tag: training $dir"
        cmd=("$TRAIN" --config "$CONFIG" --pos "$p"
             --train_data "data/$d/${d}_train_*.bin" --val_data "data/$d/${d}_val_*.bin"
             --seed "$s" --run_dir "$dir" "${EXTRA[@]}")
      fi
      if [ "$DRY" = 1 ]; then
        echo "+ ${cmd[*]}"
        continue
      fi
      if "${cmd[@]}" >>"$dir.txt" 2>&1; then
        echo "   done in $(( $(date +%s) - start )) s"
      else
        echo "   FAILED (exit $?); last lines of $dir.txt:" >&2
        tail -n 5 "$dir.txt" >&2
        failed+=("$dir")
      fi
    done
  done
done

# --- comparison over every run that has a log
have=()
for dir in "${dirs[@]}"; do [ -f "$dir/log.jsonl" ] && have+=("$dir"); done
if [ "$DRY" = 1 ]; then
  echo "+ $PYTHON scripts/compare_runs.py ${dirs[*]} --out $OUT/compare --smooth $SMOOTH"
elif [ ${#have[@]} -gt 0 ]; then
  echo "== comparing ${#have[@]} runs"
  "$PYTHON" scripts/compare_runs.py "${have[@]}" --out "$OUT/compare" --smooth "$SMOOTH" \
    || failed+=("compare_runs")
else
  echo "error: no run produced a log" >&2
  exit 1
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "error: ${#failed[@]} step(s) failed: ${failed[*]}" >&2
  exit 1
fi
echo "== done: $OUT/compare.png, $OUT/compare.md"
