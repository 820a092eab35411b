# The train binary on the CUDA backend under CPU emulation (make emu: $EMU_BUILD/train
# --device cuda) against build/train --device cpu: 5 training steps for each scheme --list-pos
# names on tiny shards, compared step by step (loss and gradient norm, from log.jsonl); and the step
# replayed as a CUDA graph (the default) against the step launched kernel by kernel (identical),
# and against a run whose stream work waits until the host waits for it (CUDA_EMU_DEFER=1).
# - NVIDIA_TF32_OVERRIDE=0 (plain fp32 GEMMs, as on a GPU with that variable, and plain fp32
#   flash kernels, which the trainer turns off with it): the backends differ only in fp32
#   summation order, at most 5e-8 relative over the 5 steps; tolerance 1e-5 (the learned run
#   with TF32 flash kernels alone differs by 2e-5).
# - TF32 on (the trainer's default in fp32 mode): GEMM inputs keep 10 mantissa bits (relative
#   rounding <= 2^-11 ~ 5e-4 per operand); over 5 steps the loss moves by ~1e-3 relative;
#   tolerance 1e-2, and the run must differ from the fp32 one (TF32 really applied); so with the
#   cuBLAS stand-in's operands rounded to nearest, and truncated (CUDA_EMU_TF32) for learned, the
#   scheme furthest from the CPU (the others truncated: run_tests.sh --all's test_cuda and
#   test_cuda_flash tf32 tests).
# - --precision bf16 (bf16 activations, head size 16: the tensor-core flash kernels, and the
#   cublas attention with its scores and probabilities in bf16): each stored activation rounds
#   to 8 mantissa bits (2^-9 relative); over 5 steps the losses move by ~1e-4 relative and the
#   gradient norm by up to 5e-3 (learned, step 5): tolerance 2e-2, and at least 2e-4, more
#   than TF32's 1e-4 (bf16 really applied).
# - RoPE scaling (every scaling, on rope, crope and xpos) and partial rotary with an evaluation at a
#   longer length between steps, each on one of fp32 flash, fp32 cublas, bf16 flash and bf16 cublas,
#   against the CPU within the tolerances above.
# The run with deferred work and bf16 with the cublas attention for rope only (the trainer's host
# loop is the same for every scheme; each scheme's bf16 kernels, and the cublas attention's with
# ALiBi, against the CPU: test_cuda, test_cuda_bf16); TEST_ALL=1 (make test-all) adds the tiled
# classifier deferred.
source test/testlib.sh
TRAIN=${TRAIN:-build/train}
EMU_TRAIN=${EMU_TRAIN:-${EMU_BUILD:-${BUILD:-build}_emu}/train}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$EMU_TRAIN" ]; then
  fail emu_train "$EMU_TRAIN missing (make emu builds it)"
  finish
fi

pattern_shards "$tmp" 1 0.2 32 8000 emu_train:0:6000 emu_val:6000:
args="--train_data $tmp/emu_train_000000.bin --val_data $tmp/emu_val_000000.bin --n_layer 2 --n_head 2
  --n_embd 32 --vocab_size 32 --max_seq_len 32 --seq_len 24 --batch_size 3 --steps 5 --lr 3e-3
  --eval_every 0 --checkpoint_every 0"

# "loss grad_norm" per training step of a run's log
steps() { grep '"type":"train"' "$1/log.jsonl" | sed 's/.*"grad_norm":\([^,]*\),"loss":\([^,]*\),.*/\2 \1/'; }

