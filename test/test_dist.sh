# Data-parallel training (src/dist.h) on the CPU backend under mpirun, tiny models, few steps:
# - 2 ranks (ZeRO-1 off and on) against 1 process with the same global batch, every pos mode:
#   losses to 1e-6 relative, weights and AdamW moments after 5 steps to 1e-5 of each tensor's
#   norm (the key bias, zero in exact arithmetic, to the step size: test/dist_compare.py)
# - 2 ranks twice: bitwise-identical logs; resume at 2 ranks (bit-exact) and at 1 rank
# - errors: a global batch that does not split, ranks with different configs or data, a rank
#   killed mid-run (the others end, the last checkpoint loads), a stuck rank (collective timeout);
#   SIGTERM to the ranks stops every rank at the same step with a checkpoint that resumes
# - the CUDA backend's NCCL path under the CPU emulation ($EMU_BUILD/train), 2 ranks vs 1: fp32
#   with the streams' work deferred (CUDA_EMU_DEFER=1), and bf16 (ZeRO-1 rounds the gathered
#   weights into the GEMMs' bf16 copy)
source test/testlib.sh
TRAIN=${TRAIN:-build/train}
EMU_TRAIN=${EMU_TRAIN:-${EMU_BUILD:-${BUILD:-build}_emu}/train}
PYTHON=${PYTHON:-$(scripts/pick_python.sh)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ! command -v mpirun >/dev/null; then
  skip dist "mpirun not found (scripts/install_deps.sh installs openmpi-bin and libopenmpi-dev)"
  finish
fi
mpi() { mpirun --oversubscribe -np "$@"; }

# token shards (MODEL.md's format) in plain Python: a GPU machine may lack numpy
"$PYTHON" - "$tmp" <<'PY'
import random, struct, sys
def write_shard(path, toks):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)))
        f.write(struct.pack("<%dH" % len(toks), *toks))
random.seed(0)
pat = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8]
toks = [pat[i % 12] if random.random() > 0.1 else random.randrange(16) for i in range(8000)]
write_shard(sys.argv[1] + "/tiny_train_000000.bin", toks[:6000])
write_shard(sys.argv[1] + "/tiny_val_000000.bin", toks[6000:])
toks[100] = (toks[100] + 1) % 16  # the same size, one token different
write_shard(sys.argv[1] + "/other_train_000000.bin", toks[:6000])
PY
data="--train_data $tmp/tiny_train_000000.bin --val_data $tmp/tiny_val_000000.bin"
args="$data --n_layer 2 --n_head 2 --n_embd 16 --vocab_size 16 --max_seq_len 32 --seq_len 16 --batch_size 4
  --lr 1e-3 --eval_every 5 --eval_batches 2 --checkpoint_every 5 --device cpu"
step_size=5e-3  # lr x 5 steps: how far AdamW can move a parameter whose gradient is rounding noise

cmp_losses() { "$PYTHON" test/dist_compare.py losses "$@"; }
cmp_tensors() { "$PYTHON" test/dist_compare.py tensors "$@" "$step_size"; }
# same NAME RUN_A RUN_B: losses, weights and moments of step 5 agree
same() {
  local name=$1 a=$2 b=$3 out
  if ! out=$(cmp_losses "$a" "$b" 1e-6); then fail "${name}_losses" "$out"; else pass "${name}_losses"; fi
  echo "# $name losses: $out"
  for f in model optim; do
    if ! out=$(cmp_tensors "$a/ckpt_000005/$f.safetensors" "$b/ckpt_000005/$f.safetensors" 1e-5); then
      fail "${name}_$f" "$out"
    else pass "${name}_$f"; fi
    echo "# $name $f: $out"
  done
}

