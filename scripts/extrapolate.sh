#!/usr/bin/env bash
# The extrapolation table of a folder of finished runs: each rope / crope run's last checkpoint
# evaluated under each RoPE scaling (build/train --eval_only: no retraining), then every run's
# final validation loss per multiple of the training length (scripts/compare_runs.py
# --extrapolation). Resumable: an evaluation already written is skipped.
set -u

usage() {
  cat <<'EOF'
usage: scripts/extrapolate.sh RUNS_DIR [options] [-- EXTRA_EVAL_ARGS...]

For every finished run in RUNS_DIR (compare_runs.py --status: complete) of a
scheme of --pos that has a checkpoint, and each scaling of --scalings:
  TRAIN --eval_only RUN --rope_scaling S --eval_log RUN/eval_S.jsonl ARGS...
(the run's config otherwise: its eval_seq_lens, eval_batches, val_data), skipped
when RUN/eval_S.jsonl exists (written under another name and renamed when
complete); then scripts/compare_runs.py on all runs in RUNS_DIR with
--extrapolation: OUT_extrapolation.md (a table per dataset, rows scheme and
scaling, columns the multiples of the training length, mean [95 % interval]
over seeds), OUT.md, OUT_lengths.png/.svg (loss against length, one line per row).

options:
  --scalings "A B"   rope_scaling values (default: "linear ntk dynamic yarn"; "none"
                     evaluates without a scaling key, as the run was trained)
  --pos "A B"        schemes evaluated under the scalings     (default "rope crope")
  --out PREFIX       the comparison's outputs      (default RUNS_DIR/extrapolation)
  --dry-run          print what would run, run nothing
  -h, --help         this text
  -- ARGS...         passed on to every evaluation (e.g. --device cpu)
Environment: PYTHON (default: scripts/pick_python.sh), TRAIN (default build/train).
EOF
}

cd "$(dirname "$0")/.." || exit 1
die() {
  echo "error: $*" >&2
  exit 1
}
[ $# -ge 1 ] || { usage >&2; die "give RUNS_DIR, a folder of run folders"; }
case $1 in -h | --help) usage; exit 0 ;; esac
runs_dir=${1%/}
shift
scalings="linear ntk dynamic yarn" pos="rope crope" out="" dry=0
while [ $# -gt 0 ]; do
  case $1 in
    --scalings) [ $# -ge 2 ] || die "the value of --scalings is missing"; scalings=$2; shift 2 ;;
    --pos) [ $# -ge 2 ] || die "the value of --pos is missing"; pos=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die "the value of --out is missing"; out=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[ -d "$runs_dir" ] || die "no such folder: $runs_dir"
[ -n "$scalings" ] || die "--scalings names no scaling"
out=${out:-$runs_dir/extrapolation}
PYTHON=${PYTHON:-$(scripts/pick_python.sh)}
TRAIN=${TRAIN:-build/train}
[ -x "$TRAIN" ] || die "$TRAIN is not built (make; or TRAIN=build_cpu/train)"
# a build without the key refuses --rope_scaling: say so once, before any evaluation
for s in $scalings; do
  if [ "$s" != none ] && ! "$TRAIN" --help | grep -q -- '--rope_scaling '; then
    die "$TRAIN has no rope_scaling key: it can evaluate --scalings none only"
  fi
done

shopt -s nullglob
runs=()
for d in "$runs_dir"/*/; do
  [ -f "$d/log.jsonl" ] && runs+=("${d%/}")
done
[ ${#runs[@]} -gt 0 ] || die "no run folders (with a log.jsonl) in $runs_dir"

done_n=0 skipped=0
while read -r state run; do
  [ "$state" = complete ] || continue
  p=$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("pos", ""))' "$run/config.json") ||
    die "cannot read $run/config.json"
  [[ " $pos " == *" $p "* ]] || continue
  [ -f "$run/latest" ] || { echo "note: $run has no checkpoint: not evaluated" >&2; continue; }
  for s in $scalings; do
    log=$run/eval_$s.jsonl
    if [ -f "$log" ]; then skipped=$((skipped + 1)); continue; fi
    key=(--rope_scaling "$s")
    [ "$s" = none ] && key=()
    cmd=("$TRAIN" --eval_only "$run" "${key[@]}" --eval_log "$log.part" "$@")
    if [ $dry = 1 ]; then echo "${cmd[*]}"; continue; fi
    rm -f "$log.part"
    echo "eval: $run under $s"
    "${cmd[@]}" >"$log.txt" 2>&1 || die "$(grep -m1 '^error:' "$log.txt" | sed 's/^error: //') (${cmd[*]}; output in $log.txt)"
    mv "$log.part" "$log"
    done_n=$((done_n + 1))
  done
done < <("$PYTHON" scripts/compare_runs.py --status "${runs[@]}")

[ $dry = 1 ] && exit 0
echo "evaluations: $done_n run, $skipped already done"
"$PYTHON" scripts/compare_runs.py "${runs[@]}" --out "$out" --extrapolation --summary >/dev/null ||
  die "compare_runs.py failed"
echo "wrote ${out}_extrapolation.md, $out.md, ${out}_lengths.png"
