#!/usr/bin/env bash
# train --memory: the memory a training step needs per attention mode, printed before any
# folder or allocation (so it works for configs this machine cannot run: GPT-2 124M at B=16,
# T=1024). Flash attention must save exactly the probabilities: (L + 1) (B,H,T,T) buffers (every
# layer's probabilities and the backward's dscores) less its L (B,H,T) log-sum-exps.
cd "$(dirname "$0")/.." || exit 1
. test/testlib.sh
TRAIN=${TRAIN:-build/train}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# memory_line NAME ARGS...: the estimate line, checked; sets FLASH and CUBLAS (MiB) and LINE (itself)
memory_line() {
  local name=$1; shift
  local out rc
  out=$("$TRAIN" --config configs/paper.json --run_dir "$tmp/run" "$@" --memory 2>&1)
  rc=$?
  FLASH=$(sed -n 's/^memory estimate, .*attention flash \([0-9]*\) MiB | cublas \([0-9]*\) MiB.*/\1/p' <<<"$out")
  CUBLAS=$(sed -n 's/^memory estimate, .*attention flash \([0-9]*\) MiB | cublas \([0-9]*\) MiB.*/\2/p' <<<"$out")
  if [ $rc -ne 0 ] || [ -z "$FLASH" ] || [ -z "$CUBLAS" ]; then fail "$name" "exit $rc, no estimate line in: $out"; return 1; fi
  if [ -e "$tmp/run" ]; then fail "$name" "--memory created the run folder"; return 1; fi
  LINE=$(grep '^memory estimate' <<<"$out")
  echo "# $name: $(head -n 1 <<<"$out")"
}