# nccl_checks NAME TRAIN RANKS DEVICE_TEXT: the CUDA backend's collectives (cuda/nccl.cu). One
# rank under mpirun runs every NCCL call on a single rank (all-reduce, ZeRO-1's reduce-scatter
# and all-gather) and must log the very losses of the plain run; RANKS > 1 agree to rounding.
# Without ZeRO-1 the sum runs per layer during the backward pass (a missed tensor shows here).
# EXTRA args go to every run (bf16: ZeRO-1 gathers the fp32 weights, then rounds their copy).
nccl_checks() {
  local name=$1 bin=$2 ranks=$3 text=$4 out
  shift 4
  # ranks > 1 sum the gradients in another order; bf16 activations round that difference coarsely
  local prec=fp32 tol_n=1e-5
  [[ " $* " == *" bf16 "* ]] && prec=bf16 tol_n=1e-3
  local emu="$data --n_layer 2 --n_head 2 --n_embd 32 --vocab_size 16 --max_seq_len 16 --seq_len 8 --batch_size $((ranks > 2 ? 8 : 2))
    --steps 3 --eval_every 3 --eval_batches 1 --checkpoint_every 0 --device cuda $*"
  NVIDIA_TF32_OVERRIDE=0 $bin $emu --run_dir "$tmp/${name}_plain" >"$tmp/$name.txt" 2>&1 ||
    { fail "$name" "plain run: $(tail -1 "$tmp/$name.txt")"; return; }
  for n in 1 $([ "$ranks" -gt 1 ] && echo "$ranks"); do
    for zero in 0 1; do
      local run="$tmp/${name}_${n}ranks_zero$zero" tol=$([ "$n" = 1 ] && echo 0 || echo "$tol_n")
      if ! NVIDIA_TF32_OVERRIDE=0 mpi "$n" $bin $emu --zero $zero --run_dir "$run" >"$run.txt" 2>&1; then
        fail "${name}_${n}ranks_zero$zero" "$(tail -2 "$run.txt")"
      elif ! grep -q "device cuda ($text.* x $n rank.*precision $prec" "$run.txt"; then
        fail "${name}_${n}ranks_zero$zero" "not $n rank(s) on the device in $prec: $(grep -m1 model: "$run.txt")"
      elif out=$(cmp_losses "$tmp/${name}_plain" "$run" "$tol"); then pass "${name}_${n}ranks_zero$zero"; echo "# $out"
      else fail "${name}_${n}ranks_zero$zero" "$out"; fi
    done
  done
}

# --device: on a GPU machine (scripts/gpu_check.sh), the NCCL checks with $TRAIN on the GPU(s).
if [ "${1:-}" = --device ]; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [ "$gpus" -lt 1 ]; then fail dist_nccl_gpu "no GPU (nvidia-smi -L lists none)"
  else
    ranks=$((gpus >= 8 ? 8 : gpus >= 4 ? 4 : gpus >= 2 ? 2 : 1))
    nccl_checks dist_nccl_gpu "$TRAIN" "$ranks" ""
    nccl_checks dist_nccl_gpu_bf16 "$TRAIN" "$ranks" "" --precision bf16 --attention flash
  fi
  finish
fi

if ! out=$(mpi 2 $TRAIN $args --steps 1 --run_dir "$tmp/probe" 2>&1); then
  fail dist_build "2 ranks did not run: $(tail -3 <<<"$out")"
  finish
elif ! grep -q "device cpu x 2 ranks" <<<"$out"; then
  fail dist_build "no '2 ranks' in the model line: $(grep -m1 model: <<<"$out")"
  finish
fi

# The CPU backend: 1 rank under mpirun with ZeRO-1 logs the plain run's losses bit for bit.
$TRAIN $args --pos rope --steps 5 --run_dir "$tmp/plain_rope" >/dev/null 2>&1
mpi 1 $TRAIN $args --pos rope --steps 5 --zero 1 --run_dir "$tmp/one_rank_zero1" >"$tmp/one_rank.txt" 2>&1
if ! grep -q "device cpu x 1 rank (ZeRO-1)" "$tmp/one_rank.txt"; then fail dist_1rank_zero1_bitwise "$(tail -2 "$tmp/one_rank.txt")"
elif out=$(cmp_losses "$tmp/plain_rope" "$tmp/one_rank_zero1" 0) &&
  out=$(cmp_tensors "$tmp/plain_rope/ckpt_000005/optim.safetensors" "$tmp/one_rank_zero1/ckpt_000005/optim.safetensors" 0)
then pass dist_1rank_zero1_bitwise; else fail dist_1rank_zero1_bitwise "$out"; fi

