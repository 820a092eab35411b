#!/usr/bin/env bash
# Reproduces the CRoPE paper's language-model comparison (Figure 4, Table 1):
# trains every (dataset, pos, seed) with one config file (--scale), resumes cut runs,
# reuses finished ones trained with the same config, then compares them all with
# scripts/compare_runs.py.
# Run from anywhere; paths are relative to the repository root.

# --- the two scales are two config files, so a run of this script and a run of
# build/train --config FILE train exactly the same thing:
#   paper: configs/paper.json (10,000 steps of 16 x 1024 tokens; a GPU job)
#   cpu:   configs/cpu_small.json (the same model; 300 steps of 8 x 64 tokens, lr x0.8
#          every 30 steps: the paper's 10 decays over the run; validation at 1x, 2x,
#          4x and 8x the training length): time and disk in scripts/results/cpu_recipe.md.
# Each scale has its own default folder, so runs of one never stand in for the other's.
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
  --pos "A B"          position schemes, of those build/train --list-pos names;
                       A=B: scheme A at B's parameter count (--match_params B,
                       a wider MLP)          (default: all of them, and crope=rope)
  --scale paper|cpu    paper: configs/paper.json (10,000 steps of 16 x 1024 tokens; a GPU job)
                       cpu: configs/cpu_small.json (the same model, 300 steps of 8 x 64
                       tokens; 16 runs at --jobs 2 on 2 cores: about 20 minutes and 2.6 GB,
                       scripts/results/cpu_recipe.md)                          (default paper)
  --jobs N             runs trained at once, one OpenMP thread each when N > 1 (default 1)
  --mirror DIR         local mirror for data/prepare_data.py when a dataset is missing
  --out DIR            where the runs and the comparison go
                                                  (default runs/paper or runs/cpu, by --scale)
  --smooth N           train-loss moving average in the figure (default 50 paper, 10 cpu)
  --no-build           do not run make first (else: make; with --device cpu in ARGS,
                       make cpu, which builds build_cpu/train without the CUDA backend)
  --dry-run            print what would run, run nothing
  --wait               when another runner uses OUT, wait for it to end (else: an error)
  -h, --help           this text
  -- ARGS...           passed on to build/train for new runs (not for resumed ones)

Resuming: a run folder is reused only when its config (config.json with the
changes its log records) is the config this command would train (the config file,
the pos, seed and data, and the ARGS; where files go and the device aside); any
other is an error naming the keys that differ.
A run whose log reached its final step is skipped; a cut run with a `latest`
checkpoint is continued with `build/train --resume RUN_DIR`; a cut run without a
checkpoint is moved aside (RUN_DIR.stale-TIME) and started again. Ctrl-C (or
SIGTERM) stops every running run after its step, with a checkpoint: run the same
command again to continue.
Environment: PYTHON (default: scripts/pick_python.sh), TRAIN (default build/train;
build_cpu/train with --device cpu in ARGS),
CONFIG (default: the scale's config file), DATA (default data: the shards are
DATA/NAME/NAME_{train,val}_*.bin).
EOF
}

die() { echo "error: $*" >&2; exit 1; }

cd "$(dirname "$0")/.." || die "cannot enter the repository root"

SEEDS=1
DATASETS="wikitext2 ptb pg19"
POS_LIST="" POS_GIVEN=0
SCALE=paper
MIRROR=""
OUT=""
SMOOTH=""
JOBS=1
BUILD=1
DRY=0
WAIT=0
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --seeds|--datasets|--pos|--scale|--mirror|--out|--smooth|--jobs)
      [ $# -ge 2 ] || die "$1 needs a value (see --help)"
      case "$1" in
        --seeds) SEEDS=$2 ;; --datasets) DATASETS=$2 ;; --pos) POS_LIST=$2 POS_GIVEN=1 ;;
        --scale) SCALE=$2 ;; --mirror) MIRROR=$2 ;; --out) OUT=$2; [ -n "$OUT" ] || die "--out is empty" ;; --smooth) SMOOTH=$2 ;;
        --jobs) JOBS=$2 ;;
      esac
      shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --dry-run) DRY=1; shift ;;
    --wait) WAIT=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

[[ "$SEEDS" =~ ^[1-9][0-9]*$ ]] || die "--seeds must be a positive integer, got '$SEEDS'"
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "--jobs must be a positive integer, got '$JOBS'"
[ -n "$SMOOTH" ] && { [[ "$SMOOTH" =~ ^[1-9][0-9]*$ ]] || die "--smooth must be a positive integer"; }
case "$SCALE" in
  paper) SCALE_CONFIG=configs/paper.json; SMOOTH=${SMOOTH:-$PAPER_SMOOTH}; OUT=${OUT:-runs/paper} ;;
  cpu) SCALE_CONFIG=configs/cpu_small.json; SMOOTH=${SMOOTH:-$CPU_SMOOTH}; OUT=${OUT:-runs/cpu} ;;
  *) die "--scale must be paper or cpu, got '$SCALE'" ;;
