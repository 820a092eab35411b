# Every bad input must make build/train and build/sample print one "error: ..." line and exit
# non-zero (never crash, hang or train on garbage). The model is tiny so a run that wrongly
# starts ends fast.
source test/testlib.sh
TRAIN=${TRAIN:-build/train}
PYTHON=${PYTHON:-python3}
SAMPLE=${SAMPLE:-build/sample}
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

TINY=(--n_layer 1 --n_head 2 --n_embd 16 --vocab_size 64 --max_seq_len 16 --seq_len 8 --batch_size 2 --steps 1
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
echo '{"n_layer": 1, "seq-len": 8}' >"$tmp/typo.json"
expect_fail config_key_did_you_mean "^error: .*unknown config key 'seq-len' in .*typo.json \(did you mean 'seq_len'\?\)$" -- \
  run key "$good" --config "$tmp/typo.json"
expect_fail unknown_flag "^error: .*unknown option '--foo' \(see --help\)" -- run flag "$good" --foo 1
expect_fail unknown_flag_did_you_mean "^error: unknown option '--step' \(did you mean --steps\? see --help\)$" -- \
  run flag "$good" --step 3
expect_fail unknown_flag_did_you_mean_eq "^error: unknown option '--eval-seq-len' \(did you mean --eval_seq_lens\?" -- \
  run flag "$good" --eval-seq-len=64
expect_fail missing_value "^error: the value of --steps is missing$" -- run value "$good" --steps
expect_fail missing_value_before_option "^error: the value of --steps is missing \(the next argument, '--lr', is an option" -- \
  run value2 "$good" --steps --lr 0.1
# no arguments at all: the usage line, then what to give and where every key is listed
out=$("$TRAIN" 2>&1); rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <<<"$out")" -eq 2 ] && grep -q "^usage: train \[--config FILE.json\]" <<<"$out" &&
  grep -qE "^error: nothing to train: give a config .* --help lists every key$" <<<"$out"; then pass no_arguments_usage
else fail no_arguments_usage "status $rc: $(head -c 300 <<<"$out")"; fi
expect_fail bad_number "^error: .*--n_layer: expected an integer" -- run num "$good" --n_layer two
expect_fail heads_not_dividing "^error: .*n_embd \(9\) must be divisible by n_head \(2\)" -- run div "$good" --n_embd 9
expect_fail rope_odd_head "^error: .*pos=rope needs an even head size" -- run rope "$good" --n_embd 6
expect_fail crope_odd_head "^error: .*pos=crope needs an even head size" -- run crope "$good" --pos crope --n_embd 6
expect_fail crope_odd_embd "^error: .*pos=crope needs an even n_embd" -- \
  run crope2 "$good" --pos crope --n_embd 9 --n_head 1
expect_only_error sin_scale_zero "^error: .*sin_scale must be > 0, got 0$" -- run sin0 "$good" --pos sinusoidal --sin_scale 0
expect_only_error sin_scale_other_scheme "^error: .*sin_scale 0.5 is set, but pos=rope adds no sinusoidal table to scale" -- \
  run sinrope "$good" --sin_scale 0.5
# RoPE scaling: one error line naming the key, and no run folder
rope_bad() {  # NAME PATTERN ARGS...
  local name=$1 pattern=$2; shift 2
  expect_only_error "$name" "$pattern" -- run "$name" "$good" "$@"
  if [ -e "$tmp/run_$name" ]; then fail "${name}_nothing_written" "$tmp/run_$name exists"; else pass "${name}_nothing_written"; fi
}
# sizes whose layout would overflow (fuzz_config's finding: 4 x n_embd in an int)
rope_bad n_embd_too_large "^error: n_embd must be <= 1048576, got 1073741824$" --n_embd 1073741824 --n_head 1
rope_bad n_layer_too_large "^error: n_layer must be <= 1048576, got 2000000000$" --n_layer 2000000000
rope_bad parameters_past_2p53 "^error: the model is too large: 4.6[0-9e+]* parameters$" --n_layer 1048576 --n_embd 1048576 \
  --n_head 1 --mlp_hidden 8
rope_bad rope_scaling_unknown "^error: rope_scaling must be one of none \| linear \| ntk \| dynamic \| yarn \| llama3, got 'ntkk'$" \
  --rope_scaling ntkk
rope_bad rope_scaling_no_rotation "^error: rope_scaling linear is set, but pos=alibi rotates nothing to scale" \
  --pos alibi --rope_scaling linear
