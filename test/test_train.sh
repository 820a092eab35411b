# End-to-end checks of build/train on tiny shards: the printed parameter counts
# (SPEC's table), a short run whose loss falls, and resume equivalence (a run
# stopped at step k and resumed logs bit-identical losses to one that never stopped).
source test/testlib.sh
TRAIN=${TRAIN:-build/train}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A small learnable stream: a repeating pattern of 12 tokens with some noise.
"$PYTHON" - "$tmp" <<'PY'
import struct, random, sys
random.seed(0)
def shard(path, toks):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(toks), *([0] * 253)))
        f.write(struct.pack("<%dH" % len(toks), *toks))
pat = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8]
toks = [pat[i % 12] if random.random() > 0.1 else random.randrange(16) for i in range(20000)]
shard(sys.argv[1] + "/tiny_train_000000.bin", toks[:16000])
shard(sys.argv[1] + "/tiny_val_000000.bin", toks[16000:])
PY
data="--train_data $tmp/tiny_train_000000.bin --val_data $tmp/tiny_val_000000.bin"
tiny="--n_layer 2 --n_head 2 --n_embd 16 --vocab_size 16 --max_seq_len 32 --seq_len 16 --batch_size 4"

# Parameter counts at V=50257, maxT=1024, C=128, L=4, H=4 (SPEC); no step is run.
for row in "learned 7,357,312 264,192" "sinusoidal 7,226,240 264,192" "rope 7,226,240 264,192" "crope 7,127,936 165,888"; do
  set -- $row
  out=$($TRAIN $data --pos $1 --steps 0 --eval_every 0 --checkpoint_every 0 --run_dir "$tmp/count_$1" 2>&1)
  if grep -q "parameters: total $2 | embeddings .* | attention block $3" <<<"$out"; then pass "param_counts_$1"
  else fail "param_counts_$1" "expected total $2, attention $3 in: $(grep parameters <<<"$out")"; fi
done

# Help text lists the keys with defaults.
if $TRAIN --help | grep -q -- "--pos"; then pass train_help; else fail train_help "--help does not list --pos"; fi

# Loss falls in a short run, for every pos mode.
for pos in learned sinusoidal rope crope; do
  $TRAIN $data $tiny --pos $pos --steps 60 --lr 3e-3 --eval_every 60 --eval_batches 4 --checkpoint_every 0 \
    --run_dir "$tmp/fall_$pos" >"$tmp/fall_$pos.txt" 2>&1
  first=$(grep -m1 '"type":"val"' "$tmp/fall_$pos/log.jsonl" | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/')
  last=$(grep '"type":"val"' "$tmp/fall_$pos/log.jsonl" | tail -1 | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/')
  if [ -n "$first" ] && [ -n "$last" ] && awk "BEGIN{exit !($last < 0.85 * $first)}"; then pass "loss_falls_$pos"
  else fail "loss_falls_$pos" "val loss $first -> $last"; fi
done

# Resume equivalence, sequential and shuffled order, on crope and learned.
strip() { grep -E '"type":"(train|val)"' "$1" | sed 's/"step_ms":[^,]*,//; s/,"tokens_per_s":[^}]*//'; }
for mode in "crope sequential" "learned shuffle"; do
  set -- $mode
  common="$data $tiny --pos $1 --data_order $2 --eval_every 10 --eval_batches 2 --checkpoint_every 20 --step_size 15 --gamma 0.5"
  $TRAIN $common --steps 50 --run_dir "$tmp/full_$1" >/dev/null 2>&1
  $TRAIN $common --steps 20 --run_dir "$tmp/cut_$1" >/dev/null 2>&1
  $TRAIN --resume "$tmp/cut_$1" --steps 50 >"$tmp/resume_$1.txt" 2>&1
  if ! grep -q "resumed" "$tmp/resume_$1.txt"; then fail "resume_bit_identical_$1_$2" "resume did not run: $(tail -2 "$tmp/resume_$1.txt")"
  elif diff <(strip "$tmp/full_$1/log.jsonl") <(strip "$tmp/cut_$1/log.jsonl") >"$tmp/diff.txt"; then
    pass "resume_bit_identical_$1_$2"
  else fail "resume_bit_identical_$1_$2" "logs differ: $(head -c 300 "$tmp/diff.txt")"; fi
done

# A checkpoint's weights load with --init-from and give the same first loss.
$TRAIN $data $tiny --pos rope --steps 1 --eval_every 1 --eval_batches 2 --checkpoint_every 1 --run_dir "$tmp/src" >/dev/null 2>&1
$TRAIN $data $tiny --pos rope --steps 0 --eval_batches 2 --checkpoint_every 0 --run_dir "$tmp/dst" \
  --init_from "$tmp/src/ckpt_000001/model.safetensors" >/dev/null 2>&1
a=$(grep '"type":"val"' "$tmp/src/log.jsonl" | tail -1 | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/')
b=$(grep '"type":"val"' "$tmp/dst/log.jsonl" | tail -1 | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/')
if [ -n "$a" ] && [ "$a" = "$b" ]; then pass init_from_weights; else fail init_from_weights "val loss $a vs $b"; fi
finish