esac
[ -n "$DATASETS" ] || die "--datasets is empty"
[ "$POS_GIVEN" = 0 ] || [ -n "$POS_LIST" ] || die "--pos is empty"
for d in $DATASETS; do [[ "$d" =~ ^[A-Za-z0-9_.-]+$ ]] || die "bad dataset name '$d'"; done

PYTHON=${PYTHON:-$(scripts/pick_python.sh)}
# --device cpu in ARGS: the trainer make run trains with (make cpu: build_cpu/, no CUDA backend,
# no nvcc run), not make's whole build with the CUDA backend and the tests
BUILT=$(scripts/pick_build.sh "${EXTRA[@]}")
CPU_ONLY=0
[ "$BUILT" = build_cpu ] && CPU_ONLY=1
TRAIN=${TRAIN:-$BUILT/train}
DATA=${DATA:-data}
CONFIG=${CONFIG:-$SCALE_CONFIG}
[ -f "$CONFIG" ] || die "$CONFIG not found (the --scale $SCALE preset)"

# run CMD...: echo it; run it unless --dry-run
run() {
  echo "+ $*"
  [ "$DRY" = 1 ] || "$@"
}

# --- build, then the schemes asked for: those src/pos.h defines (build/train --list-pos)
if [ "$BUILD" = 1 ] && [ "$CPU_ONLY" = 1 ]; then
  run make cpu CPU_BUILD="$(dirname "$TRAIN")" || die "build failed"
elif [ "$BUILD" = 1 ]; then
  run make BUILD="$(dirname "$TRAIN")" || die "build failed"