rope_bad rope_scaling_factor_below_one "^error: rope_scaling_factor must be 0 \(from the length\) or a finite s >= 1, got 0.5$" \
  --rope_scaling linear --rope_scaling_factor 0.5
rope_bad rope_scaling_factor_negative "^error: rope_scaling_factor must be 0 .* got -2$" --rope_scaling yarn --rope_scaling_factor -2
rope_bad rope_scaling_factor_text "^error: .*--rope_scaling_factor: expected a number" --rope_scaling ntk --rope_scaling_factor two
rope_bad rope_scaling_factor_without_scaling "^error: rope_scaling_factor 2 is set, but rope_scaling is none$" \
  --rope_scaling_factor 2
rope_bad rope_train_len_negative "^error: rope_train_len must be >= 0 \(0 = seq_len\), got -1$" --rope_train_len -1
# partial rotary: the share in (0, 1], for the rotary schemes, at least one pair of the head (size 8 here)
rope_bad partial_rotary_zero "^error: partial_rotary_factor must be in \(0, 1\], got 0$" --partial_rotary_factor 0
rope_bad partial_rotary_above_one "^error: partial_rotary_factor must be in \(0, 1\], got 1.5$" --partial_rotary_factor 1.5
rope_bad partial_rotary_text "^error: .*--partial_rotary_factor: expected a number" --partial_rotary_factor half
rope_bad partial_rotary_no_rotation "^error: partial_rotary_factor 0.5 is set, but pos=learned rotates nothing \(the key is for the rotary schemes\)$" \
  --pos learned --partial_rotary_factor 0.5
rope_bad partial_rotary_no_pair "^error: partial_rotary_factor 0.2 rotates no pair of head size 8: R = 2 floor\(f D / 2\) = 0, needs f >= 2/D$" \
  --partial_rotary_factor 0.2
expect_fail batch_size_zero "^error: .*batch_size must be >= 1" -- run b0 "$good" --batch_size 0
expect_fail eval_long_every_negative "^error: .*eval_long_every must be >= 0, got -1" -- run ele "$good" --eval_long_every -1
expect_fail seq_len_too_long "^error: .*seq_len 32 with max_seq_len 16" -- run t32 "$good" --seq_len 32
expect_fail classifier_chunk_negative "^error: .*classifier_chunk must be >= 0" -- run cc "$good" --classifier_chunk -1
expect_fail classifier_tile_not_128 "^error: .*classifier_tile must be 0 .*a positive multiple of 128, got 100" -- \
  run ct "$good" --classifier_tile 100
expect_fail classifier_tile_negative "^error: .*classifier_tile must be 0 .*got -128" -- run ctn "$good" --classifier_tile -128
expect_fail classifier_fused_tile "^error: .*classifier_chunk and classifier_tile shape the logits of --classifier logits; --classifier fused has none" -- \
  run cft "$good" --classifier fused --classifier_tile 128
expect_fail classifier_unknown "^error: .*classifier.*logits.*fused" -- run cu "$good" --classifier cut
expect_fail cuda_graph_value "^error: cuda_graph must be 0 or 1, got 2" -- run graph "$good" --cuda_graph 2
expect_fail tf32_value "^error: tf32 must be 0 or 1, got 2" -- run tf32 "$good" --tf32 2

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
d=$(mkdata zero 20240520 1 0 "")  # fuzz_shard's finding: no tokens at all (UBSan: memcpy from null)
expect_fail zero_tokens "^error: .*has no token windows \(0 tokens" -- run zero "$d"
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
echo "{\"train_data\": \"$good\", \"n_layer\": 1, \"n_head\": 2, \"n_embd\": 16, \"vocab_size\": 64, \"max_seq_len\": 16, \"seq_len\": 8}" \
  >"$tmp/nockpt/config.json"
expect_fail resume_no_checkpoint "^error: .*no checkpoint in '$tmp/nockpt'" -- "$TRAIN" --resume "$tmp/nockpt"
# --eval_only RUN_DIR: a folder that is no run, a run without a checkpoint (nothing to evaluate unless
# --init_from names weights), weights of another shape, a run without validation data, with --resume
expect_only_error eval_only_not_a_run "^error: cannot evaluate '$tmp/emptyrun' \(not a run folder\?\)" -- \
  "$TRAIN" --eval_only "$tmp/emptyrun"
