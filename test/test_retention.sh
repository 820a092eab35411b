# Checkpoint retention (keep_checkpoints, keep_every): what is kept, and that a SIGKILL at any
# point of writing a checkpoint and pruning the old ones leaves a run that resumes to the same
# weights as a run never killed. strace delivers the kill at the N-th call of each system call that
# changes the run folder, for every N the run makes (make test: every 4th).
source test/testlib.sh
TRAIN=${TRAIN:-build/train}
needs_built retention "$TRAIN"
scratch
pattern_shards "$tmp" 1 0.1 16 6000 r_train:0:4000 r_val:4000:
run=("$TRAIN" --train_data "$tmp/r_train_000000.bin" --val_data "$tmp/r_val_000000.bin" --n_layer 1 --n_head 2
  --n_embd 16 --vocab_size 16 --max_seq_len 32 --seq_len 16 --batch_size 4 --device cpu --eval_every 0
  --checkpoint_every 1)
ckpts() { (cd "$1" && ls -d ckpt_* 2>/dev/null | tr '\n' ' '); }
# the tensors of a safetensors file without its header (which holds the config, run_dir included)
tensors_md5() { tail -c +$(($(od -An -tu8 -N8 "$1") + 9)) "$1" | md5sum; }

# --- what is kept: the newest keep_checkpoints, the multiples of keep_every, all with 0
"${run[@]}" --steps 7 --keep_checkpoints 2 --keep_every 3 --run_dir "$tmp/k" >/dev/null 2>&1
[ "$(ckpts "$tmp/k")" = "ckpt_000003 ckpt_000006 ckpt_000007 " ] && pass retention_keeps_newest_and_multiples ||
  fail retention_keeps_newest_and_multiples "left: $(ckpts "$tmp/k")"
"${run[@]}" --steps 3 --keep_checkpoints 0 --run_dir "$tmp/all" >/dev/null 2>&1
[ "$(ckpts "$tmp/all")" = "ckpt_000001 ckpt_000002 ckpt_000003 " ] && pass retention_zero_keeps_all ||
  fail retention_zero_keeps_all "left: $(ckpts "$tmp/all")"
# the default keeps 2
"${run[@]}" --steps 4 --run_dir "$tmp/default" >/dev/null 2>&1
[ "$(ckpts "$tmp/default")" = "ckpt_000003 ckpt_000004 " ] && pass retention_default_two ||
  fail retention_default_two "left: $(ckpts "$tmp/default")"
for key in keep_checkpoints keep_every; do
  expect_only_error "retention_bad_$key" "^error: $key must be >= 0 .*got -1$" -- "${run[@]}" --$key -1 --run_dir "$tmp/bad"
done

# --- a kill anywhere: from a run at step 2 to step 4, keeping one checkpoint
if ! command -v strace >/dev/null; then
  skip retention_kill "strace not installed (Debian's strace)"
  finish
fi
calls=rename,renameat,renameat2,unlink,unlinkat,rmdir,mkdir,mkdirat,fsync,fdatasync
"${run[@]}" --steps 2 --keep_checkpoints 1 --run_dir "$tmp/base" >/dev/null 2>&1
cp -r "$tmp/base" "$tmp/ref"
strace -f -qq -o "$tmp/calls.txt" -e trace=$calls "$TRAIN" --resume "$tmp/ref" --steps 4 >/dev/null 2>&1
ref_weights=$(tensors_md5 "$tmp/ref/ckpt_000004/model.safetensors")
bad="" n_kills=0
for call in ${calls//,/ }; do
  count=$(grep -cE "^[0-9]+ +$call\(" "$tmp/calls.txt")
  for ((n = 1; n <= count; n += ${TEST_ALL:-0} == 1 ? 1 : 4)); do
    d=$tmp/kill_${call}_$n
    cp -r "$tmp/base" "$d"
    (strace -f -qq -o /dev/null -e trace=$call -e inject=$call:signal=KILL:when=$n "$TRAIN" --resume "$d" --steps 4
      :) >/dev/null 2>&1  # (not exec'd: the subshell, not this shell, says "Killed")
    n_kills=$((n_kills + 1))
    # whatever the kill left: `latest` names a checkpoint, and resuming finishes the run to the same weights
    if ! "$TRAIN" --resume "$d" --steps 4 >"$d.out" 2>&1; then bad+=" $call#$n: resume failed: $(tail -1 "$d.out");"
    elif [ "$(tensors_md5 "$d/ckpt_000004/model.safetensors")" != "$ref_weights" ]; then bad+=" $call#$n: other weights;"
    elif [ "$(ckpts "$d")" != "ckpt_000004 " ] || ls -d "$d"/*.del "$d"/*.tmp >/dev/null 2>&1; then
      bad+=" $call#$n: left $(ls "$d" | tr '\n' ' ');"
    fi
  done
done
if [ "$n_kills" -lt 10 ]; then fail retention_kill_anywhere "only $n_kills points found in $tmp/calls.txt"
elif [ -z "$bad" ]; then pass retention_kill_anywhere
else fail retention_kill_anywhere "of $n_kills kills:$bad"; fi
finish
