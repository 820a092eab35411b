#!/usr/bin/env bash
# The extrapolation table of a folder of finished runs: each rope / crope run's last checkpoint
# evaluated under each RoPE scaling (build/train --eval_only: no retraining), then every run's
# final validation loss per multiple of the training length (scripts/compare_runs.py
# --extrapolation), with --finetune the same runs fine-tuned at a longer length as rows of their
# own. Resumable: an evaluation or a fine-tuning already done is skipped, a cut one continued.
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

With --finetune "A B", each of those runs is also fine-tuned at M = --mult times
its seq_len under each scaling of the list (none: without one), the tokens per
step kept (batch_size / M), from its last checkpoint:
  TRAIN --config RUN/config.json --init_from RUN/CKPT/model.safetensors
        --seq_len M*T --batch_size B/M --steps N --lr LR --schedule constant
        [--rope_scaling S --rope_scaling_factor M] --run_dir FT ARGS...
into FT = RUNS_DIR/finetuned/NAME-ftMx-S (output in FT.txt). The table then has
a row per fine-tuned scheme and scaling ("rope, linear, factor 4, fine-tuned at
256"), its columns still multiples of the first training length, its
differences (OUT.md) taken against RoPE fine-tuned alike. A finished fine-tuning
is skipped, a cut one resumed from its checkpoint (build/train --resume), one
cut before any checkpoint moved aside (FT.stale-TIME) and started again. Ctrl-C
stops the running one after a checkpoint: run the same command again to go on.

options:
  --scalings "A B"   rope_scaling values (default: "linear ntk dynamic yarn llama3"; "none"
                     evaluates without a scaling key, as the run was trained)
  --pos "A B"        schemes evaluated under the scalings     (default "rope crope")
  --out PREFIX       the comparison's outputs           (default RUNS_DIR/scalings)
  --finetune "A B"   fine-tune under these scalings too (none linear ntk dynamic yarn llama3)
  --mult M           fine-tuning length, times the run's seq_len          (default 4)
  --ft_steps N       fine-tuning steps                                    (default 200)
  --ft_lr LR         fine-tuning learning rate, constant                  (default 1e-4)
  --dry-run          print what would run, run nothing
  -h, --help         this text
  -- ARGS...         passed on to every evaluation (e.g. --device cpu)
Environment: PYTHON (default: scripts/pick_python.sh), TRAIN (default build/train;
build_cpu/train with --device cpu in ARGS).
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
scalings="linear ntk dynamic yarn llama3" pos="rope crope" out="" dry=0
finetune="" mult=4 ft_steps=200 ft_lr=1e-4
while [ $# -gt 0 ]; do
  case $1 in
    --scalings) [ $# -ge 2 ] || die "the value of --scalings is missing"; scalings=$2; shift 2 ;;
    --pos) [ $# -ge 2 ] || die "the value of --pos is missing"; pos=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die "the value of --out is missing"; out=$2; shift 2 ;;
    --finetune) [ $# -ge 2 ] || die "the value of --finetune is missing"; finetune=$2; shift 2 ;;
    --mult) [ $# -ge 2 ] || die "the value of --mult is missing"; mult=$2; shift 2 ;;
    --ft_steps) [ $# -ge 2 ] || die "the value of --ft_steps is missing"; ft_steps=$2; shift 2 ;;
    --ft_lr) [ $# -ge 2 ] || die "the value of --ft_lr is missing"; ft_lr=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[ -d "$runs_dir" ] || die "no such folder: $runs_dir"
[ -n "$scalings" ] || die "--scalings names no scaling"
{ [[ $mult =~ ^[1-9][0-9]*$ ]] && [ "$mult" -ge 2 ]; } || die "--mult must be an integer of at least 2, got '$mult'"
[[ $ft_steps =~ ^[1-9][0-9]*$ ]] || die "--ft_steps must be a positive integer, got '$ft_steps'"
for s in $finetune; do
  case $s in none | linear | ntk | dynamic | yarn | llama3) ;; *) die "--finetune: unknown rope_scaling '$s' (none linear ntk dynamic yarn llama3)" ;; esac
