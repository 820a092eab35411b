# build/train --eval_only RUN_DIR: the validation losses of a run's last checkpoint, bit-identical to
# those its training logged at its last step, in a log of its own with what was evaluated; nothing
# of the run folder changes.
source test/testlib.sh
TRAIN=${TRAIN:-build/train}
tmp=$(mktemp -d)
trap '[ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT

pattern_shards "$tmp" 0 0.1 16 20000 tiny_train:0:16000 tiny_val:16000:
data="--train_data $tmp/tiny_train_000000.bin --val_data $tmp/tiny_val_000000.bin"
tiny="--n_layer 2 --n_head 2 --n_embd 16 --vocab_size 16 --max_seq_len 32 --seq_len 16 --batch_size 4 --device cpu"
# val records' "seq_len loss" (the losses exactly as logged)
losses() { grep '"type":"val"' "$1" | sed 's/.*"loss":\([^,}]*\).*"seq_len":\([0-9]*\).*/\2 \1/'; }

for pos in rope learned; do
  run=$tmp/$pos
  $TRAIN $data $tiny --pos $pos --steps 12 --lr 3e-3 --eval_every 6 --eval_batches 3 --eval_seq_lens 16,32,64 \
    --checkpoint_every 12 --run_dir "$run" >"$tmp/$pos.txt" 2>&1
  before=$(ls "$run"; md5sum "$run/log.jsonl")
  $TRAIN --eval_only "$run" >"$tmp/$pos.eval.txt" 2>&1
  rc=$?
  trained=$(grep '"type":"val"' "$run/log.jsonl" | grep '"step":12' | sed 's/.*"loss":\([^,}]*\).*"seq_len":\([0-9]*\).*/\2 \1/')
  evaluated=$(losses "$run/eval.jsonl")
  if [ $rc -eq 0 ] && [ -n "$trained" ] && [ "$trained" = "$evaluated" ]; then pass "eval_only_same_losses_$pos"
  else fail "eval_only_same_losses_$pos" "rc $rc; trained at step 12: $trained; eval_only: $evaluated; $(tail -n 2 "$tmp/$pos.eval.txt")"; fi
  # the n/a lengths of learned positions are said as in training, and no step, sample or checkpoint ran
  if [ "$(grep -c '^val | step 12 ' "$tmp/$pos.eval.txt")" -eq 3 ] && ! grep -qE '^(step |checkpoint:|sample )' "$tmp/$pos.eval.txt"
  then pass "eval_only_prints_val_only_$pos"; else fail "eval_only_prints_val_only_$pos" "$(cat "$tmp/$pos.eval.txt")"; fi
  after=$(ls "$run" | grep -v '^eval.jsonl$'; md5sum "$run/log.jsonl")
  if [ -f "$run/log.jsonl" ] && [ "$before" = "$after" ]; then pass "eval_only_leaves_run_$pos"; else fail "eval_only_leaves_run_$pos" "$before -> $after"; fi
done

# the run's thread count: a run trained on one thread is evaluated on one (OpenBLAS's Haswell kernels
# round by thread count), unless OMP_NUM_THREADS asks for another, which is said
run=$tmp/one-thread
OMP_NUM_THREADS=1 $TRAIN $data $tiny --n_embd 64 --pos rope --steps 4 --eval_every 4 --eval_batches 3 --eval_seq_lens 16,32 \
  --checkpoint_every 4 --run_dir "$run" >/dev/null 2>&1
env -u OMP_NUM_THREADS $TRAIN --eval_only "$run" >"$tmp/t1.txt" 2>&1
trained=$(grep '"type":"val"' "$run/log.jsonl" | grep '"step":4' | sed 's/.*"loss":\([^,}]*\).*"seq_len":\([0-9]*\).*/\2 \1/')
if grep -q '"run_on":{[^}]*"threads":1' "$run/log.jsonl" && grep -q '| threads 1 (the run'"'"'s) |' "$tmp/t1.txt" &&
  [ -n "$trained" ] && [ "$trained" = "$(losses "$run/eval.jsonl")" ]
then pass eval_only_run_threads; else fail eval_only_run_threads "$(cat "$tmp/t1.txt"; losses "$run/eval.jsonl"; echo "trained: $trained")"; fi
OMP_NUM_THREADS=2 $TRAIN --eval_only "$run" --eval_log "$tmp/t2.jsonl" >"$tmp/t2.txt" 2>&1
if grep -q '| threads 2 (the run trained with 1: losses may differ from its own in the last digits) |' "$tmp/t2.txt"
then pass eval_only_other_threads_said; else fail eval_only_other_threads_said "$(cat "$tmp/t2.txt")"; fi

