#!/usr/bin/env bash
# The main job (`make run`): the CRoPE paper's synthetic "token-dependent position
# comparison" task (data/make_synthetic.py) trained with learned, rope and
# crope positions, three seeds each, on the CPU; then the comparison table
# (loss and accuracy after the markers) and figure. No network, no ../shared.
#   scripts/run_synthetic.sh [--seeds "1 2 3"] [--pos "learned rope crope"] [--out runs/synthetic]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$(scripts/pick_python.sh)}
TRAIN=${TRAIN:-build/train}
seeds="1 2 3"
positions="learned rope crope"
out=runs/synthetic
while [ $# -gt 0 ]; do
  case $1 in
    --seeds) seeds=$2; shift 2 ;;
    --pos) positions=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "error: unknown argument '$1' (see --help)" >&2; exit 1 ;;
  esac
done

data=data/synthetic
[ -f $data/meta.json ] || "$PYTHON" data/make_synthetic.py --out $data
mkdir -p "$out"
runs=()
for seed in $seeds; do
  for pos in $positions; do
    run="$out/$pos-s$seed"
    rm -rf "$run"
    start=$(date +%s)
    "$TRAIN" --config configs/synthetic.json --pos "$pos" --seed "$seed" --run_dir "$run" >"$run.txt" 2>&1 ||
      { echo "error: $pos seed $seed failed, see $run.txt" >&2; tail -3 "$run.txt" >&2; exit 1; }
    echo "$pos seed $seed: $(grep '^val' "$run.txt" | tail -1 | cut -d'|' -f4-) ($(( $(date +%s) - start )) s)"
    runs+=("$run")
  done
done
"$PYTHON" scripts/compare_runs.py "${runs[@]}" --out "$out/compare"
echo "figure: $out/compare.png (and .svg); table: $out/compare.md"