done
out=${out:-$runs_dir/scalings}
PYTHON=${PYTHON:-$(scripts/pick_python.sh)}
TRAIN=${TRAIN:-$(scripts/pick_build.sh "$@")/train}  # build_cpu/ for -- --device cpu, as reproduce_paper.sh
[ -x "$TRAIN" ] || die "$TRAIN is not built (make; make cpu builds build_cpu/ alone)"
# a build without the key refuses --rope_scaling: say so once, before any evaluation
for s in $scalings $finetune; do
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

done_n=0 skipped=0 bases=()
# the values of keys of RUN's config.json, space-separated ("" for a key it lacks)
config_key() { "$PYTHON" -c 'import json, sys; c = json.load(open(sys.argv[1])); print(*(c.get(k, "") for k in sys.argv[2:]))' "$1/config.json" "${@:2}"; }
while read -r state run; do
  [ "$state" = complete ] || continue
  p=$(config_key "$run" pos) || die "cannot read $run/config.json"
  [[ " $pos " == *" $p "* ]] || continue
  [ -f "$run/latest" ] || { echo "note: $run has no checkpoint: not evaluated" >&2; continue; }
  [ -n "$finetune" ] && bases+=("$run")  # the runs fine-tuned below
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


# --- fine-tuning: RUN's config at mult x its length and batch_size / mult
tuned=()
[ -n "$finetune" ] && [ $dry = 0 ] && mkdir -p "$runs_dir/finetuned"
for run in "${bases[@]}"; do
  TB=$(config_key "$run" seq_len batch_size) || die "cannot read $run/config.json"
  read -r T B <<<"$TB"
  [ $((B % mult)) = 0 ] || die "$run: batch_size $B is not a multiple of --mult $mult, so the tokens per step cannot stay the same"
  for s in $finetune; do
    ft=$runs_dir/finetuned/$(basename "$run")-ft${mult}x-$s
    tuned+=("$ft")
    state=missing
    [ -e "$ft" ] && state=$("$PYTHON" scripts/compare_runs.py --status "$ft" | cut -d' ' -f1)
    [ "$state" = complete ] && { skipped=$((skipped + 1)); continue; }
    if [ "$state" = partial ] && [ -e "$ft/latest" ]; then
      cmd=("$TRAIN" --resume "$ft")
    else
      key=(--rope_scaling "$s" --rope_scaling_factor "$mult")
      [ "$s" = none ] && key=()
      cmd=("$TRAIN" --config "$run/config.json" --init_from "$run/$(cat "$run/latest")/model.safetensors"
        --seq_len $((T * mult)) --batch_size $((B / mult)) --steps "$ft_steps" --lr "$ft_lr" --schedule constant
        "${key[@]}" --run_dir "$ft" "$@")
    fi
    if [ $dry = 1 ]; then echo "${cmd[*]}"; continue; fi
    if [ -e "$ft" ] && [ "${cmd[1]}" != --resume ]; then
      mv "$ft" "$ft.stale-$(date +%Y%m%d-%H%M%S)" || die "cannot move $ft aside"
    fi
    echo "fine-tune: $run at $((T * mult)) under $s"
    "${cmd[@]}" >>"$ft.txt" 2>&1
    rc=$?
    [ $rc = 130 ] || [ $rc = 143 ] && { echo "stopped: run the same command again to go on" >&2; exit $rc; }
    [ $rc = 0 ] || die "$(grep -m1 '^error:' "$ft.txt" | sed 's/^error: //') (${cmd[*]}; output in $ft.txt)"
    done_n=$((done_n + 1))
  done
done

[ $dry = 1 ] && exit 0
echo "evaluations and fine-tunings: $done_n run, $skipped already done"
"$PYTHON" scripts/compare_runs.py "${runs[@]}" "${tuned[@]}" --out "$out" --extrapolation --summary >/dev/null ||
  die "compare_runs.py failed"
echo "wrote ${out}_extrapolation.md, $out.md, ${out}_lengths.png"
