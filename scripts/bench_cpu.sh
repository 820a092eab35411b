#!/usr/bin/env bash
# CPU training throughput of build/train, side by side with the same step's matrix products
# alone (the BLAS limit) and with PyTorch's eager CPU training step of the same model
# (scripts/torch_reference.py), for pos = learned, rope, crope at:
#   paper:     V=50257, C=128, L=4,  H=4,  B=4, T=256
#   gpt2-124M: V=50257, C=768, L=12, H=12, B=4, T=64
# Random-token shards are written to a temp folder; the trainer runs N steps with no eval
# and no checkpoints; the first 2 steps are warm-up and are not counted; the table shows
# the median over the rest. Right after each trainer run, build/test/bench_gemms (test/bench_gemms.cpp)
# runs one step of the same model through a backend that notes every GEMM it makes (attention's
# blocks and the LM head's tiles too), then times exactly those GEMMs through the same BLAS on the
# step's own buffers, the ones from parallel regions on their threads (median of 5 passes):
# "GEMMs alone" and its share of the trainer's step. The trainer's GFLOP/s (its log's flops_per_s,
# MODEL.md "FLOPs") stands beside the machine's own: one large single-precision product through
# the same BLAS (bench_gemms --peak), timed once in the same run. PyTorch runs 2 warm-up + (N-2) timed steps with the same B, T, and the
# trainer's OpenMP waiting (GOMP_SPINCOUNT=1000 unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set).
# Prints a Markdown table and writes it to bench_cpu.md beside the trainer (build/bench_cpu.md).
#
# usage: scripts/bench_cpu.sh [--quick] [--no-torch]      (make bench ARGS="--quick --no-torch")
#   --quick     fewer steps and GEMM passes (a rough number in about a third of the time)
#   --no-torch  skip the PyTorch column
# Environment: TRAIN (default build/train), BENCH_GEMMS (default test/bench_gemms beside it).
# Run it on a quiet machine: other jobs on the cores skew every number.
set -euo pipefail
cd "$(dirname "$0")/.."

QUICK=0
TORCH=1
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    --no-torch) TORCH=0 ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "error: unknown option '$arg' (expected --quick, --no-torch)" >&2; exit 1 ;;
  esac
done

TRAIN=${TRAIN:-build/train}
BENCH_GEMMS=${BENCH_GEMMS:-$(dirname "$TRAIN")/test/bench_gemms}
for b in "$TRAIN" "$BENCH_GEMMS"; do
  if [[ ! -x $b ]]; then
    echo "error: $b not found; build it first (make, or make bench)" >&2
    exit 1
  fi
done
PY=$(scripts/pick_python.sh)
WARMUP=2  # steps not counted: first-touch allocation, cold caches

# name C L H B T steps quick_steps
SETTINGS=(
  "paper 128 4 4 4 256 8 4"
  "gpt2-124M 768 12 12 4 64 5 3"
)
REPS=5  # timed passes over a step's GEMMs
[[ $QUICK == 1 ]] && REPS=3
POSES=(learned rope crope)

# PyTorch: the chosen interpreter if it has torch, else Debian's python3.
TORCH_PY=""
TORCH_NOTE="not installed"
if [[ $TORCH == 0 ]]; then
  TORCH_NOTE="skipped"
else
  for p in "$PY" /usr/bin/python3 python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch' 2>/dev/null; then TORCH_PY=$p; break; fi
  done
fi

# PyTorch waits in OpenMP as the trainer does (a short spin, then sleep: GOMP_SPINCOUNT=1000, set by
# the trainer for itself, src/config.cpp setup_process) unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is
# set: libgomp's default long spin made its step 4-5x slower while other jobs shared the cores.
TORCH_ENV=(env)
[[ -z ${OMP_WAIT_POLICY:-} && -z ${GOMP_SPINCOUNT:-} ]] && TORCH_ENV+=(GOMP_SPINCOUNT=1000)