expect_fail eval_only_no_checkpoint "^error: no checkpoint in '$tmp/nockpt' .*nothing to evaluate \(give --init_from" -- \
  "$TRAIN" --eval_only "$tmp/nockpt" --val_data "$good" --device cpu
run evalrun "$good" --checkpoint_every 1 >/dev/null 2>&1
expect_fail eval_only_shape_mismatch "^error: .*holds the weights of another model \(pos=rope L=1 .*this run's is pos=rope L=2 " -- \
  "$TRAIN" --eval_only "$tmp/run_evalrun" --n_layer 2
expect_fail eval_only_no_val_data "^error: --eval_only needs validation data: .* has no val_data" -- \
  "$TRAIN" --eval_only "$tmp/run_evalrun" --val_data ""
expect_only_error train_flag_with_value "^error: --overwrite takes no value, got '--overwrite=1'$" -- \
  "$TRAIN" --train_data "$good" --overwrite=1
expect_only_error eval_only_with_resume "^error: --eval_only evaluates a run .*--resume and --overwrite" -- \
  "$TRAIN" --eval_only "$tmp/run_evalrun" --resume "$tmp/run_evalrun"
if [ -e "$tmp/run_evalrun/eval.jsonl" ]; then fail eval_only_errors_write_no_log "$(cat "$tmp/run_evalrun/eval.jsonl")"
else pass eval_only_errors_write_no_log; fi
# a validation split too small for an evaluation length fails before any training step
expect_fail val_too_small_for_eval_len "^error: .*too small for 2 x \(100\+1\)" -- run evallen "$good" --eval_seq_lens 100
if grep -qs '"type":"train"' "$tmp/run_evallen/log.jsonl"; then fail val_too_small_fails_before_training "a step ran"
else pass val_too_small_fails_before_training; fi
# so where that length is n/a (learned positions end at max_seq_len 16): its windows set the tokens
expect_fail val_too_small_for_na_eval_len "^error: .*too small for 2 x \(100\+1\)" -- \
  run evallen_na "$good" --pos learned --eval_seq_lens 8,100

# bf16 is a CUDA-backend mode
expect_fail bf16_needs_cuda "^error: precision bf16 needs --device cuda" -- run bf16 "$good" --precision bf16

# --- what to do next: the command that prepares a dataset, and a text file given as a shard
expect_fail hint_prepare_wikitext2 "^error: no shards match 'data/wikitext2/nothing_train_\*.bin'; prepare it with: python3 data/prepare_data.py wikitext2" -- \
  run hint "data/wikitext2/nothing_train_*.bin"
mkdir -p "$tmp/text" && printf ' = Valkyria Chronicles III = \n\n Senjo no Valkyria 3 : Unrecorded Chronicles\n' >"$tmp/text/wiki_train_000000.bin"
expect_fail hint_text_file "^error: bad shard .*this looks like text, not a token shard: tokenize it" -- run text "$tmp/text"
expect_fail train_data_device "^error: cannot read /dev/zero: not a regular file" -- \
  "$TRAIN" "${TINY[@]}" --train_data /dev/zero --run_dir "$tmp/run_zero"

# --- diverged weights never become a checkpoint; a final evaluation that is not finite fails
expect_fail diverged_no_checkpoint "^error: .*(not finite|loss is)" -- \
  run nan "$good" --lr 1e39 --steps 2 --checkpoint_every 1 --eval_every 1
if [ ! -e "$tmp/run_nan/latest" ]; then pass diverged_latest_not_written
else fail diverged_latest_not_written "latest names $(cat "$tmp/run_nan/latest")"; fi
expect_fail diverged_final_eval_fails "^error: .*(not finite|loss is)" -- run nan1 "$good" --lr 1e39 --steps 1 --eval_every 1

# --- `latest` only ever names weights that gave a finite loss in a forward pass: lr 1e30 keeps the
# weights finite (about 1e30) but not the loss, so no checkpoint is written at all
expect_fail diverging_finite_weights "^error: the weights give a loss of -?(nan|inf) at step 1 .*the run has no checkpoint" -- \
  run div "$good" --lr 1e30 --steps 3 --checkpoint_every 1