# overrides: another length and fewer batches are recorded as changes with each record, and the
# checkpoint evaluated; --eval_log puts the records elsewhere; --init_from picks the weights
run=$tmp/rope
$TRAIN --eval_only "$run" --eval_seq_lens 16,48 --eval_batches 2 --eval_log "$tmp/other.jsonl" >"$tmp/over.txt" 2>&1
first=$(head -n 1 "$tmp/other.jsonl")
val=$(grep -m1 '"type":"val"' "$tmp/other.jsonl")
if [[ $first == *'"type":"eval_only"'* ]] && [[ $val == *'"changes":{"eval_batches":[3,2],"eval_seq_lens":[[16,32,64],[16,48]]}'* ]] &&
  [[ $val == *"\"checkpoint\":\"$run/ckpt_000012/model.safetensors\""* ]] && [ "$(losses "$tmp/other.jsonl" | cut -d' ' -f1 | xargs)" = "16 48" ] &&
  grep -q "^eval_only: $run/ckpt_000012/model.safetensors (step 12) | differs from the run: eval_batches 3 -> 2" "$tmp/over.txt"
then pass eval_only_records_changes; else fail eval_only_records_changes "$(cat "$tmp/other.jsonl" "$tmp/over.txt")"; fi
$TRAIN $data $tiny --pos rope --steps 3 --eval_every 0 --checkpoint_every 3 --run_dir "$tmp/short" >/dev/null 2>&1
$TRAIN --eval_only "$run" --init_from "$tmp/short/ckpt_000003/model.safetensors" --eval_log "$tmp/init.jsonl" >/dev/null 2>&1
if [ "$(grep '"type":"val"' "$tmp/init.jsonl" | grep '"step":3,' | grep -c "\"checkpoint\":\"$tmp/short/ckpt_000003/")" -eq 3 ]
then pass eval_only_init_from; else fail eval_only_init_from "$(cat "$tmp/init.jsonl")"; fi