# expect_saving NAME L B H T [BYTES]: cublas - flash is the probabilities' size (MiB, rounded)
expect_saving() {
  local name=$1 L=$2 B=$3 H=$4 T=$5 bytes=${6:-4}  # bytes: of each probability (bf16: 2)
  local want=$(((L + 1) * B * H * T * T * bytes - L * B * H * T * 4))
  local got=$(((CUBLAS - FLASH) * 1048576))
  local diff=$((got - want))
  if [ ${diff#-} -le 1048576 ]; then pass "$name"
  else fail "$name" "cublas $CUBLAS MiB - flash $FLASH MiB is not the probabilities' $((want / 1048576)) MiB"; fi
}

if memory_line memory_gpt2_124m --n_layer 12 --n_head 12 --n_embd 768 --batch_size 16 --seq_len 1024; then
  expect_saving memory_gpt2_124m_saving 12 16 12 1024
fi
if memory_line memory_paper --batch_size 16 --seq_len 1024 --device cuda; then  # the chunk bf16's is (GPU)
  expect_saving memory_paper_saving 4 16 4 1024
fi
# --precision bf16: activations of 2 bytes (and a bf16 copy of the weights), the cublas
# attention's probabilities and their gradient too (test_cuda_bf16's memory tests check both
# bf16 figures against what the GPU backend allocates, to the byte)
flash_fp32=$FLASH cublas_fp32=$CUBLAS
if memory_line memory_bf16 --batch_size 16 --seq_len 1024 --precision bf16; then
  if [ "$FLASH" -lt "$flash_fp32" ] && [ "$CUBLAS" -lt "$cublas_fp32" ]; then pass memory_bf16_smaller
  else fail memory_bf16_smaller "bf16 flash $FLASH MiB (fp32 $flash_fp32), cublas $CUBLAS MiB (fp32 $cublas_fp32)"; fi
  expect_saving memory_bf16_saving 4 16 4 1024 2
fi
FLASH=$flash_fp32
# the estimate follows the config: half the batch, less memory
flash_full=$FLASH
if memory_line memory_half_batch --batch_size 8; then
  if [ "$FLASH" -lt "$flash_full" ]; then pass memory_half_batch_smaller
  else fail memory_half_batch_smaller "batch 8 needs $FLASH MiB, batch 16 $flash_full MiB"; fi
fi
# the classifier chunk is the device's (the estimate line says how many rows: on the CPU
# kCpuClassifierChunk, 4096 on the GPU, also where there is no GPU to run on): the GPU's estimate
# holds the difference in rows of padded (50304) fp32 logits more, less the CPU head's scratch
# (src/ops/loss.h classifier_head_scratch: per tile of 768 columns and row 2 + C floats, per row 1).
# The GPU's default head at this width is the fused one (--classifier auto): no chunk of logits
# (the one row logits() reads stays), each row's log-sum-exp more.
chunk_rows() { sed -n 's/.*| classifier chunk \([0-9]*\) rows$/\1/p' <<<"$LINE"; }
if grep -q 'device cuda: this build has no CUDA backend (' "$TRAIN"; then
  skip memory_device_chunk "this build has no CUDA backend"
  skip memory_gpu_fused "this build has no CUDA backend"
elif memory_line memory_cpu_chunk --batch_size 16 --seq_len 1024 --device cpu && cpu_flash=$FLASH &&
  cpu_rows=$(chunk_rows) && memory_line memory_gpu_chunk --batch_size 16 --seq_len 1024 --device cuda \
  --classifier logits; then
  gpu_rows=$(chunk_rows) gpu_flash=$FLASH
  if memory_line memory_gpu_default --batch_size 16 --seq_len 1024 --device cuda; then
    want=$((((gpu_rows - 1) * 50304 - 16384) * 4 / 1048576))
    if grep -q '| classifier fused (no logits)$' <<<"$LINE" && [ $((gpu_flash - FLASH - want)) -ge -1 ] &&
      [ $((gpu_flash - FLASH - want)) -le 1 ]; then pass memory_gpu_fused
    else fail memory_gpu_fused "--classifier logits $gpu_flash MiB, the default $FLASH MiB: not $want MiB less, or not fused: $LINE"; fi
  fi
  FLASH=$gpu_flash
  scratch=$(((50304 + 767) / 768 * cpu_rows * (2 + 128) + cpu_rows))
  want=$((((gpu_rows - cpu_rows) * 50304 - scratch) * 4 / 1048576))
  if [ "$gpu_rows" = 4096 ] && [ -n "$cpu_rows" ] && [ $((FLASH - cpu_flash - want)) -ge -1 ] &&
     [ $((FLASH - cpu_flash - want)) -le 1 ]; then pass memory_device_chunk
  else fail memory_device_chunk "--device cuda $FLASH MiB ($gpu_rows rows) - --device cpu $cpu_flash MiB ($cpu_rows rows) is not the $want MiB of their difference in rows of logits less the CPU head's scratch"; fi
fi
# --sample_every: the sampler's KV cache, one row of max_seq_len positions (keys and values of
# every layer: 4 x 1024 x 128 x 2 floats, 4.0 MiB), counted in the estimate and named
if memory_line memory_sampler_kv --device cpu --sample_every 100 && with=$FLASH with_line=$LINE &&
  memory_line memory_without_sampler --device cpu; then
  if grep -q "| of them the sampler's KV cache 4.0 MiB$" <<<"$with_line" && [ $((with - FLASH)) -ge 3 ] &&
    [ $((with - FLASH)) -le 5 ]; then pass memory_sampler_kv_counted
  else fail memory_sampler_kv_counted "with --sample_every: $with_line; without: $LINE"; fi
fi
expect_fail memory_bad_config "^error: .*batch_size" -- "$TRAIN" --config configs/paper.json --batch_size 0 --memory

# (a minute of runs: the full tier's, make test-all)
if [ "${TEST_ALL:-0}" != 1 ]; then
  skip memory_peaks "the estimates against real runs' peaks run in the full tier (TEST_ALL=1, make test-all)"
  finish
fi
# --- the estimate against the peak resident memory of real runs: the paper's model at B16 T256 on
# the CPU, one step. grad_accum 4 holds one micro-step's activations from the start (before the
# step-0 evaluation too), so it saves what the estimates differ by; evaluation at 4x the training
# length runs in groups of rows that borrow the training buffers, adding little; each estimate
# (flash, the default) is within 10 % of its run's peak above the program's own (code, libraries).
PYTHON=${PYTHON:-$(scripts/pick_python.sh)}
pattern_shards "$tmp" 1 0.3 50257 40000 p_train:0:20000 p_val:20000:
peak_args=(--config configs/paper.json --train_data "$tmp/p_train_000000.bin" --val_data "$tmp/p_val_000000.bin"
  --batch_size 16 --seq_len 256 --steps 1 --device cpu --checkpoint_every 0 --eval_batches 1 --eval_seq_lens 1024)
# anon CMD...: CMD's stdout, then "anon N": the most anonymous resident memory (MiB) it held,
# sampled every 10 ms (/proc/PID/status RssAnon: the heap and the buffers, not the libraries' code)
anon() {
  "$PYTHON" -c '
import subprocess, sys, time
p, top = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True), 0
while p.poll() is None:
    try:
        top = max([top] + [int(l.split()[1]) for l in open(f"/proc/{p.pid}/status") if l.startswith("RssAnon:")])
    except (OSError, ValueError, IndexError):
        pass
    time.sleep(0.01)
print(p.stdout.read(), end="")
if p.returncode == 0: print("anon", top // 1024)' "$@"
}
# The program's own: a tiny model trained for a second holds what the libraries keep (a CUDA
# build's about 90 MiB of relocated data), which --memory leaves out.
pattern_shards "$tmp" 2 0.2 16 4000 q_train:0:3000 q_val:3000:
BASE=$(anon "$TRAIN" --train_data "$tmp/q_train_000000.bin" --val_data "$tmp/q_val_000000.bin" --n_layer 1 --n_head 2 \
  --n_embd 16 --vocab_size 16 --max_seq_len 16 --seq_len 16 --batch_size 4 --steps 300 --eval_every 0 \
  --checkpoint_every 0 --device cpu --run_dir "$tmp/base" | sed -n 's/^anon //p')
# peak NAME ARGS...: sets EST (the flash estimate, MiB) and PEAK (the run's most anonymous
# resident memory above the program's own, MiB)
peak() {
  local name=$1; shift
  EST=$("$TRAIN" "${peak_args[@]}" "$@" --memory | sed -n 's/^memory estimate, .*attention flash \([0-9]*\) MiB.*/\1/p')
  PEAK=$(anon "$TRAIN" "${peak_args[@]}" "$@" --run_dir "$tmp/$name" | sed -n 's/^anon //p')
  if [ -z "$EST" ] || [ -z "$BASE" ] || [ -z "$PEAK" ]; then fail "$name" "no estimate ($EST) or a run failed"; return 1; fi
  PEAK=$((PEAK - BASE))
  echo "# $name: estimate $EST MiB, peak $PEAK MiB above the program's own $BASE MiB"
  if [ $((EST * 10)) -ge $((PEAK * 9)) ] && [ $((EST * 10)) -le $((PEAK * 11)) ]; then pass "$name"
  else fail "$name" "--memory says $EST MiB, the run's peak was $PEAK MiB above the program's own $BASE MiB (not within 10 %)"; fi
}
peak memory_peak_accum1 --eval_every 0 && est1=$EST peak1=$PEAK
peak memory_peak_accum4 --eval_every 0 --grad_accum 4 && est4=$EST peak4=$PEAK
if [ -n "$peak1" ] && [ -n "$peak4" ]; then
  saved=$((peak1 - peak4)) want=$((est1 - est4))
  if [ $((saved * 10)) -ge $((want * 8)) ] && [ $((saved * 10)) -le $((want * 12)) ]; then pass memory_peak_accum_saves
  else fail memory_peak_accum_saves "grad_accum 4 saved $saved MiB of the peak, --memory says $want MiB (not within 20 %)"; fi
fi
# --eval_only RUN --memory: the inference model and evaluation's activations (no gradients or
# moments), against the peak of that evaluation
"$TRAIN" "${peak_args[@]}" --eval_every 0 --checkpoint_every 1 --run_dir "$tmp/ev" >/dev/null 2>&1
line=$("$TRAIN" --eval_only "$tmp/ev" --memory)
EST=$(sed -n 's/^memory estimate, evaluation only .*attention flash \([0-9]*\) MiB.*/\1/p' <<<"$line")
PEAK=$(anon "$TRAIN" --eval_only "$tmp/ev" | sed -n 's/^anon //p')
if [ -n "$EST" ] && [ -n "$PEAK" ] && [ -n "$BASE" ] && [ -n "$est1" ] && [ "$EST" -lt "$est1" ]; then
  PEAK=$((PEAK - BASE))
  echo "# memory_eval_only: estimate $EST MiB, peak $PEAK MiB above the program's own (training: $est1 MiB)"
  if [ $((EST * 10)) -ge $((PEAK * 9)) ] && [ $((EST * 10)) -le $((PEAK * 11)) ]; then pass memory_eval_only
  else fail memory_eval_only "--eval_only --memory says $EST MiB, the evaluation's peak was $PEAK MiB (not within 10 %)"; fi
else fail memory_eval_only "no evaluation estimate below training's ${est1:-?} MiB: $line (peak ${PEAK:-?})"; fi
for k in 1 4; do
  peak memory_peak_eval_accum$k --eval_every 1 --grad_accum $k || continue
  base=$([ $k = 1 ] && echo "$peak1" || echo "$peak4")
  if [ -n "$base" ] && [ $((PEAK * 4)) -le $((base * 5)) ]; then pass memory_peak_eval_small_accum$k
  else fail memory_peak_eval_small_accum$k "evaluation took the peak from $base to $PEAK MiB (more than a quarter)"; fi
done
finish