if [ ! -e "$tmp/run_div/latest" ] && ! ls -d "$tmp"/run_div/ckpt_* >/dev/null 2>&1; then pass diverging_no_checkpoint
else fail diverging_no_checkpoint "$(ls "$tmp/run_div")"; fi
# a run that diverges after sound checkpoints keeps the last sound one as latest; resuming from it
# (with a sane lr) trains on from a sound state
run sound "$good" --steps 2 --checkpoint_every 1 >/dev/null 2>&1
expect_fail diverging_after_resume "^error: the weights give a loss of -?(nan|inf) at step 3 .*'latest' still names ckpt_000002" -- \
  "$TRAIN" --resume "$tmp/run_sound" --steps 4 --lr 1e30
if [ "$(cat "$tmp/run_sound/latest")" = ckpt_000002 ] && [ ! -e "$tmp/run_sound/ckpt_000003" ]; then pass diverging_latest_kept
else fail diverging_latest_kept "latest names $(cat "$tmp/run_sound/latest")"; fi
if out=$("$TRAIN" --resume "$tmp/run_sound" --steps 4 --lr 1e-3 2>&1) && grep -q "^step     4/4 | loss [0-9]" <<<"$out" &&
  [ "$(cat "$tmp/run_sound/latest")" = ckpt_000004 ]; then pass diverged_resume_continues
else fail diverged_resume_continues "$(tail -c 300 <<<"$out")"; fi

# --- the run's own checkpoints, damaged: a resumed state must be possible
run ok "$good" --steps 2 --checkpoint_every 1 >/dev/null 2>&1
cp -r "$tmp/run_ok" "$tmp/run_negstep"
echo '{"step": -4, "train_data": {"epoch": 0, "cursor": 0, "seq_len": 8, "shuffle": false, "seed": 1337}}' \
  >"$tmp/run_negstep/ckpt_000002/state.json"
expect_fail resume_negative_step "^error: bad training state in .*state.json" -- "$TRAIN" --resume "$tmp/run_negstep" --steps 3
cp -r "$tmp/run_ok" "$tmp/run_negcursor"
echo '{"step": 2, "train_data": {"epoch": 0, "cursor": -1, "seq_len": 8, "shuffle": false, "seed": 1337}}' \
  >"$tmp/run_negcursor/ckpt_000002/state.json"
expect_fail resume_negative_cursor "^error: bad training state .*'cursor' is -1" -- "$TRAIN" --resume "$tmp/run_negcursor" --steps 3
cp -r "$tmp/run_ok" "$tmp/run_badcfg" && echo '{"n_layer": 1,' >"$tmp/run_badcfg/config.json"
expect_fail resume_config_not_json "^error: cannot resume from .*: cannot parse .*run_badcfg/config.json" -- \
  "$TRAIN" --resume "$tmp/run_badcfg"
cp -r "$tmp/run_ok" "$tmp/run_nhead" && sed -i 's/"n_head": 2/"n_head": 4/' "$tmp/run_nhead/config.json"
expect_fail resume_edited_model_config "^error: .*model.safetensors holds the weights of another model \(pos=rope L=1 H=2" -- \
  "$TRAIN" --resume "$tmp/run_nhead" --steps 3
expect_fail resume_past_steps "^error: .*is at step 2, past steps = 1" -- "$TRAIN" --resume "$tmp/run_ok" --steps 1
# a torn latest checkpoint: one line, before the model's banner, naming the older one that reads back
cp -r "$tmp/run_ok" "$tmp/run_torn" && truncate -s 100 "$tmp/run_torn/ckpt_000002/optim.safetensors"
expect_only_error resume_torn_latest \
  "^error: the latest checkpoint .*ckpt_000002 does not read back .*; ckpt_000001 does: .*\(echo ckpt_000001 > .*run_torn/latest\)" -- \
  "$TRAIN" --resume "$tmp/run_torn" --steps 3
truncate -s 100 "$tmp/run_torn/ckpt_000002/model.safetensors"
expect_only_error eval_only_torn_latest "^error: the latest checkpoint .*ckpt_000002 does not read back" -- \
  "$TRAIN" --eval_only "$tmp/run_torn"
touch "$tmp/afile"
expect_only_error run_dir_file_one_line "^error: cannot create run folder '$tmp/afile': exists and is not a folder$" -- \
  "$TRAIN" "${TINY[@]}" --train_data "$good" --run_dir "$tmp/afile"