# compare NAME RUN_A RUN_B TOL MIN: max relative difference over steps and both columns must
# be <= TOL, and >= MIN (MIN > 0: the runs must not agree better than that)
compare() {
  local name=$1 tol=$4 min=$5 out
  out=$(paste <(steps "$2") <(steps "$3") | awk -v tol="$tol" -v min="$min" '
    function rel(a, b) { d = a - b; if (d < 0) d = -d; s = b < 0 ? -b : b; return d / (s > 1e-30 ? s : 1e-30) }
    NF == 4 { n++; e = rel($1, $3); if (rel($2, $4) > e) e = rel($2, $4); if (e > m) m = e;
              if ($1 != $1 + 0 || $1 == "nan") bad = 1 }
    END { printf "%d steps, max rel diff %.3g", n, m;
          exit !(n == 5 && !bad && m <= tol && m >= min) }')
  if [ $? -eq 0 ]; then echo "# $name: $out"; pass "$name"; else fail "$name" "$out (tolerance $tol, at least $min)"; fi
}

for pos in $($TRAIN --list-pos); do
  if ! $TRAIN $args --pos "$pos" --device cpu --run_dir "$tmp/cpu_$pos" >"$tmp/cpu_$pos.txt" 2>&1; then
    fail "emu_train_$pos" "cpu run failed: $(tail -1 "$tmp/cpu_$pos.txt")"; continue
  fi
  if ! NVIDIA_TF32_OVERRIDE=0 $EMU_TRAIN $args --pos "$pos" --device cuda --run_dir "$tmp/emu_$pos" \
      >"$tmp/emu_$pos.txt" 2>&1; then
    fail "emu_train_$pos" "emulated cuda run failed: $(tail -1 "$tmp/emu_$pos.txt")"; continue
  fi
  if ! grep -q 'device cuda (CUDA emulation' "$tmp/emu_$pos.txt"; then
    fail "emu_train_$pos" "not on the emulated device: $(grep -m1 device "$tmp/emu_$pos.txt")"; continue
  fi
  compare "emu_train_$pos" "$tmp/emu_$pos" "$tmp/cpu_$pos" 1e-5 0
  # the run above replays its step as a CUDA graph (--cuda_graph 1, the default); launching every
  # kernel each step must give the same losses and norms, bit for bit (TF32 off by --tf32 0 here,
  # by the variable there: the same plain fp32)
  if $EMU_TRAIN $args --pos "$pos" --device cuda --cuda_graph 0 --tf32 0 --run_dir "$tmp/eager_$pos" \
      >"$tmp/eager_$pos.txt" 2>&1; then
    if grep -q '| step: CUDA graph |' "$tmp/emu_$pos.txt" && grep -q '| step: eager |' "$tmp/eager_$pos.txt" &&
      grep -q 'precision fp32 (TF32 off: plain fp32)' "$tmp/eager_$pos.txt"; then
      compare "emu_train_graph_vs_eager_$pos" "$tmp/emu_$pos" "$tmp/eager_$pos" 0 0
    else
      fail "emu_train_graph_vs_eager_$pos" "the runs do not say 'step: CUDA graph' and 'step: eager' (TF32 off)"
    fi
  else
    fail "emu_train_graph_vs_eager_$pos" "emulated cuda run failed: $(tail -1 "$tmp/eager_$pos.txt")"
  fi
  # the streams' work deferred until the host waits for it (the latest a GPU may run it): reading
  # a result or refilling an upload buffer without waiting shows here. The same losses, bit for
  # bit, through evaluation and a checkpoint too.
  if [ "$pos" != rope ]; then :
  elif CUDA_EMU_DEFER=1 NVIDIA_TF32_OVERRIDE=0 $EMU_TRAIN $args --pos "$pos" --device cuda --eval_every 2 \
      --eval_batches 3 --checkpoint_every 4 --run_dir "$tmp/defer_$pos" >"$tmp/defer_$pos.txt" 2>&1; then
    if grep '"type":"val"' "$tmp/defer_$pos/log.jsonl" | grep -q '"loss":[0-9]' && [ -e "$tmp/defer_$pos/ckpt_000004" ]; then
      compare "emu_train_deferred_$pos" "$tmp/defer_$pos" "$tmp/emu_$pos" 0 0
    else
      fail "emu_train_deferred_$pos" "no finite validation loss or no checkpoint at step 4: $(tail -1 "$tmp/defer_$pos.txt")"
    fi
  else
    fail "emu_train_deferred_$pos" "emulated cuda run failed: $(tail -2 "$tmp/defer_$pos.txt")"
  fi
  # cuBLAS's TF32 rounding of its operands is not documented: the stand-in's to nearest and
  # truncated (CUDA_EMU_TF32) both keep the tolerance
  for tr in nearest $([ "$pos" = learned ] && echo truncate); do
    name=emu_train_tf32_$pos$([ $tr = truncate ] && echo _truncate)
    if CUDA_EMU_TF32=$tr $EMU_TRAIN $args --pos "$pos" --device cuda --run_dir "$tmp/$name" >"$tmp/$name.txt" 2>&1; then
      compare "$name" "$tmp/$name" "$tmp/cpu_$pos" 1e-2 1e-7
    else
      fail "$name" "emulated cuda run failed: $(tail -1 "$tmp/$name.txt")"
    fi
  done
  # TF32 (tensor-core flash kernels too): the graph replays the eager step bit for bit (rope only,
  # for time); the run headers and the logs' first records say whether TF32 was on
  if [ "$pos" = rope ]; then
    if grep -q '| precision fp32 (TF32 tensor cores)$' "$tmp/emu_train_tf32_$pos.txt" &&
        grep -q '| precision fp32 (TF32 off: plain fp32)$' "$tmp/emu_$pos.txt"; then
      pass emu_train_tf32_header
    else
      fail emu_train_tf32_header "headers: $(grep -h -m1 '| precision' "$tmp/emu_train_tf32_$pos.txt" "$tmp/emu_$pos.txt" | tr '\n' ';')"
    fi
    if head -1 "$tmp/emu_train_tf32_$pos/log.jsonl" | grep -q '"arithmetic":"fp32 (TF32 tensor cores)","device":"cuda (' &&
        head -1 "$tmp/emu_$pos/log.jsonl" | grep -q '"arithmetic":"fp32 (TF32 off: plain fp32)","device":"cuda ('; then
      pass emu_train_tf32_logged
    else
      fail emu_train_tf32_logged "$(head -1 "$tmp/emu_train_tf32_$pos/log.jsonl" | grep -o '"run_on":{[^}]*}')"
    fi
    if $EMU_TRAIN $args --pos "$pos" --device cuda --cuda_graph 0 --run_dir "$tmp/tf32_eager_$pos" \
        >"$tmp/tf32_eager_$pos.txt" 2>&1; then
      compare "emu_train_tf32_graph_vs_eager_$pos" "$tmp/emu_train_tf32_$pos" "$tmp/tf32_eager_$pos" 0 0
    else
      fail "emu_train_tf32_graph_vs_eager_$pos" "emulated cuda run failed: $(tail -1 "$tmp/tf32_eager_$pos.txt")"
    fi
  fi
  for att in flash $([ "$pos" = rope ] && echo cublas); do
    name=emu_train_bf16_$pos$([ $att = cublas ] && echo _cublas)
    if $EMU_TRAIN $args --pos "$pos" --device cuda --precision bf16 --attention $att --run_dir "$tmp/$name" \
        >"$tmp/$name.txt" 2>&1; then
      compare "$name" "$tmp/$name" "$tmp/cpu_$pos" 2e-2 2e-4
    else
      fail "$name" "emulated cuda run failed: $(tail -1 "$tmp/$name.txt")"
    fi
  done
done
# RoPE scaling with s from the length (training length 8: s = 3 in training, 6 in the evaluation at
# 48 between steps, which rewrites the tables under the step's CUDA graph): every scaling, on each
# rotary scheme, against the CPU. The host builds the tables, the same for every attention path:
# each scaling runs on one path, and each path meets a scaling whose s follows the length (yarn,
# dynamic).
# A fifth field: partial_rotary_factor (half of each head's channels rotating), on each attention path
# and precision.
for case in rope:yarn:fp32:flash crope:dynamic:fp32:cublas xpos:yarn:bf16:flash rope:linear:fp32:cublas \
    crope:ntk:bf16:flash rope:llama3:fp32:cublas xpos:llama3:bf16:cublas:0.5 crope:none:bf16:flash:0.5 \
    rope:ntk:fp32:flash:0.5; do
  IFS=: read -r pos sc prec att f <<<"$case"
  sargs="$args --pos $pos --rope_scaling $sc --rope_train_len 8 --eval_every 2 --eval_seq_lens 24,48
  --eval_batches 2"
  cpu=cpu_${pos}_$sc${f:+_partial}
  [ -n "$f" ] && sargs="$sargs --partial_rotary_factor $f"
  if ! $TRAIN $sargs --device cpu --run_dir "$tmp/$cpu" >"$tmp/$cpu.txt" 2>&1; then
    fail "emu_train_scaling_${pos}_$sc${f:+_partial}" "cpu run failed: $(tail -1 "$tmp/$cpu.txt")"; continue
  fi
  name=emu_train_scaling_${pos}_${sc}_${prec}_$att${f:+_partial}
  if NVIDIA_TF32_OVERRIDE=0 $EMU_TRAIN $sargs --device cuda --precision $prec --attention $att \
      --run_dir "$tmp/$name" >"$tmp/$name.txt" 2>&1; then
    if [ $prec = fp32 ]; then compare "$name" "$tmp/$name" "$tmp/$cpu" 1e-5 0
    else compare "$name" "$tmp/$name" "$tmp/$cpu" 2e-2 2e-4; fi
  else
    fail "$name" "emulated cuda run failed: $(tail -1 "$tmp/$name.txt")"
  fi
done
# head size 24 has no flash kernel: in bf16 the cublas attention runs it
if ! $TRAIN $args --n_embd 48 --device cpu --run_dir "$tmp/cpu_d24" >"$tmp/cpu_d24.txt" 2>&1; then
  fail emu_train_bf16_cublas_head_size_24 "cpu run failed: $(tail -1 "$tmp/cpu_d24.txt")"
elif ! $EMU_TRAIN $args --n_embd 48 --device cuda --precision bf16 --attention cublas --run_dir "$tmp/bf16_d24" \
    >"$tmp/bf16_d24.txt" 2>&1; then
  fail emu_train_bf16_cublas_head_size_24 "emulated cuda run failed: $(tail -1 "$tmp/bf16_d24.txt")"
else compare emu_train_bf16_cublas_head_size_24 "$tmp/bf16_d24" "$tmp/cpu_d24" 2e-2 2e-4; fi
# evaluation's pieces (MODEL.md, Evaluation) on the CUDA backend, its work deferred: a length that
# does not divide the longest queues batches of two shapes (each shape's second batch captures the
# evaluation graph); the same tokens at every length, the CPU's losses to summation order
vargs="$args --steps 0 --eval_every 1 --eval_seq_lens 24,16,40 --eval_batches 4"
vals() { grep '"type":"val"' "$1/log.jsonl" | sed 's/.*"loss":\([^,]*\),"seq_len":\([0-9]*\).*"tokens":\([0-9]*\).*/\2 \3 \1/'; }
if ! $TRAIN $vargs --device cpu --run_dir "$tmp/cpu_pieces" >"$tmp/cpu_pieces.txt" 2>&1; then
  fail emu_train_eval_pieces "cpu run failed: $(tail -1 "$tmp/cpu_pieces.txt")"
elif ! CUDA_EMU_DEFER=1 NVIDIA_TF32_OVERRIDE=0 $EMU_TRAIN $vargs --device cuda --run_dir "$tmp/emu_pieces" \
    >"$tmp/emu_pieces.txt" 2>&1; then
  fail emu_train_eval_pieces "emulated cuda run failed: $(tail -2 "$tmp/emu_pieces.txt")"
elif out=$(paste <(vals "$tmp/cpu_pieces") <(vals "$tmp/emu_pieces") | awk '
    NF == 6 && $1 == $4 && $2 == 240 && $5 == 240 { n++; d = $3 - $6; if (d < 0) d = -d; if (d / $3 > m) m = d / $3 }
    END { printf "%d lengths of 240 tokens, max rel diff %.3g", n, m; exit !(n == 3 && m <= 1e-5) }'); then
  echo "# emu_train_eval_pieces: $out"; pass emu_train_eval_pieces
else fail emu_train_eval_pieces "$out: $(vals "$tmp/cpu_pieces" | xargs) vs $(vals "$tmp/emu_pieces" | xargs)"; fi
# n_embd 20: bf16 rows of C are not whole 16-byte packs. The kernels' element-wise paths give the
# CPU's losses (the bf16 tolerance), after one warning that says it costs speed; fp32's packs of
# 4 fit, no warning
warn_c20="^warning: n_embd 20 is not a multiple of 8: rows of bf16 activations and weights are not whole 16-byte packs, so the GPU takes its slower element-wise paths \(same results, less speed\)$"
if ! $TRAIN $args --n_embd 20 --device cpu --run_dir "$tmp/cpu_c20" >"$tmp/cpu_c20.txt" 2>&1; then
  fail emu_train_bf16_unaligned_c "cpu run failed: $(tail -1 "$tmp/cpu_c20.txt")"
elif ! $EMU_TRAIN $args --n_embd 20 --device cuda --precision bf16 --attention cublas --run_dir "$tmp/bf16_c20" \
    >"$tmp/bf16_c20.txt" 2>&1; then
  fail emu_train_bf16_unaligned_c "emulated cuda run failed: $(tail -1 "$tmp/bf16_c20.txt")"
elif [ "$(grep -c '^warning' "$tmp/bf16_c20.txt")" != 1 ] || ! grep -qE "$warn_c20" "$tmp/bf16_c20.txt"; then
  fail emu_train_bf16_unaligned_c "expected the one warning: $(grep -m2 '^warning' "$tmp/bf16_c20.txt")"
else compare emu_train_bf16_unaligned_c "$tmp/bf16_c20" "$tmp/cpu_c20" 2e-2 2e-4; fi
out=$($EMU_TRAIN $args --n_embd 20 --device cuda --attention cublas --steps 1 --run_dir "$tmp/fp32_c20" 2>&1)
if grep -q "| device cuda" <<<"$out" && ! grep -q '^warning' <<<"$out"; then pass emu_train_fp32_c20_no_warning
else fail emu_train_fp32_c20_no_warning "$(grep -m2 'warning\|error' <<<"$out")"; fi
# the classifier over vocabulary tiles (--classifier_tile 128; V = 300 padded to 384: three tiles,
# padding in the last) against the CPU's row chunks: on the CPU, emulated (a CUDA graph, and
# deferred), and in bf16. The same for the fused classifier (--classifier fused: the last of its
# 64-class tiles partial, one all padding): its CPU twin, emulated on TF32 (its tensor cores),
# and in bf16.
targs="$args --vocab_size 300"
# head_run NAME TOL MIN HEAD [ENV=VALUE...] BINARY ARGS...: a run with the head options HEAD
# compared with the CPU rows
head_run() {
  local name=$1 tol=$2 min=$3 head=$4
  shift 4
  if env "$@" $targs $head --run_dir "$tmp/$name" >"$tmp/$name.txt" 2>&1; then
    compare "$name" "$tmp/$name" "$tmp/cpu_v300" "$tol" "$min"
  else
    fail "$name" "run failed: $(tail -2 "$tmp/$name.txt")"
  fi
}
if $TRAIN $targs --device cpu --run_dir "$tmp/cpu_v300" >"$tmp/cpu_v300.txt" 2>&1; then
  tiles="--classifier_tile 128" fused="--classifier fused"
  head_run emu_train_tiles_cpu 1e-5 0 "$tiles" "$TRAIN" --device cpu
  head_run emu_train_tiles 1e-4 0 "$tiles" NVIDIA_TF32_OVERRIDE=0 "$EMU_TRAIN" --device cuda
  [ "${TEST_ALL:-0}" = 1 ] && head_run emu_train_tiles_deferred 1e-4 0 "$tiles" CUDA_EMU_DEFER=1 \
    NVIDIA_TF32_OVERRIDE=0 "$EMU_TRAIN" --device cuda --eval_every 2 --checkpoint_every 4
  head_run emu_train_tiles_bf16 2e-2 2e-4 "$tiles" "$EMU_TRAIN" --device cuda --precision bf16
  head_run emu_train_fused_cpu 1e-5 0 "$fused" "$TRAIN" --device cpu
  head_run emu_train_fused_tf32 1e-2 1e-7 "$fused" "$EMU_TRAIN" --device cuda --eval_every 2
  head_run emu_train_fused_bf16 2e-2 2e-4 "$fused" "$EMU_TRAIN" --device cuda --precision bf16
else
  fail emu_train_tiles "cpu run failed: $(tail -1 "$tmp/cpu_v300.txt")"
fi
# the fused classifier refuses plain fp32 and a width it has no kernel for, before the run
expect_only_error emu_train_fused_plain_fp32 "^error: the fused LM head \(--classifier fused\) multiplies on tensor cores: it needs --precision bf16 or --tf32 1 \(use --classifier logits for plain fp32\)$" -- \
  $EMU_TRAIN $targs --device cuda --classifier fused --tf32 0 --run_dir "$tmp/fused_fp32"
expect_only_error emu_train_fused_width "^error: the fused LM head \(--classifier fused\) takes n_embd 32, 64 or 128 on the GPU, got 48 \(use --classifier logits\)$" -- \
  $EMU_TRAIN $targs --n_embd 48 --device cuda --precision bf16 --attention cublas --classifier fused \
  --run_dir "$tmp/fused_c48"
# the GPU reads each step's loss one step late (step 3 is queued when step 2's is read): a
# diverged run still stops at the step whose loss is not finite, and writes no checkpoint
expect_fail emu_train_diverged_loss "^error: loss is -?(nan|inf) at step 1 " -- \
  $EMU_TRAIN $args --device cuda --lr 1e39 --steps 4 --checkpoint_every 2 --run_dir "$tmp/nan"
if [ ! -e "$tmp/nan/latest" ]; then pass emu_train_diverged_no_checkpoint
else fail emu_train_diverged_no_checkpoint "latest names $(cat "$tmp/nan/latest")"; fi
# A GPU that cannot run the trainer (the emulator pretends each: test/cuda_emu/README.md): one
# line with the CUDA error's name and text (or the GPU's architecture, or CUDA_VISIBLE_DEVICES
# hiding every GPU) and what to do, from the trainer (--device cuda: an error, before the run
# folder is touched; auto: a warning, then the CPU) and from the test programs (every GPU test
# SKIPPED with it). No driver or no GPU at all is
# no fault: "no CUDA device found", and auto trains on the CPU without a word.
unusable=(
  "CUDA_EMU_DRIVER=12.4|cudaErrorInsufficientDriver \(CUDA driver version is insufficient for CUDA runtime version\): the NVIDIA driver supports CUDA 12\.4, this build's runtime is CUDA 13\.0: update the driver \(CUDA 13 needs R580 or newer\), install NVIDIA's forward-compatibility package cuda-compat, or build with an older CUDA toolkit"
  "CUDA_EMU_INIT_ERROR=802|cudaErrorSystemNotReady \(system not yet initialized\): the GPUs' NVSwitch fabric is not up: on an NVSwitch system \(HGX, DGX\) start NVIDIA's fabric manager \(systemctl start nvidia-fabricmanager, the driver's own version\) and see nvidia-smi -q's Fabric state"
  "CUDA_EMU_INIT_ERROR=803|cudaErrorSystemDriverMismatch \(system has unsupported display driver / cuda driver combination\): the NVIDIA kernel module and the driver's library differ: after a driver upgrade without a reboot, reboot; with NVIDIA's forward-compatibility package cuda-compat on LD_LIBRARY_PATH over a driver new enough without it, take it off LD_LIBRARY_PATH"
  "CUDA_VISIBLE_DEVICES=|no GPU visible with CUDA_VISIBLE_DEVICES='': unset it, or name an index or UUID that nvidia-smi -L lists \(a GPU in MIG mode needs an instance: nvidia-smi mig -lgi\)"
  "CUDA_VISIBLE_DEVICES=MIG-1|no GPU visible with CUDA_VISIBLE_DEVICES='MIG-1': unset it, or name an index or UUID that nvidia-smi -L lists \(a GPU in MIG mode needs an instance: nvidia-smi mig -lgi\)"
  "CUDA_EMU_INIT_ERROR=804|cudaErrorCompatNotSupportedOnDevice \(forward compatibility was attempted on non supported HW\): NVIDIA's forward-compatibility package \(cuda-compat\) does not support this GPU: take it off the library path and update the driver"
  "CUDA_EMU_INIT_ERROR=3|cudaErrorInitializationError \(initialization error\): the driver cannot start the GPU: see what nvidia-smi says, and whether this user may open /dev/nvidia\*"
  "CUDA_EMU_CC=7.5|the GPU \(CUDA emulation on the CPU, sm_75\) is too old for this trainer: its kernels need sm_80 or newer \(A100, H100, H200, RTX 30xx and later\)"
  "CUDA_EMU_NO_IMAGE=1|cudaErrorNoKernelImageForDevice \(no kernel image is available for execution on the device\): this build holds no code for the GPU \(CUDA emulation on the CPU \(H200-like, sm_90\), sm_90\): build it for this GPU \(make clean && make, with its sm_90 in NVCCFLAGS if you set them\)"
)
$EMU_TRAIN $args --device cpu --steps 1 --run_dir "$tmp/keep" >/dev/null 2>&1
for case in "${unusable[@]}"; do
  setting=${case%%|*} why=${case#*|} name=${case%%|*}
  name=$(tr 'A-Z=.' 'a-z__' <<<"${name#CUDA_EMU_}")
  expect_only_error "emu_train_unusable_${name}_cuda" "^error: --device cuda: $why$" -- \
    env "$setting" $EMU_TRAIN $args --device cuda --overwrite --run_dir "$tmp/keep"
  if [ -f "$tmp/keep/log.jsonl" ]; then pass "emu_train_unusable_${name}_keeps_run"
  else fail "emu_train_unusable_${name}_keeps_run" "--overwrite deleted the old run before the device was checked"; fi
  out=$(env "$setting" $EMU_TRAIN $args --device auto --steps 1 --run_dir "$tmp/auto_$name" 2>&1)
  if grep -qE "^warning: --device auto: training on the CPU, the GPU is not usable: $why$" <<<"$out" &&
      grep -q "| device cpu |" <<<"$out" && [ -f "$tmp/auto_$name/log.jsonl" ]; then
    pass "emu_train_unusable_${name}_auto"
  else fail "emu_train_unusable_${name}_auto" "expected the warning, then a CPU run: $(head -c 400 <<<"$out")"; fi
  out=$(env "$setting" "$(dirname "$EMU_TRAIN")/test/test_cuda" cuda_layernorm 2>&1)
  if [ "$(grep -cE "^SKIPPED cuda_layernorm.*: $why$" <<<"$out")" -ge 2 ] && ! grep -q '^PASS\|^FAIL' <<<"$out"; then
    pass "emu_test_cuda_unusable_$name"
  else fail "emu_test_cuda_unusable_$name" "expected every test SKIPPED with the line: $(head -c 300 <<<"$out")"; fi
done
# bf16 needs the GPU whatever --device says; --memory works on any machine (auto: the CPU's estimate)
expect_only_error emu_train_unusable_bf16_auto "^error: precision bf16 needs --device cuda \(--device auto: cudaErrorSystemDriverMismatch .*, take it off LD_LIBRARY_PATH\)$" -- \
  env CUDA_EMU_INIT_ERROR=803 $EMU_TRAIN $args --device auto --precision bf16 --run_dir "$tmp/bf16_auto"
for dev in auto cuda; do
  out=$(env CUDA_EMU_DRIVER=12.4 $EMU_TRAIN $args --device $dev --memory 2>&1) && grep -q "^memory estimate" <<<"$out" &&
    pass "emu_train_unusable_memory_$dev" || fail "emu_train_unusable_memory_$dev" "$(head -c 300 <<<"$out")"
done
for setting in CUDA_EMU_DRIVER=none CUDA_EMU_INIT_ERROR=100; do
  name=$(tr 'A-Z=.' 'a-z__' <<<"${setting#CUDA_EMU_}")
  expect_only_error "emu_train_absent_${name}_cuda" "^error: --device cuda: no CUDA device found$" -- \
    env "$setting" $EMU_TRAIN $args --device cuda --run_dir "$tmp/absent_$name"
  out=$(env "$setting" $EMU_TRAIN $args --device auto --steps 1 --run_dir "$tmp/absent_auto_$name" 2>&1)
  if grep -q "| device cpu |" <<<"$out" && ! grep -q "warning" <<<"$out"; then pass "emu_train_absent_${name}_auto"
  else fail "emu_train_absent_${name}_auto" "expected a quiet CPU run: $(head -c 300 <<<"$out")"; fi
done
# A GPU in MIG mode without an instance: CUDA finds no device, and the driver's NVML (a fake
# libnvidia-ml.so.1, test/fake_gpu/nvml.c, strict as the real one) tells why: one line, as for the
# GPUs above. MIG off (or no NVML, above): no GPU, and auto trains on the CPU without a word.
mkdir -p "$tmp/nvml"
if gcc -shared -fPIC test/fake_gpu/nvml.c -o "$tmp/nvml/libnvidia-ml.so.1"; then
  # the fake refuses what NVML refuses: calls before nvmlInit_v2 or after nvmlShutdown, a device
  # past the count, a null pointer, a name buffer too small
  if python3 - "$tmp/nvml/libnvidia-ml.so.1" <<'PY'; then pass emu_nvml_fake_strict; else fail emu_nvml_fake_strict "see above"; fi
import ctypes, os, sys
os.environ.update(FAKE_GPU="NVIDIA H200, 143771 MiB, 580.65.06, 9.0", FAKE_MIG="Enabled")
lib, n, d, cur, pend, name = ctypes.CDLL(sys.argv[1]), ctypes.c_uint(), ctypes.c_void_p(), ctypes.c_uint(), ctypes.c_uint(), ctypes.create_string_buffer(96)
got = [lib.nvmlDeviceGetCount_v2(ctypes.byref(n)), lib.nvmlShutdown(), lib.nvmlInit_v2(),
       lib.nvmlDeviceGetCount_v2(None), lib.nvmlDeviceGetHandleByIndex_v2(1, ctypes.byref(d)),
       lib.nvmlDeviceGetCount_v2(ctypes.byref(n)), lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(d)),
       lib.nvmlDeviceGetMigMode(d, ctypes.byref(cur), ctypes.byref(pend)), lib.nvmlDeviceGetName(d, name, 5),
       lib.nvmlDeviceGetName(d, name, 96), lib.nvmlShutdown(), lib.nvmlDeviceGetCount_v2(ctypes.byref(n))]
want = [1, 1, 0, 2, 2, 0, 0, 0, 7, 0, 0, 1]
ok = got == want and n.value == 1 and cur.value == 1 and name.value == b"NVIDIA H200"
print("" if ok else f"fake NVML: {got} (want {want}), count {n.value}, mig {cur.value}, name {name.value}")
sys.exit(0 if ok else 1)
PY
  mig="GPU 0 \(NVIDIA H200\) is in MIG mode and has no MIG instance CUDA can use: create one \(sudo nvidia-smi mig -cgi PROFILE -C; nvidia-smi mig -lgip lists the profiles\), or turn MIG off \(sudo nvidia-smi -mig 0, then a GPU reset\)"
  nvml=(CUDA_EMU_INIT_ERROR=100 LD_LIBRARY_PATH="$tmp/nvml" FAKE_GPU="NVIDIA H200, 143771 MiB, 580.65.06, 9.0")
  expect_only_error emu_train_mig_without_instance_cuda "^error: --device cuda: $mig$" -- \
    env "${nvml[@]}" FAKE_MIG=Enabled $EMU_TRAIN $args --device cuda --run_dir "$tmp/mig_cuda"
  out=$(env "${nvml[@]}" FAKE_MIG=Enabled $EMU_TRAIN $args --device auto --steps 1 --run_dir "$tmp/mig_auto" 2>&1)
  if grep -qE "^warning: --device auto: training on the CPU, the GPU is not usable: $mig$" <<<"$out" &&
    grep -q "| device cpu |" <<<"$out"; then pass emu_train_mig_without_instance_auto
  else fail emu_train_mig_without_instance_auto "expected the warning, then a CPU run: $(head -c 400 <<<"$out")"; fi
  out=$(env "${nvml[@]}" $EMU_TRAIN $args --device auto --steps 1 --run_dir "$tmp/nomig_auto" 2>&1)
  if grep -q "| device cpu |" <<<"$out" && ! grep -q "warning" <<<"$out"; then pass emu_train_nvml_no_mig_auto
  else fail emu_train_nvml_no_mig_auto "expected a quiet CPU run: $(head -c 300 <<<"$out")"; fi
else
  fail emu_nvml_fake_builds "gcc could not build test/fake_gpu/nvml.c"
fi
# flash attention's GPU kernels take only some head sizes: the trainer says so before it starts
# (n_embd 48 / n_head 2 = 24)
expect_fail emu_train_flash_head_size "^error: flash attention on the GPU supports head sizes 8, 16, 32, 64, 128, got n_embd/n_head = 24 \(use --attention cublas\)" -- \
  $EMU_TRAIN $args --n_embd 48 --device cuda --attention flash --run_dir "$tmp/bad_head"
finish