for pos in learned sinusoidal rope crope; do
  $TRAIN $args --pos $pos --steps 5 --run_dir "$tmp/one_$pos" >"$tmp/one_$pos.txt" 2>&1 ||
    { fail "dist_$pos" "1 process failed: $(tail -1 "$tmp/one_$pos.txt")"; continue; }
  for zero in 0 1; do
    run="$tmp/two_${pos}_zero$zero"
    if ! mpi 2 $TRAIN $args --pos $pos --steps 5 --zero $zero --run_dir "$run" >"$run.txt" 2>&1; then
      fail "dist_2ranks_zero${zero}_$pos" "failed: $(tail -2 "$run.txt")"; continue
    fi
    same "dist_2ranks_zero${zero}_$pos" "$tmp/one_$pos" "$run"
  done
done

# The comparison can fail: another seed is not the same run.
$TRAIN $args --pos rope --steps 5 --seed 7 --run_dir "$tmp/seed7" >/dev/null 2>&1
if cmp_losses "$tmp/one_rope" "$tmp/seed7" 1e-6 >/dev/null ||
  cmp_tensors "$tmp/one_rope/ckpt_000005/model.safetensors" "$tmp/seed7/ckpt_000005/model.safetensors" 1e-5 >/dev/null; then
  fail dist_compare_detects_difference "seed 7 compared equal to seed 1337"
else pass dist_compare_detects_difference; fi

# 2 ranks twice, shuffled order with ZeRO-1: bitwise-identical losses.
rep="--pos rope --data_order shuffle --zero 1 --steps 10"
mpi 2 $TRAIN $args $rep --run_dir "$tmp/rep_a" >/dev/null 2>&1
mpi 2 $TRAIN $args $rep --run_dir "$tmp/rep_b" >/dev/null 2>&1
if out=$(cmp_losses "$tmp/rep_a" "$tmp/rep_b" 0); then pass dist_bitwise_repeatable; else fail dist_bitwise_repeatable "$out"; fi

# Evaluation at lengths that do not divide the longest (MODEL.md, Evaluation: pieces of its
# windows, the short ones in their own batches): 2 ranks, each its rows, score the 1 process's
# tokens to rounding.
ev="--pos rope --steps 0 --eval_every 1 --eval_seq_lens 16,24,40 --eval_batches 3"
$TRAIN $args $ev --run_dir "$tmp/eval_one" >/dev/null 2>&1
mpi 2 $TRAIN $args $ev --run_dir "$tmp/eval_two" >"$tmp/eval_two.txt" 2>&1
tokens() { grep -o '"tokens":[0-9]*' "$1/log.jsonl" 2>/dev/null | tr -d '"' | xargs; }
if [ "$(tokens "$tmp/eval_two")" != 'tokens:160 tokens:160 tokens:160' ]; then
  fail dist_eval_pieces "tokens '$(tokens "$tmp/eval_two")': $(tail -2 "$tmp/eval_two.txt")"
elif out=$(cmp_losses "$tmp/eval_one" "$tmp/eval_two" 1e-6); then pass dist_eval_pieces; echo "# $out"
else fail dist_eval_pieces "$out"; fi

# Resume: a 2-rank run cut at step 5 and resumed at 2 ranks logs bit-identical losses; resumed
# at 1 rank (the moments gathered from the ZeRO-1 shards, the data position kept) it agrees to
# rounding; and a 1-process checkpoint resumes at 2 ranks.
mpi 2 $TRAIN $args $rep --steps 5 --run_dir "$tmp/cut2" >/dev/null 2>&1
cp -r "$tmp/cut2" "$tmp/cut1"
mpi 2 $TRAIN --resume "$tmp/cut2" --steps 10 >"$tmp/resume2.txt" 2>&1
if ! grep -q "resumed" "$tmp/resume2.txt"; then fail dist_resume_same_world "did not resume: $(tail -2 "$tmp/resume2.txt")"
elif out=$(cmp_losses "$tmp/rep_a" "$tmp/cut2" 0); then pass dist_resume_same_world
else fail dist_resume_same_world "$out"; fi
$TRAIN --resume "$tmp/cut1" --steps 10 >"$tmp/resume1.txt" 2>&1
if ! grep -q "resumed" "$tmp/resume1.txt"; then fail dist_resume_1_rank "did not resume: $(tail -2 "$tmp/resume1.txt")"
elif out=$(cmp_losses "$tmp/rep_a" "$tmp/cut1" 1e-6); then pass dist_resume_1_rank; echo "# $out"
else fail dist_resume_1_rank "$out"; fi
$TRAIN $args $rep --steps 5 --run_dir "$tmp/cut_single" >/dev/null 2>&1
mpi 2 $TRAIN --resume "$tmp/cut_single" --steps 10 >"$tmp/resume_up.txt" 2>&1
if ! grep -q "resumed" "$tmp/resume_up.txt"; then fail dist_resume_2_ranks_from_1 "did not resume: $(tail -2 "$tmp/resume_up.txt")"
elif out=$(cmp_losses "$tmp/rep_a" "$tmp/cut_single" 1e-6); then pass dist_resume_2_ranks_from_1; echo "# $out"
else fail dist_resume_2_ranks_from_1 "$out"; fi