# stfix FILE.safetensors PYTHON_CODE: rewrite a safetensors file; the code edits `meta` (the config
# as a dict) and `data` (bytearray of the data section) in place
stfix() {
  "$PYTHON" - "$@" <<'PY'
import json, struct, sys
path, code = sys.argv[1], sys.argv[2]
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
data = bytearray(raw[8 + n:])
meta = json.loads(head["__metadata__"]["config"])
exec(code)
head["__metadata__"]["config"] = json.dumps(meta)
h = json.dumps(head).encode()
h += b" " * (-len(h) % 8)
open(path, "wb").write(struct.pack("<Q", len(h)) + h + bytes(data))
PY
}
w=$tmp/run_ok/ckpt_000002/model.safetensors
cp "$w" "$tmp/nhead0.safetensors" && stfix "$tmp/nhead0.safetensors" 'meta["n_head"] = 0'
expect_fail sample_checkpoint_n_head_zero "^error: the config in .*nhead0.safetensors is not valid: n_head must be >= 1" -- \
  "$SAMPLE" --checkpoint "$tmp/nhead0.safetensors"
cp "$w" "$tmp/maxt0.safetensors" && stfix "$tmp/maxt0.safetensors" 'meta["max_seq_len"] = 0'
expect_fail sample_checkpoint_max_seq_len_zero "^error: the config in .*maxt0.safetensors is not valid: max_seq_len" -- \
  "$SAMPLE" --checkpoint "$tmp/maxt0.safetensors"
cp "$w" "$tmp/badjson.safetensors"
"$PYTHON" - "$tmp/badjson.safetensors" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; head = json.loads(raw[8:8 + n])
head["__metadata__"]["config"] = "{not json"
h = json.dumps(head).encode(); h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + raw[8 + n:])
PY
expect_fail sample_checkpoint_config_not_json "^error: cannot parse the config in .*badjson.safetensors" -- \
  "$SAMPLE" --checkpoint "$tmp/badjson.safetensors"
cp "$w" "$tmp/nan.safetensors" && stfix "$tmp/nan.safetensors" 'data[0:4] = struct.pack("<f", float("nan"))'
expect_fail init_from_nan_weights "^error: .*nan.safetensors: tensor '[a-z.]+' holds non-finite values" -- \
  run initnan "$good" --init_from "$tmp/nan.safetensors"
expect_fail sample_nan_weights "^error: .*holds non-finite values" -- "$SAMPLE" --checkpoint "$tmp/nan.safetensors"
expect_only_error sample_rope_scaling_unknown "^error: rope_scaling must be one of none .* got 'big'$" -- \
  "$SAMPLE" --checkpoint "$w" --rope_scaling big
expect_only_error sample_rope_scaling_factor_below_one "^error: rope_scaling_factor must be 0 .* got 0.9$" -- \
  "$SAMPLE" --checkpoint "$w" --rope_scaling yarn --rope_scaling_factor 0.9
expect_only_error sample_rope_scaling_factor_text "^error: --rope_scaling_factor: expected a number" -- \
  "$SAMPLE" --checkpoint "$w" --rope_scaling yarn --rope_scaling_factor x
