# The trainer's FLOP/s (src/flops.h, MODEL.md "FLOPs"): the progress line shows it, each train
# record of the log carries it, and the two agree with the step's count: L=2 C=16 V=50, 4 rows of
# T=8 make 1,431,552 FLOPs a step (test_io's flops_hand_count counts them by hand). No MFU on a
# CPU, nor on a GPU whose peak the trainer does not know (test_io: flops_gpu_peaks).
source test/testlib.sh
TRAIN=${TRAIN:-build/train}
needs_built flops "$TRAIN"
scratch
pattern_shards "$tmp" 1 0.1 50 3000 f_train:0:
out=$("$TRAIN" --train_data "$tmp/f_train_000000.bin" --n_layer 2 --n_head 2 --n_embd 16 --vocab_size 50 \
  --max_seq_len 8 --seq_len 8 --batch_size 4 --steps 3 --eval_every 0 --checkpoint_every 0 --device cpu \
  --run_dir "$tmp/run" 2>&1)
if [ "$(grep -cE '^step +[0-9]+/3 \|.* tok/s \| [0-9.]+ GFLOP/s \| ETA ' <<<"$out")" = 3 ] && ! grep -q MFU <<<"$out"; then
  pass flops_progress_line
else fail flops_progress_line "$(grep '^step' <<<"$out" | head -c 300)"; fi
"$PYTHON" - "$tmp/run/log.jsonl" <<'PY' && pass flops_log || fail flops_log "flops_per_s x step_ms is not the step's 1,431,552 FLOPs"
import json, sys
train = [r for r in map(json.loads, open(sys.argv[1])) if r["type"] == "train"]
ok = len(train) == 3 and all(abs(r["flops_per_s"] * r["step_ms"] / 1000 / 1431552 - 1) < 1e-9 and "mfu" not in r
                             for r in train)
sys.exit(0 if ok else 1)
PY
finish
