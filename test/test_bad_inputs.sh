# Every bad input must make build/train print one "error: ..." line and exit non-zero (never
# crash, hang or train on garbage). The model is tiny so a run that wrongly starts ends fast.
source test/testlib.sh
TRAIN=${TRAIN:-build/train}
PYTHON=${PYTHON:-python3}
if [ ! -x "$TRAIN" ]; then
  skip bad_inputs "$TRAIN not built"
  finish
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# mkshard PATH MAGIC VERSION N TOKENS: header [MAGIC, VERSION, N] then TOKENS ("1,2,3") as uint16
mkshard() {
  "$PYTHON" -c '
import struct, sys
path, magic, version, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
tokens = [int(t) for t in sys.argv[5].split(",") if t]
with open(path, "wb") as f:
    f.write(struct.pack("<256i", magic, version, n, *[0] * 253))
    f.write(struct.pack("<%dH" % len(tokens), *tokens))
' "$@"
}
toks=$(seq -s, 0 63),$(seq -s, 0 63),$(seq -s, 0 63)   # 192 tokens < V = 64
# data folder NAME with a train shard made by mkshard ARGS... and a good val shard
mkdata() {
  local d=$tmp/$1; shift
  mkdir -p "$d"
  mkshard "$d/x_val_000000.bin" 20240520 1 192 "$toks"
  [ $# -gt 0 ] && mkshard "$d/x_train_000000.bin" "$@"
  echo "$d"
}
good=$(mkdata good 20240520 1 192 "$toks")

TINY=(--n_layer 1 --n_head 2 --n_embd 8 --vocab_size 64 --max_seq_len 16 --seq_len 8 --batch_size 2 --steps 1
      --device cpu --eval_every 0 --checkpoint_every 0)
# run NAME DATA_FOLDER EXTRA_ARGS...: train on DATA_FOLDER in a fresh run folder
run() {
  local name=$1 data=$2; shift 2
  "$TRAIN" "${TINY[@]}" --train_data "$data" --val_data "$data" --run_dir "$tmp/run_$name" "$@"
}

# control: the same command line with good inputs must work, so each failure below is the bad input's
if out=$(run control "$good" 2>&1); then pass good_inputs_control
else fail good_inputs_control "tiny run on good data failed: $(tail -c 300 <<<"$out")"; fi

echo '{"n_layer": 1,, }' >"$tmp/bad.json"
expect_fail malformed_json "^error: .*cannot parse config .*bad.json" -- run json "$good" --config "$tmp/bad.json"
echo '{"n_layer": 1, "foo": 2}' >"$tmp/unknown.json"
expect_fail unknown_config_key "^error: .*unknown config key 'foo' in .*unknown.json" -- \
  run key "$good" --config "$tmp/unknown.json"
expect_fail unknown_flag "^error: .*unknown option '--foo'" -- run flag "$good" --foo 1
expect_fail missing_value "^error: .*needs a value" -- run value "$good" --steps
expect_fail bad_number "^error: .*--n_layer: expected an integer" -- run num "$good" --n_layer two
expect_fail heads_not_dividing "^error: .*n_embd \(9\) must be divisible by n_head \(2\)" -- run div "$good" --n_embd 9
expect_fail rope_odd_head "^error: .*pos=rope needs an even head size" -- run rope "$good" --n_embd 6
expect_fail crope_odd_head "^error: .*pos=crope needs an even head size" -- run crope "$good" --pos crope --n_embd 6
expect_fail crope_odd_embd "^error: .*pos=crope needs an even n_embd" -- \
  run crope2 "$good" --pos crope --n_embd 9 --n_head 1
expect_fail batch_size_zero "^error: .*batch_size must be >= 1" -- run b0 "$good" --batch_size 0
expect_fail seq_len_too_long "^error: .*seq_len 32 with max_seq_len 16" -- run t32 "$good" --seq_len 32

d=$(mkdata magic 20240521 1 192 "$toks")
expect_fail wrong_magic "^error: .*bad magic 20240521" -- run magic "$d"
d=$(mkdata version 20240520 2 192 "$toks")
expect_fail wrong_version "^error: .*unsupported version 2" -- run version "$d"
d=$(mkdata trunc 20240520 1 192 "$toks")
head -c 500 "$d/x_train_000000.bin" >"$d/t" && mv "$d/t" "$d/x_train_000000.bin"
expect_fail truncated_header "^error: .*truncated" -- run trunc "$d"
d=$(mkdata short 20240520 1 300 "$toks")
expect_fail truncated_tokens "^error: .*does not match the header's 300 tokens" -- run short "$d"
d=$(mkdata extra 20240520 1 192 "$toks")
printf x >>"$d/x_train_000000.bin"
expect_fail size_not_1024_2n "^error: .*file size 1409 bytes does not match" -- run extra "$d"
d=$(mkdata token 20240520 1 3 "1,2,64")
expect_fail token_too_large "^error: .*token at index 2 is 64, not < vocab_size 64" -- run token "$d"
d=$(mkdata empty 20240520 1 1 "5")
expect_fail empty_split "^error: .*has no token windows" -- run empty "$d"
d=$(mkdata small 20240520 1 10 "0,1,2,3,4,5,6,7,8,9")
expect_fail split_too_small "^error: .*too small for 2 x \(8\+1\)" -- run small "$d"
d=$(mkdata notrain)
expect_fail no_train_split "^error: .*no shards match" -- run notrain "$d"
expect_fail missing_data_folder "^error: .*no shards match '$tmp/nowhere'" -- run nowhere "$tmp/nowhere"

expect_fail run_dir_in_proc "^error: .*cannot create run folder '/proc/x" -- run proc "$good" --run_dir /proc/x/run
touch "$tmp/afile"
expect_fail run_dir_is_file "^error: .*cannot create run folder '$tmp/afile" -- run file "$good" --run_dir "$tmp/afile"
expect_fail missing_init_from "^error: .*cannot read .*nope.safetensors" -- \
  run init "$good" --init-from "$tmp/nope.safetensors"
mkdir -p "$tmp/emptyrun"
expect_fail resume_empty_folder "^error: .*(no checkpoint in|cannot resume from) '$tmp/emptyrun'" -- \
  "$TRAIN" --resume "$tmp/emptyrun"
# a run folder that has its config.json but never reached a checkpoint
mkdir -p "$tmp/nockpt"
echo "{\"train_data\": \"$good\", \"n_layer\": 1, \"n_head\": 2, \"n_embd\": 8, \"vocab_size\": 64, \"max_seq_len\": 16, \"seq_len\": 8}" \
  >"$tmp/nockpt/config.json"
expect_fail resume_no_checkpoint "^error: .*no checkpoint in '$tmp/nockpt'" -- "$TRAIN" --resume "$tmp/nockpt"
# a validation split too small for an evaluation length fails before any training step
expect_fail val_too_small_for_eval_len "^error: .*too small for 2 x \(100\+1\)" -- run evallen "$good" --eval_seq_lens 100
if grep -qs '"type":"train"' "$tmp/run_evallen/log.jsonl"; then fail val_too_small_fails_before_training "a step ran"
else pass val_too_small_fails_before_training; fi

# bf16 is a CUDA-backend mode
expect_fail bf16_needs_cuda "^error: precision bf16 needs --device cuda" -- run bf16 "$good" --precision bf16

finish