# xpos past its positions: q's factor zeta_0^(m/512) leaves fp32's normal range or k's inverse
# overflows (found here by stepping, not by the trainer's formula); the limit itself still samples
xmax=$("$PYTHON" -c '
import sys
z, m = 0.4 / 1.4, 0
while z ** (m / 512) >= sys.float_info.min * 2.0 ** 896 and z ** (-m / 512) <= 3.4028234663852886e38: m += 1
print(m)')  # 2^-126 = FLT_MIN: positions 0..m-1 are served
expect_only_error xpos_eval_seq_len_past_limit "^error: eval_seq_lens entry 40000 is past the $xmax positions of pos=xpos " -- \
  run xposeval "$good" --pos xpos --eval_seq_lens 8,40000
expect_only_error xpos_max_seq_len_past_limit "^error: max_seq_len $((xmax + 1)) is past the $xmax positions of pos=xpos " -- \
  run xposmax "$good" --pos xpos --max_seq_len $((xmax + 1))
cp "$w" "$tmp/xpos.safetensors" && stfix "$tmp/xpos.safetensors" 'meta["pos"] = "xpos"'
expect_only_error sample_xpos_context_past_limit "^error: --context: a context of $((xmax + 1)) tokens is past the $xmax positions of pos=xpos" -- \
  "$SAMPLE" --checkpoint "$tmp/xpos.safetensors" --context $((xmax + 1))
if out=$("$SAMPLE" --checkpoint "$tmp/xpos.safetensors" --context "$xmax" --tokens 2 --temperature 0 2>&1); then
  pass sample_xpos_context_at_limit
else fail sample_xpos_context_at_limit "$(tail -c 300 <<<"$out")"; fi
cp "$w" "$tmp/crope.safetensors" && stfix "$tmp/crope.safetensors" 'meta["pos"] = "crope"'
expect_fail init_from_other_model "^error: .*crope.safetensors holds the weights of another model \(pos=crope" -- \
  run initcrope "$good" --init_from "$tmp/crope.safetensors"
# sinusoidal weights belong to their table's factor: another factor is another model
cp "$w" "$tmp/sin.safetensors" && stfix "$tmp/sin.safetensors" 'meta["pos"] = "sinusoidal"; meta["sin_scale"] = 0.5'
expect_fail init_from_other_sin_scale "^error: .*sin.safetensors holds the weights of another model \(pos=sinusoidal .* sin_scale=0.5\)" -- \
  run initsin "$good" --pos sinusoidal --init_from "$tmp/sin.safetensors"
if out=$(run initsin_same "$good" --pos sinusoidal --sin_scale 0.5 --init_from "$tmp/sin.safetensors" 2>&1); then
  pass init_from_same_sin_scale
else fail init_from_same_sin_scale "$(tail -c 300 <<<"$out")"; fi

# a checkpoint that does not hold its own model (the tensors of one layer, the config of two):
# the error is all build/sample prints, no note about the missing GPT-2 vocabulary before it
run gpt2v "$good" --vocab_size 50257 --checkpoint_every 1 >/dev/null 2>&1
cp "$tmp/run_gpt2v/ckpt_000001/model.safetensors" "$tmp/twolayers.safetensors"
stfix "$tmp/twolayers.safetensors" 'meta["n_layer"] = 2'
expect_only_error sample_malformed_checkpoint_one_line "^error: .*twolayers.safetensors.*ln1.weight" -- \
  "$SAMPLE" --checkpoint "$tmp/twolayers.safetensors" --encoder_json "$tmp/no_encoder.json"

# --- build/sample arguments
ck=$tmp/run_ok
expect_fail sample_empty_prompt "^error: --prompt_ids ',' holds no ids" -- "$SAMPLE" --checkpoint "$ck" --prompt_ids ,
expect_fail sample_temperature_nan "^error: --temperature: expected a number, got 'nan'" -- \
  "$SAMPLE" --checkpoint "$ck" --temperature nan
expect_fail sample_tokens_not_number "^error: --tokens: expected an integer, got 'abc'" -- "$SAMPLE" --checkpoint "$ck" --tokens abc
expect_only_error sample_tokens_huge "^error: --tokens must be at most 1048576, got 2000000$" -- \
  "$SAMPLE" --checkpoint "$ck" --tokens 2000000
expect_only_error sample_tokens_past_int "^error: --tokens: expected an integer from -2147483648 to 2147483647, got '99999999999'$" -- \
  "$SAMPLE" --checkpoint "$ck" --tokens 99999999999
expect_only_error sample_top_k_negative "^error: --top_k must be >= 0 \(0 = the whole vocabulary\), got -1$" -- \
  "$SAMPLE" --checkpoint "$ck" --top_k -1
expect_only_error sample_temperature_negative "^error: --temperature must be >= 0 \(0 = greedy\), got -0.5$" -- \
  "$SAMPLE" --checkpoint "$ck" --temperature -0.5
expect_only_error sample_seed_negative "^error: --seed: expected a non-negative integer, got '-1'$" -- \
  "$SAMPLE" --checkpoint "$ck" --seed -1
expect_only_error sample_tokens_zero "^error: --tokens must be at least 1, got 0$" -- "$SAMPLE" --checkpoint "$ck" --tokens 0
expect_only_error sample_tokens_negative "^error: --tokens must be at least 1, got -5$" -- "$SAMPLE" --checkpoint "$ck" --tokens -5
expect_only_error sample_num_samples_zero "^error: --num_samples must be at least 1, got 0$" -- \
  "$SAMPLE" --checkpoint "$ck" --num_samples 0
expect_only_error sample_context_zero "^error: --context must be at least 1, got 0$" -- "$SAMPLE" --checkpoint "$ck" --context 0
expect_only_error sample_device_unknown "^error: device must be one of cpu \| cuda \| auto, got 'gpu'$" -- \
  "$SAMPLE" --checkpoint "$ck" --device gpu
expect_only_error sample_precision_unknown "^error: precision must be one of fp32 \| bf16, got 'fp16'$" -- \
  "$SAMPLE" --checkpoint "$ck" --precision fp16
expect_only_error sample_flag_with_value "^error: --no_cache takes no value, got '--no_cache=1'$" -- \
  "$SAMPLE" --checkpoint "$ck" --no_cache=1
expect_only_error sample_value_missing "^error: the value of --tokens is missing$" -- "$SAMPLE" --checkpoint "$ck" --tokens
expect_only_error sample_no_checkpoint "^error: --checkpoint is required \(see --help\)$" -- "$SAMPLE" --tokens 3
expect_only_error sample_bf16_on_cpu "^error: --precision bf16 needs --device cuda$" -- "$SAMPLE" --checkpoint "$ck" --precision bf16
# without a CUDA backend, or without a GPU it can use: what is missing
expect_only_error sample_cuda_not_here "^error: --device cuda: " -- "$SAMPLE" --checkpoint "$ck" --device cuda
expect_only_error sample_no_cache_with_attention "^error: --attention generates nothing: leave out --no_cache$" -- \
  "$SAMPLE" --checkpoint "$ck" --no_cache --attention "$tmp/a.json"
# learned positions (max_seq_len 16): no row past max_seq_len for the context or the prompt; the
# tiny run's RoPE takes a longer context, not a longer prompt than it
run learned "$good" --pos learned --checkpoint_every 1 >/dev/null 2>&1
expect_only_error sample_context_past_learned_table \
  "^error: --context: a context of 17 tokens is longer than max_seq_len 16, the rows of the learned position table$" -- \
  "$SAMPLE" --checkpoint "$tmp/run_learned" --context 17
long=$(seq -s ' ' 1 17)
expect_only_error sample_prompt_past_learned_table \
  "^error: the prompt has 17 tokens, more than the context of 16 \(max_seq_len: learned positions have no row past it\)$" -- \
  "$SAMPLE" --checkpoint "$tmp/run_learned" --prompt_ids "$long"
expect_only_error sample_prompt_past_context \
  "^error: the prompt has 17 tokens, more than the context of 16 \(max_seq_len; a longer one: --context N\)$" -- \
  "$SAMPLE" --checkpoint "$ck" --prompt_ids "$long"
if out=$("$SAMPLE" --checkpoint "$ck" --prompt_ids "$long" --context 20 --tokens 2 2>/dev/null) &&
  grep -qE "^1( [0-9]+){18}$" <<<"$out"; then pass sample_rope_context_past_max_seq_len
else fail sample_rope_context_past_max_seq_len "$out"; fi
echo '{}' >"$tmp/empty_encoder.json"
expect_fail sample_encoder_empty_object "^error: .*empty_encoder.json is not a GPT-2 encoder.json" -- \
  "$SAMPLE" --checkpoint "$ck" --encoder_json "$tmp/empty_encoder.json"
echo '{"a": "0"}' >"$tmp/string_encoder.json"
expect_fail sample_encoder_string_ids "^error: .*string_encoder.json: the id of 'a' is \"0\", not an integer" -- \
  "$SAMPLE" --checkpoint "$ck" --encoder_json "$tmp/string_encoder.json"
# --prompt TEXT: one of --prompt and --prompt_ids, a vocabulary with its merges beside it, text in
# UTF-8, a model of that vocabulary; the old name of --encoder_json is an unknown argument
expect_fail sample_unknown_flag_hint "^error: unknown option '--encoder' \(see --help\)" -- \
  "$SAMPLE" --checkpoint "$ck" --encoder "$tmp/empty_encoder.json"
expect_fail sample_prompt_and_ids "^error: --prompt and --prompt_ids both give the prompt: use one of them" -- \
  "$SAMPLE" --checkpoint "$ck" --prompt hi --prompt_ids 3
expect_fail sample_prompt_empty "^error: --prompt is empty" -- "$SAMPLE" --checkpoint "$ck" --prompt ""
expect_fail sample_prompt_ids_text "^error: bad --prompt_ids entry 'The' .*a text prompt is --prompt TEXT" -- \
  "$SAMPLE" --checkpoint "$ck" --prompt_ids "The history of"
out=$("$SAMPLE" --checkpoint "$ck" --prompt hi --encoder_json "$tmp/none/encoder.json" 2>&1)
if grep -q "no Unicode library" <<<"$out"; then
  skip sample_prompt_vocabulary "$SAMPLE has no Unicode library (ICU): test_no_icu.sh checks that build"
else
  expect_fail sample_prompt_no_vocab "^error: --prompt: no GPT-2 vocabulary at $tmp/none/encoder.json" -- \
    "$SAMPLE" --checkpoint "$ck" --prompt hi --encoder_json "$tmp/none/encoder.json"
  # a byte-level vocabulary of the 256 bytes alone (data/gpt2_tokenizer.py's byte map), first without merges
  mkdir -p "$tmp/bytes"
  "$PYTHON" -c 'import json, sys; sys.path.insert(0, "data"); import gpt2_tokenizer as gt
print(json.dumps({c: b for b, c in gt.bytes_to_unicode().items()}))' >"$tmp/bytes/encoder.json"
  expect_fail sample_prompt_no_merges "^error: --prompt: no GPT-2 merges at $tmp/bytes/vocab.bpe" -- \
    "$SAMPLE" --checkpoint "$ck" --prompt hi --encoder_json "$tmp/bytes/encoder.json"
  echo '#version: 0.2' >"$tmp/bytes/vocab.bpe"
  expect_fail sample_prompt_bad_utf8 "^error: --prompt: invalid UTF-8 at byte 3 \(0xE9\)" -- \
    "$SAMPLE" --checkpoint "$ck" --prompt $'caf\xe9' --encoder_json "$tmp/bytes/encoder.json"
  expect_fail sample_prompt_other_vocab "^error: --prompt: the model's vocabulary has 64 ids, not the 256 of .*give its ids with --prompt_ids" -- \
    "$SAMPLE" --checkpoint "$ck" --prompt hi --encoder_json "$tmp/bytes/encoder.json"
fi
# with --sample_every a broken encoder.json fails before any training step
expect_fail train_sample_encoder_first "^error: .*empty_encoder.json is not a GPT-2 encoder.json" -- \
  run enc "$good" --sample_every 1 --encoder_json "$tmp/empty_encoder.json"
if grep -qs '"type":"train"' "$tmp/run_enc/log.jsonl"; then fail train_sample_encoder_before_steps "a step ran"
else pass train_sample_encoder_before_steps; fi

# --- a config too large for the machine says how much it needs (not std::bad_alloc)
# and names the setting behind the largest part of it
expect_fail memory_huge_n_embd "^error: this model needs about [0-9.]+ GiB .*; n_layer 1, n_embd 1048576 and vocab_size 64: the weights" -- \
  run huge "$good" --n_embd 1048576 --n_head 8192
expect_fail memory_huge_mlp_hidden "^error: this model needs about [0-9.]+ GiB .*; n_layer 1, n_embd 16, mlp_hidden 2000000000 and vocab_size 64: the weights" -- \
  run hugeF "$good" --mlp_hidden 2000000000
expect_fail memory_huge_seq_len "^error: this model needs about [0-9.]+ GiB .*; batch_size 8 x seq_len 10000000: the activations alone" -- \
  run hugeT "$good" --max_seq_len 20000000 --seq_len 10000000 --batch_size 8
expect_fail memory_huge_max_seq_len "^error: this model needs about [0-9.]+ GiB .*; max_seq_len 100000000: the position table alone needs about [0-9.]+ GiB" -- \
  run hugeP "$good" --pos learned --max_seq_len 100000000
expect_fail memory_huge_eval_seq_len "^error: this model needs about [0-9.]+ GiB .*; eval_seq_lens entry 100000000: the activations" -- \
  run hugeE "$good" --eval_seq_lens 8,100000000

# --- --device cuda on a build without the CUDA backend says why it has none: left out on purpose
# (NVCC= on make's command line, as make cpu builds build_cpu/; test_make_run.sh checks which
# build defines it) or nvcc not found at build time
if grep -q 'device cuda: this build has no CUDA backend (' "$TRAIN"; then
  why="(built without it on purpose, as make run's build_cpu/ is|nvcc was not found at build time)"
  expect_only_error device_cuda_without_backend "^error: --device cuda: this build has no CUDA backend \($why" -- \
    run cuda "$good" --device cuda
else
  skip device_cuda_without_backend "$TRAIN has the CUDA backend"
fi

finish