TMP=$(mktemp -d "${TMPDIR:-/tmp}/bench_cpu.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

load1=$(cut -d' ' -f1 /proc/loadavg)
if awk -v l="$load1" 'BEGIN { exit !(l >= 1.0) }'; then
  echo "warning: load average is $load1; other jobs will skew the numbers" >&2
fi

# Random tokens, more than one pass of the longest run needs (the loader wraps anyway).
mkdir -p "$TMP/data"
PYTHONPATH=data "$PY" - "$TMP/data/rand_train_000000.bin" <<'EOF'
import sys
import numpy as np
from shards import write_shard
rng = np.random.default_rng(1337)
write_shard(sys.argv[1], rng.integers(0, 50257, size=200_000, dtype=np.int64))
EOF

# median tokens/s and ms/step of log.jsonl's train records after the warm-up steps
median_of_log() {
  "$PY" - "$1" "$WARMUP" <<'EOF'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
train = [r for r in recs if r.get("type") == "train"][int(sys.argv[2]):]
if not train:
    sys.exit("error: no train records after the warm-up steps in " + sys.argv[1])
print(f'{statistics.median(r["tokens_per_s"] for r in train):.1f} '
      f'{statistics.median(r["step_ms"] for r in train):.1f} '
      f'{statistics.median(r["flops_per_s"] for r in train) / 1e9:.1f}')
EOF
}

ROWS=()
start=$SECONDS
# the machine's single-precision GEMM rate through the same BLAS, the trainer's GFLOP/s limit
if ! peak=$("$BENCH_GEMMS" --peak --reps "$REPS" 2>"$TMP/peak.err" | tail -n 1); then
  echo "error: $BENCH_GEMMS --peak failed: $(tail -n 1 "$TMP/peak.err")" >&2
  exit 1
fi
sgemm=$(awk '$1 == "sgemm_gflops" { print $2 }' <<<"$peak")
for s in "${SETTINGS[@]}"; do
  read -r name C L H B T steps qsteps <<<"$s"
  [[ $QUICK == 1 ]] && steps=$qsteps
  for pos in "${POSES[@]}"; do
    run="$TMP/run_${name}_${pos}"
    t0=$SECONDS
    model=(--device cpu --pos "$pos" --n_layer "$L" --n_head "$H" --n_embd "$C" --batch_size "$B" --seq_len "$T"
           --train_data "$TMP/data")
    if ! "$TRAIN" "${model[@]}" --steps "$steps" --eval_every 0 --checkpoint_every 0 \
         --run_dir "$run" >"$TMP/train.out" 2>&1; then
      echo "error: $TRAIN failed for $name pos=$pos:" >&2
      tail -n 5 "$TMP/train.out" >&2
      exit 1
    fi
    med=$(median_of_log "$run/log.jsonl") || exit 1
    read -r tr_tps tr_ms tr_gflops <<<"$med"
    of_peak=$(awk -v t="$tr_gflops" -v p="$sgemm" 'BEGIN { printf "%.0f %%", 100 * t / p }')
    # the same step's GEMMs alone, through the same BLAS, right after the trainer's steps
    if ! gemm=$("$BENCH_GEMMS" --reps "$REPS" "${model[@]}" 2>"$TMP/gemms.err" | tail -n 1); then
      echo "error: $BENCH_GEMMS failed for $name pos=$pos: $(tail -n 1 "$TMP/gemms.err")" >&2
      exit 1
    fi
    gemm_ms=$(awk '$1 == "gemm_ms" { print $2 }' <<<"$gemm")
    share=$(awk -v g="$gemm_ms" -v t="$tr_ms" 'BEGIN { printf "%.0f %%", 100 * g / t }')
    t_train=$((SECONDS - t0))

    pt_tps="$TORCH_NOTE"
    ratio="-"
    t1=$SECONDS
    if [[ -n $TORCH_PY ]]; then
      if out=$("${TORCH_ENV[@]}" "$TORCH_PY" scripts/torch_reference.py --device cpu --pos "$pos" --n_layer "$L" \
               --n_head "$H" --n_embd "$C" --batch_size "$B" --seq_len "$T" \
               --warmup "$WARMUP" --steps $((steps - WARMUP)) 2>"$TMP/torch.err"); then
        pt_tps=$(printf '%s\n' "$out" | tail -n 1 | "$PY" -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["tokens_per_s"])')
        ratio=$(awk -v a="$tr_tps" -v b="$pt_tps" 'BEGIN { printf "%.2f", a / b }')
      else
        pt_tps="failed"
        echo "warning: torch_reference.py failed for $name pos=$pos: $(tail -n 1 "$TMP/torch.err")" >&2
      fi
    fi
    echo "  $name pos=$pos: trainer ${tr_tps} tok/s, GEMMs alone ${gemm_ms} ms (${t_train}s), pytorch ${pt_tps} ($((SECONDS - t1))s)" >&2
    ROWS+=("| $name (C=$C L=$L H=$H B=$B T=$T) | $pos | $tr_tps | $tr_ms | $gemm_ms | $share | $tr_gflops | $of_peak | $pt_tps | $ratio |")
  done
done

cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //' || true)
{
  echo "CPU training throughput, V=50257, $(nproc) cores${cpu:+ ($cpu)}, median after $WARMUP warm-up steps$([[ $QUICK == 1 ]] && echo ', --quick'), load $load1 at start, $(cut -d' ' -f1 /proc/loadavg) at the end, $((SECONDS - start)) s total"
  echo "GEMMs alone: the same step's matrix products through the same BLAS on its buffers (test/bench_gemms.cpp), median of $REPS passes; GEMMs / step: their share of the trainer's ms/step (100 % = the BLAS limit)"
  echo "trainer GFLOP/s: the step's FLOPs (MODEL.md) over its time; / SGEMM: its share of this machine's single-precision GEMM rate through the same BLAS, $sgemm GFLOP/s (a 2048^3 product, median of $REPS)"
  echo
  echo "| setting | pos | trainer tokens/s | trainer ms/step | GEMMs alone ms/step | GEMMs / step | trainer GFLOP/s | / SGEMM | PyTorch tokens/s | trainer / PyTorch |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  printf '%s\n' "${ROWS[@]}"
} | tee "$(dirname "$TRAIN")/bench_cpu.md.tmp"
mv "$(dirname "$TRAIN")/bench_cpu.md.tmp" "$(dirname "$TRAIN")/bench_cpu.md"