fi
if [ -x "$TRAIN" ]; then
  known=$("$TRAIN" --list-pos) || die "$TRAIN --list-pos failed"
  [ "$POS_GIVEN" = 1 ] || POS_LIST="$(echo $known) crope=rope"
  for p in $POS_LIST; do
    for scheme in ${p%%=*} ${p#*=}; do
      grep -qx -- "$scheme" <<<"$known" || die "unknown pos '$scheme' (one of: $(echo $known))"
    done
  done
elif [ "$DRY" = 0 ] || [ "$POS_GIVEN" = 0 ]; then
  die "$TRAIN not found or not executable"
fi

# --- data
for d in $DATASETS; do
  if compgen -G "$DATA/$d/${d}_train_*.bin" >/dev/null && compgen -G "$DATA/$d/${d}_val_*.bin" >/dev/null; then
    continue
  fi
  echo "== preparing $DATA/$d"
  if [ -n "$MIRROR" ]; then
    run "$PYTHON" data/prepare_data.py "$d" --mirror "$MIRROR" --out "$DATA/$d" || die "preparing $d failed"
  else
    run "$PYTHON" data/prepare_data.py "$d" --out "$DATA/$d" || die "preparing $d failed"
  fi
done

# --- one runner per OUT: a second one would take the first's live runs for cut ones. The flock
# on OUT/runner.lock goes with this process (its trainers do not inherit it); --wait queues. The
# file goes at exit, the lock still held: a lock taken on the removed file is taken again.
if [ "$DRY" = 0 ]; then
  mkdir -p "$OUT" || die "cannot create $OUT"
  while :; do
    exec 9>>"$OUT/runner.lock" || die "cannot open $OUT/runner.lock"
    if ! flock -n 9; then
      holder=$(cat "$OUT/runner.lock" 2>/dev/null)
      [ "$WAIT" = 1 ] || die "$OUT is in use by another runner (pid ${holder:-unknown}): wait for it, give another --out, or add --wait"
      echo "== waiting for the runner using $OUT (pid ${holder:-unknown})"
      flock 9 || die "cannot lock $OUT/runner.lock"
    fi
    [ "$OUT/runner.lock" -ef /dev/fd/9 ] && break
  done
  echo $$ >"$OUT/runner.lock"
  trap 'rm -f "$OUT/runner.lock"' EXIT
  # a run folder a trainer still holds (one this runner did not start) is never moved or resumed
  for s in $(seq 1 "$SEEDS"); do
    for d in $DATASETS; do
      for p in $POS_LIST; do
        l="$OUT/$d-$p-s$s/lock"
        if [ -e "$l" ] && ! flock -n "$l" true 2>/dev/null; then
          die "$OUT/$d-$p-s$s is in use by a trainer (pid $(cat "$l" 2>/dev/null)): wait for it to end, or stop it (kill -INT)"
        fi
      done
    done
  done
fi

# --- runs: seed outermost, so every comparison has one seed before any has two
# several runs at once: one OpenMP thread each (runs side by side use the cores better than
# threads), unless the caller set OMP_NUM_THREADS
[ "$JOBS" -gt 1 ] && export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
n_total=$(( SEEDS * $(wc -w <<<"$DATASETS") * $(wc -w <<<"$POS_LIST") ))
i=0 failed=() dirs=() pids=() piddirs=() pidstart=()

# Ctrl-C / SIGTERM: each running trainer gets it once (it finishes its step, writes a checkpoint
# and exits), then this script ends as a process stopped by that signal. The trainers run in
# their own process groups (set -m below), so a Ctrl-C reaches them only from here: a second
# signal would end them at once, without their checkpoint.
stop_runs() {
  trap '' INT TERM
  echo "== stopped by SIG$1: waiting for ${#pids[@]} run(s) to checkpoint; run this command again to resume" >&2
  for p in "${pids[@]}"; do kill -"$1" "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p"; done
  exit "$2"
}
trap 'stop_runs INT 130' INT
trap 'stop_runs TERM 143' TERM

# finish_oldest: wait for the oldest run started, and say how it went
finish_oldest() {
  local dir=${piddirs[0]} start=${pidstart[0]}
  if wait "${pids[0]}"; then
    echo "   $dir done in $(( $(date +%s) - start )) s"
  else
    echo "   $dir FAILED; last lines of $dir.txt:" >&2
    tail -n 5 "$dir.txt" >&2
    failed+=("$dir")
  fi
  pids=("${pids[@]:1}") piddirs=("${piddirs[@]:1}") pidstart=("${pidstart[@]:1}")
}

for s in $(seq 1 "$SEEDS"); do
  for d in $DATASETS; do
    for p in $POS_LIST; do
      i=$((i + 1))
      dir="$OUT/$d-$p-s$s"
      dirs+=("$dir")
      # what a new run gets: the config file, these keys, and the ARGS after --
      new=(--pos "${p%%=*}" --train_data "$DATA/$d/${d}_train_*.bin" --val_data "$DATA/$d/${d}_val_*.bin" --seed "$s")
      [[ $p == *=* ]] && new+=(--match_params "${p#*=}")  # A=B: A at B's parameter count
      state=missing
      if [ -e "$dir" ]; then
        sets=() args=("${new[@]}" "${EXTRA[@]}")
        for ((k = 0; k < ${#args[@]}; k++)); do  # --key value / --key=value as KEY=VALUE; flags left out
          a=${args[k]}
          [[ $a == --* ]] || continue
          if [[ $a == *=* ]]; then sets+=(--set "${a#--}")
          elif [ $((k + 1)) -lt ${#args[@]} ] && [[ ${args[k + 1]} != --* ]]; then sets+=(--set "${a#--}=${args[k + 1]}"); k=$((k + 1))
          fi
        done
        line=$("$PYTHON" scripts/compare_runs.py --status "$dir" --plan "$CONFIG" "${sets[@]}" 2>&1)
        state=${line%% *}
        [ "$state" = differs ] &&
          die "$dir was trained with another config than this command's (${line#* "$dir": }); give another --out, or remove it"
      fi
      tag="[$i/$n_total] $d $p seed $s"
      if [ "$state" = complete ]; then
        echo "== $tag: complete, skipped"
        continue
      fi
      [ "$DRY" = 1 ] || [ ${#pids[@]} -lt "$JOBS" ] || finish_oldest  # they take about as long: the oldest ends first
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
        cmd=("$TRAIN" --config "$CONFIG" "${new[@]}" --run_dir "$dir" "${EXTRA[@]}")
      fi
      if [ "$DRY" = 1 ]; then
        echo "+ ${cmd[*]}"
        continue
      fi
      set -m  # its own process group, and SIGINT not ignored as a background job's would be
      "${cmd[@]}" 9>&- >>"$dir.txt" 2>&1 &
      pids+=($!) piddirs+=("$dir") pidstart+=("$(date +%s)")
      set +m
    done
  done
done
while [ ${#pids[@]} -gt 0 ]; do finish_oldest; done

# --- comparison over every run that has a log
have=()
for dir in "${dirs[@]}"; do [ -f "$dir/log.jsonl" ] && have+=("$dir"); done
if [ "$DRY" = 1 ]; then
  echo "+ $PYTHON scripts/compare_runs.py ${dirs[*]} --out $OUT/compare --smooth $SMOOTH"
elif [ ${#have[@]} -gt 0 ]; then
  echo "== comparing ${#have[@]} runs"
  "$PYTHON" scripts/compare_runs.py "${have[@]}" --out "$OUT/compare" --smooth "$SMOOTH" --summary \
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
