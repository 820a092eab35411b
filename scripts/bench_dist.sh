#!/usr/bin/env bash
# CPU data-parallel benchmark: tokens/s of 1 process and of N ranks under mpirun (ZeRO-1 off and
# on) at the same global batch, and the time of the gradient sum per step (comm_ms in the log).
# The model is configs/cpu_small.json's (the paper's: 7.2M parameters, 28.9 MB of fp32 gradients).
#   scripts/bench_dist.sh [--ranks N] [--steps S] [--data DIR]    (defaults 2, 20, data/wikitext2)
# On a machine with fewer cores than ranks x OpenMP threads expect no gain: the point is the
# cost of the collectives. Prints a Markdown table.
set -u
cd "$(dirname "$0")/.." || exit 1
TRAIN=${TRAIN:-build/train} RANKS=2 STEPS=20 DATA=data/wikitext2
while [ $# -gt 0 ]; do
  case $1 in
    --ranks) RANKS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    *) echo "error: unknown argument '$1' (usage: scripts/bench_dist.sh [--ranks N] [--steps S] [--data DIR])" >&2; exit 2 ;;
  esac
done
command -v mpirun >/dev/null || { echo "error: mpirun not found (install openmpi-bin libopenmpi-dev, rebuild)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args="--config configs/cpu_small.json --train_data $DATA --val_data '' --device cpu --steps $STEPS --eval_every 0
  --checkpoint_every 0"
# median of a log field over the steps after the first 3 (warm-up)
median() { grep '"type":"train"' "$1/log.jsonl" | tail -n +4 | sed "s/.*\"$2\":\([0-9.e+-]*\).*/\1/" | sort -g |
  awk '{a[NR] = $1} END {print NR ? a[int((NR + 1) / 2)] : "n/a"}'; }
echo "| run | global batch | step ms (median) | tokens/s | gradient sum ms (median) |"
echo "|---|---|---|---|---|"
for run in "1 process::" "$RANKS ranks:mpirun --oversubscribe -np $RANKS:0" "$RANKS ranks, ZeRO-1:mpirun --oversubscribe -np $RANKS:1"; do
  IFS=: read -r name launch zero <<<"$run"
  dir="$tmp/run$RANDOM"
  # shellcheck disable=SC2086
  if ! eval $launch $TRAIN $args ${zero:+--zero $zero} --run_dir "$dir" >"$dir.txt" 2>&1; then
    echo "error: $name failed: $(tail -2 "$dir.txt")" >&2; exit 1
  fi
  ms=$(median "$dir" step_ms)
  comm=$([ -n "$launch" ] && printf "%.1f" "$(median "$dir" comm_ms)" || echo "-")
  B=$(sed -n 's/.*"batch_size": *\([0-9]*\).*/\1/p' "$dir/config.json") T=$(sed -n 's/.*"seq_len": *\([0-9]*\).*/\1/p' "$dir/config.json")
  printf "| %s | %s x %s | %.1f | %.0f | %s |\n" "$name" "$B" "$T" "$ms" "$(awk "BEGIN{print $B * $T / ($ms / 1000)}")" "$comm"
done
