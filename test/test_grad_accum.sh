# Gradient accumulation (grad_accum, MODEL.md "Optimiser and schedule"): each step's batch in
# micro-steps is the same step up to float rounding. Tiny models, 5 steps, against grad_accum 1:
# losses to 1e-6 relative, weights and AdamW moments to 1e-5 of each tensor's norm
# (test/dist_compare.py, as test_dist.sh) on the CPU, under mpirun with 2 ranks (ZeRO-1 off and
# on), and under the CUDA emulation (fp32 and bf16, flash and cuBLAS attention, the step one CUDA
# graph); resuming an accumulated run is bit-exact; --memory estimates one micro-step; bad values
# get one error line.
source test/testlib.sh
TRAIN=${TRAIN:-build/train}
EMU_TRAIN=${EMU_TRAIN:-${EMU_BUILD:-${BUILD:-build}_emu}/train}
PYTHON=${PYTHON:-$(scripts/pick_python.sh)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
needs_built grad_accum "$TRAIN"
scratch
pattern_shards "$tmp" 1 0.1 16 8000 g_train:0:6000 g_val:6000:
args="--train_data $tmp/g_train_000000.bin --val_data $tmp/g_val_000000.bin --n_layer 2 --n_head 2 --n_embd 16
  --vocab_size 16 --max_seq_len 32 --seq_len 16 --batch_size 4 --lr 1e-3 --steps 5 --eval_every 5 --eval_batches 2
  --checkpoint_every 5"
step_size=5e-3  # lr x 5 steps: how far AdamW can move a parameter whose gradient is rounding noise
# same NAME RUN_A RUN_B [LOSS_TOL TENSOR_TOL]: losses, weights and moments of step 5 agree
same() {
  local name=$1 a=$2 b=$3 ltol=${4:-1e-6} ttol=${5:-1e-5} out bad=""
  out=$("$PYTHON" test/dist_compare.py losses "$a" "$b" "$ltol") || bad+="losses: $out; "
  for f in model optim; do
    out=$("$PYTHON" test/dist_compare.py tensors "$a/ckpt_000005/$f.safetensors" "$b/ckpt_000005/$f.safetensors" \
      "$ttol" "$step_size") || bad+="$f: $out; "
  done
  [ -z "$bad" ] && pass "$name" || fail "$name" "$bad"
}
run() { local dir=$1; shift; "$@" --run_dir "$dir" >"$dir.out" 2>&1 || echo "run $dir failed: $(tail -1 "$dir.out")"; }

# --- the CPU: 4 rows in 4 and in 2 micro-steps
run "$tmp/cpu1" $TRAIN $args --device cpu
for k in 2 4; do
  run "$tmp/cpu$k" $TRAIN $args --device cpu --grad_accum $k
  same "grad_accum_cpu_$k" "$tmp/cpu1" "$tmp/cpu$k"
done
grep -q "^gradient accumulation: each step's batch of 4 in 4 micro-steps$" "$tmp/cpu4.out" &&
  pass grad_accum_says_so || fail grad_accum_says_so "$(head -c 300 "$tmp/cpu4.out")"
grep -q '"grad_accum":4' "$tmp/cpu4/log.jsonl" && pass grad_accum_in_log_header ||
  fail grad_accum_in_log_header "$(head -c 300 "$tmp/cpu4/log.jsonl")"

# --- resuming at step 2 continues exactly as the run that never stopped
strip() { grep -E '"type":"(train|val)"' "$1" | sed 's/"eta_s":[^,]*,//; s/"flops_per_s":[^,]*,//; s/"step_ms":[^,]*,//; s/,"tokens_per_s":[^}]*//'; }
run "$tmp/res" $TRAIN $args --device cpu --grad_accum 2 --steps 2 --checkpoint_every 2
$TRAIN --resume "$tmp/res" --steps 5 >"$tmp/res2.out" 2>&1
if [ "$(strip "$tmp/res/log.jsonl")" = "$(strip "$tmp/cpu2/log.jsonl")" ]; then pass grad_accum_resume_exact
else fail grad_accum_resume_exact "$(diff <(strip "$tmp/res/log.jsonl") <(strip "$tmp/cpu2/log.jsonl") | head -c 400)"; fi

# --- one micro-step's memory; bad values
out=$($TRAIN $args --batch_size 8 --grad_accum 4 --memory 2>&1)
grep -q "^memory estimate, training step of 2 x 16 tokens (one micro-step of 4): " <<<"$out" &&
  pass grad_accum_memory || fail grad_accum_memory "$out"
expect_only_error grad_accum_zero "^error: grad_accum must be >= 1, got 0$" -- $TRAIN $args --grad_accum 0
expect_only_error grad_accum_not_dividing \
  "^error: batch_size 4 must be a multiple of grad_accum 3 \(each micro-step takes as many rows\)$" -- \
  $TRAIN $args --grad_accum 3

# --- mpirun: 2 ranks of 2 rows each, in 2 micro-steps of 1 row
if command -v mpirun >/dev/null; then
  for zero in 0 1; do
    run "$tmp/mpi_z$zero" mpirun --oversubscribe -np 2 $TRAIN $args --device cpu --grad_accum 2 --zero $zero
    same "grad_accum_mpi_2_ranks_zero$zero" "$tmp/cpu1" "$tmp/mpi_z$zero"
  done
  expect_fail grad_accum_mpi_not_dividing "^error: rank 0/2: batch_size 4 is the global batch, split evenly across the 2 ranks and grad_accum 4 micro-steps: give a multiple of 8$" -- \
    mpirun --oversubscribe -np 2 $TRAIN $args --device cpu --grad_accum 4 --run_dir "$tmp/mpi_bad"
else
  skip grad_accum_mpi "mpirun not found (scripts/install_deps.sh installs openmpi-bin)"
fi

# --- the CUDA backend under the emulation: the micro-steps inside the step's CUDA graph
if [ -x "$EMU_TRAIN" ]; then
  for prec in fp32 bf16; do
    for att in flash cublas; do
      # bf16: each micro-step's weight gradients are rounded to bf16 before they are summed
      tol=1e-5 ltol=1e-6
      [ $prec = bf16 ] && tol=2e-2 ltol=1e-3
      e=(env NVIDIA_TF32_OVERRIDE=0 $EMU_TRAIN $args --device cuda --precision $prec --attention $att)
      run "$tmp/emu_${prec}_${att}_1" "${e[@]}"
      run "$tmp/emu_${prec}_${att}_2" "${e[@]}" --grad_accum 2
      same "grad_accum_emu_${prec}_${att}" "$tmp/emu_${prec}_${att}_1" "$tmp/emu_${prec}_${att}_2" $ltol $tol
      grep -q "step: CUDA graph" "$tmp/emu_${prec}_${att}_2.out" && pass "grad_accum_emu_${prec}_${att}_graph" ||
        fail "grad_accum_emu_${prec}_${att}_graph" "$(grep -m1 '^model:' "$tmp/emu_${prec}_${att}_2.out")"
    done
  done
else
  skip grad_accum_emu "$EMU_TRAIN not built (make emu)"
fi
finish