# scripts/extrapolate.sh: every finished rope run evaluated under each scaling once (a second call
# skips them), learned runs not; then the table with a row per scheme and scaling
runs=$tmp/runs
for r in rope-s1 rope-s2 learned-s1; do
  $TRAIN $data $tiny --pos ${r%-s*} --seed ${r#*-s} --steps 4 --eval_every 4 --eval_batches 2 --eval_seq_lens 16,32 \
    --checkpoint_every 4 --run_dir "$runs/$r" >/dev/null 2>&1
done
if "$TRAIN" --help | grep -q -- '--rope_scaling '; then scaling=ntk row="rope, ntk"; else scaling=none row="rope"; fi
export TRAIN
scripts/extrapolate.sh "$runs" --scalings $scaling -- --device cpu >"$tmp/x1.txt" 2>&1
rc=$?
scripts/extrapolate.sh "$runs" --scalings $scaling -- --device cpu >"$tmp/x2.txt" 2>&1
table=$(grep "^| $row |" "$runs/scalings_extrapolation.md" 2>/dev/null)
if [ $rc -eq 0 ] && [ -f "$runs/rope-s1/eval_$scaling.jsonl" ] && [ -f "$runs/rope-s2/eval_$scaling.jsonl" ] &&
  ! ls "$runs/learned-s1" | grep -q '^eval_' && grep -q "evaluations and fine-tunings: 2 run, 0 already done" "$tmp/x1.txt" &&
  grep -q "evaluations and fine-tunings: 0 run, 2 already done" "$tmp/x2.txt" && [[ $table == "| $row | 2 | "*" | "*" |" ]] &&
  grep -q "^| learned | 1 |" "$runs/scalings_extrapolation.md" &&
  grep -q "^wrote $runs/scalings_extrapolation.md, $runs/scalings.md, $runs/scalings_lengths.png$" "$tmp/x1.txt" &&
  [ ! -e "$runs/extrapolation_extrapolation.md" ]
then pass "extrapolate_sh_$scaling"; else fail "extrapolate_sh_$scaling" "rc $rc: $(cat "$tmp/x1.txt" "$tmp/x2.txt"; cat "$runs/scalings_extrapolation.md")"; fi
# a scaling the build does not know: the trainer's error, and the evaluation left to redo
if [ $scaling = none ]; then
  expect_fail extrapolate_sh_no_scaling_key "^error: .* has no rope_scaling key" -- scripts/extrapolate.sh "$runs" --scalings ntk
else
  expect_fail extrapolate_sh_bad_scaling "^error: .*rope_scaling" -- scripts/extrapolate.sh "$runs" --scalings nonsense -- --device cpu
fi

# --finetune: each rope run fine-tuned at 2x (batch halved) from its checkpoint under each scaling,
# learned's not; rows of their own, columns still multiples of the first length; done ones skipped
ft=$runs/finetuned
scripts/extrapolate.sh "$runs" --scalings $scaling --finetune "none linear" --mult 2 --ft_steps 8 -- --device cpu >"$tmp/f1.txt" 2>&1
rc=$?
cfg=$("$PYTHON" -c 'import json, sys; c = json.load(open(sys.argv[1])); print(c["seq_len"], c["batch_size"], c["rope_train_len"],
  c["rope_scaling"], c["rope_scaling_factor"], c["steps"], c["schedule"], c["init_from"]["path"])' "$ft/rope-s1-ft2x-linear/config.json" 2>&1)
x=$runs/scalings_extrapolation.md
if [ $rc -eq 0 ] && [ "$cfg" = "32 2 16 linear 2.0 8 constant $runs/rope-s1/ckpt_000004/model.safetensors" ] &&
  [ "$(ls "$ft" | grep -vc '\.txt$')" = 4 ] && grep -q "trained at T=16; fine-tuned rows then at T=32" "$x" &&
  grep -qE "^\| rope, linear, factor 2, fine-tuned at 32 \| 2 \| [0-9.]+ \[.*\] \| [0-9.]+ \[.*\] \|$" "$x" &&
  grep -qE "^\| rope, fine-tuned at 32 \| 2 \| " "$x" &&
  grep -q "rope, linear, factor 2, fine-tuned at 32 (vs rope, fine-tuned at 32)" "$runs/scalings.md"
then pass extrapolate_sh_finetune; else fail extrapolate_sh_finetune "rc $rc, config: $cfg; $(cat "$tmp/f1.txt" "$x")"; fi
# a fine-tuning cut after its checkpoint at step 4 is resumed, a finished one skipped
cut=$ft/rope-s2-ft2x-none
"$PYTHON" - "$cut" <<'PY'
import json, os, shutil, sys
d = sys.argv[1]
lines = open(d + "/log.jsonl").read().splitlines()
open(d + "/log.jsonl", "w").write("".join(l + "\n" for l in lines if json.loads(l).get("step", 0) <= 4))
shutil.rmtree(d + "/ckpt_000008")
open(d + "/latest", "w").write("ckpt_000004")
PY
scripts/extrapolate.sh "$runs" --scalings $scaling --finetune "none linear" --mult 2 --ft_steps 8 -- --device cpu >"$tmp/f2.txt" 2>&1
if [ $? -eq 0 ] && grep -q "evaluations and fine-tunings: 1 run, 5 already done" "$tmp/f2.txt" &&
  grep -q '"type":"resumed"' "$cut/log.jsonl" && grep -q '"step":8,' "$cut/log.jsonl"
then pass extrapolate_sh_finetune_resumes; else fail extrapolate_sh_finetune_resumes "$(cat "$tmp/f2.txt"; tail -n 3 "$cut/log.jsonl")"; fi
expect_fail extrapolate_sh_finetune_batch "^error: .*batch_size 4 is not a multiple of --mult 3" -- \
  scripts/extrapolate.sh "$runs" --scalings $scaling --finetune linear --mult 3 -- --device cpu
expect_fail extrapolate_sh_finetune_scaling "^error: --finetune: unknown rope_scaling 'lineal'" -- \
  scripts/extrapolate.sh "$runs" --finetune lineal
expect_fail extrapolate_sh_finetune_mult "^error: --mult must be an integer of at least 2, got '1'" -- \
  scripts/extrapolate.sh "$runs" --finetune linear --mult 1
expect_fail extrapolate_sh_finetune_steps "^error: --ft_steps must be a positive integer, got '0'" -- \
  scripts/extrapolate.sh "$runs" --finetune linear --ft_steps 0
finish