# Bad input: each ends every rank with one clear message.
expect_fail dist_batch_must_split "error: .*batch_size 3 is the global batch.*multiple of 2" -- \
  mpi 2 $TRAIN $args --batch_size 3 --steps 1 --run_dir "$tmp/bad_batch"
expect_fail dist_zero_value "error: zero must be 0 or 1" -- $TRAIN $args --zero 2 --steps 1 --run_dir "$tmp/bad_zero"
expect_fail dist_timeout_value "error: dist_timeout must be >= 0" -- \
  $TRAIN $args --dist_timeout -1 --steps 1 --run_dir "$tmp/bad_timeout"
expect_fail dist_config_differs "error: .*the config of rank\(s\) 1 differs from rank 0's" -- \
  mpirun --oversubscribe -np 1 $TRAIN $args --steps 1 --run_dir "$tmp/bad_cfg" : -np 1 $TRAIN $args --steps 1 --lr 2e-3 --run_dir "$tmp/bad_cfg"
# the same config text, but rank 1's relative path names other tokens (a node with its own copy)
mkdir -p "$tmp/node0" "$tmp/node1"
cp "$tmp/tiny_train_000000.bin" "$tmp/tiny_val_000000.bin" "$tmp/node0/"
cp "$tmp/other_train_000000.bin" "$tmp/node1/tiny_train_000000.bin"
cp "$tmp/tiny_val_000000.bin" "$tmp/node1/"
rel=("$(realpath "$TRAIN")" ${args//$tmp\//} --steps 1 --run_dir "$tmp/bad_data")
expect_fail dist_data_differs "error: .*the training data of rank\(s\) 1 differs from rank 0's" -- \
  mpirun --oversubscribe -np 1 -wdir "$tmp/node0" "${rel[@]}" : -np 1 -wdir "$tmp/node1" "${rel[@]}"

# A rank killed mid-run: the others end within a bounded time, with a message; the last checkpoint loads.
# rank_pid RUN_PID RANK: the process of that rank among mpirun's children
rank_pid() {
  local p
  for p in $(pgrep -P "$1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$p"; return; }
  done
}
# kill_test NAME SIGNAL PATTERN EXTRA_ARGS: starts a long 2-rank run, sends SIGNAL to rank 1 after
# its first checkpoint, and expects the run to end within 60 s with PATTERN in its output
kill_test() {
  local name=$1 sig=$2 pattern=$3 run="$tmp/$1"; shift 3
  mpirun --oversubscribe -np 2 $TRAIN $args --pos rope --steps 100000 --eval_every 0 --checkpoint_every 20 "$@" \
    --run_dir "$run" >"$run.txt" 2>&1 &
  local mpid=$! t=0 victim=""
  while [ ! -f "$run/latest" ] && [ $t -lt 600 ]; do sleep 0.1; t=$((t + 1)); done
  victim=$(rank_pid "$mpid" 1)
  if [ -z "$victim" ]; then
    fail "$name" "rank 1 not found (run: $(tail -2 "$run.txt"))"; kill "$mpid" 2>/dev/null; wait "$mpid"; return
  fi
  local start=$SECONDS
  kill -"$sig" "$victim"
  t=0
  while kill -0 "$mpid" 2>/dev/null && [ $t -lt 600 ]; do sleep 0.1; t=$((t + 1)); done
  if kill -0 "$mpid" 2>/dev/null; then
    fail "$name" "still running 60 s after SIG$sig to rank 1"
    kill -KILL "$victim" 2>/dev/null; kill "$mpid" 2>/dev/null; wait "$mpid"; return
  fi
  wait "$mpid"; local rc=$?
  if [ $rc -eq 0 ]; then fail "$name" "exit status 0"
  elif ! grep -qE "$pattern" "$run.txt"; then fail "$name" "no '$pattern' in: $(tail -5 "$run.txt")"
  else pass "$name"; echo "# $name: ended $((SECONDS - start)) s after SIG$sig, exit status $rc: $(grep -m1 -E "$pattern" "$run.txt")"; fi
  if $TRAIN --resume "$run" --steps $(($(sed 's/ckpt_0*//' "$run/latest") + 1)) >"$run.resume.txt" 2>&1; then
    pass "${name}_checkpoint_loads"
  else fail "${name}_checkpoint_loads" "$(tail -2 "$run.resume.txt")"; fi
}
kill_test dist_rank_killed KILL "exited on signal 9|rank 1.*(killed|signal)"
# a stopped rank never reaches the next collective: rank 0's times out after dist_timeout
kill_test dist_rank_stuck_timeout STOP "error: rank 0/2: MPI .* did not finish within 3 s" --dist_timeout 3

# SIGTERM to the ranks (as Slurm sends at a job's end or on scancel): every rank stops after the
# same step, rank 0 writes the checkpoint and the "stopped" record, and the run resumes. (Open
# MPI's mpirun, given SIGTERM itself, ends the ranks about a second later: too soon to rely on.)
run="$tmp/sigterm"
mpirun --oversubscribe -np 2 $TRAIN $args --pos rope --steps 100000 --eval_every 0 --checkpoint_every 0 \
  --run_dir "$run" >"$run.txt" 2>&1 &
mpid=$! t=0
while ! grep -q '"step":5,' "$run/log.jsonl" 2>/dev/null && [ $t -lt 600 ]; do sleep 0.1; t=$((t + 1)); done
kill -TERM $(pgrep -P "$mpid")
t=0
while kill -0 "$mpid" 2>/dev/null && [ $t -lt 600 ]; do sleep 0.1; t=$((t + 1)); done
if kill -0 "$mpid" 2>/dev/null; then fail dist_sigterm "still running 60 s after SIGTERM"; kill -KILL "$mpid"
else
  stopped=$(grep '"type":"stopped"' "$run/log.jsonl" | sed 's/.*"step":\([0-9]*\).*/\1/')
  if [ -z "$stopped" ] || [ "$(cat "$run/latest" 2>/dev/null)" != "$(printf 'ckpt_%06d' "$stopped")" ]; then
    fail dist_sigterm "no stopped record with its checkpoint: $(tail -2 "$run.txt")"
  elif ! mpi 2 $TRAIN --resume "$run" --steps $((stopped + 2)) >"$run.resume.txt" 2>&1; then
    fail dist_sigterm "resume failed: $(tail -2 "$run.resume.txt")"
  else pass dist_sigterm; echo "# stopped at step $stopped, resumed to $((stopped + 2))"; fi
fi
wait "$mpid" 2>/dev/null

# The CUDA backend's NCCL path under the CPU execution layer (NCCL emulated over MPI).
if [ -n "${SKIP_EMU:-}" ]; then :
elif [ ! -x "$EMU_TRAIN" ]; then fail dist_nccl_emulated "$EMU_TRAIN missing (make emu builds it)"
else
  # stream work deferred until it is waited for: the overlapped all-reduce on its own stream runs
  # on stale gradients unless it waits on the compute stream's event
  CUDA_EMU_DEFER=1 nccl_checks dist_nccl_emulated "$EMU_TRAIN" 2 "CUDA emulation"
  nccl_checks dist_nccl_emulated_bf16 "$EMU_TRAIN" 2 "CUDA emulation" --precision bf16 --attention flash
fi
finish
