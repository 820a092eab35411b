# build/sample end to end: for every position scheme a tiny trained model gives the same text with
# the KV cache as with --no_cache (greedy and seeded sampling, the text growing past max_seq_len
# 16), the sliding window said once; --num_samples and the speed line; rope and alibi past
# max_seq_len with --context; another RoPE scaling than the trained one; and the same with --device cuda under the emulation (make emu),
# fp32 and bf16. test_generate and test_cuda_generate compare the logits step by step.
source test/testlib.sh
TRAIN=${TRAIN:-build/train}
SAMPLE=${SAMPLE:-build/sample}
EMU_SAMPLE=${EMU_BUILD:-${BUILD:-build}_emu}/sample
PYTHON=${PYTHON:-$(scripts/pick_python.sh)}
needs_built sample "$TRAIN"
needs_built sample "$SAMPLE"
scratch
pattern_shards "$tmp" 0 0.2 16 20000 t_train:0:16000 t_val:16000:
tiny=(--train_data "$tmp/t_train_000000.bin" --val_data "$tmp/t_val_000000.bin" --n_layer 2 --n_head 2 --n_embd 16
  --vocab_size 16 --max_seq_len 16 --seq_len 16 --batch_size 4 --steps 40 --lr 3e-3 --eval_every 0
  --checkpoint_every 40 --device cpu)
schemes=$("$TRAIN" --list-pos)
for pos in $schemes; do OMP_NUM_THREADS=1 "$TRAIN" "${tiny[@]}" --pos "$pos" --run_dir "$tmp/$pos" >/dev/null 2>&1 & done
# partial rotary: half of each head's channels rotating (the checkpoint's config carries the factor)
OMP_NUM_THREADS=1 "$TRAIN" "${tiny[@]}" --partial_rotary_factor 0.5 --run_dir "$tmp/partial" >/dev/null 2>&1 &
wait

# out NAME ARGS...: build/sample's stdout into $tmp/NAME.out, stderr into $tmp/NAME.err
out() {
  local name=$1; shift
  "$SAMPLE" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
}
for pos in $schemes; do
  ck=(--checkpoint "$tmp/$pos" --prompt_ids "3 1 4 1 5")
  why=""
  for mode in "--temperature 0" "--temperature 0.8 --top_k 8 --seed 3"; do
    # shellcheck disable=SC2086
    out a "${ck[@]}" --tokens 40 $mode && out b "${ck[@]}" --tokens 40 $mode --no_cache || why+="exit status; "
    cmp -s "$tmp/a.out" "$tmp/b.out" || why+="($mode) cache '$(cat "$tmp/a.out")' vs no cache '$(cat "$tmp/b.out")'; "
    grep -qE '^3 1 4 1 5( [0-9]+){40}$' "$tmp/a.out" || why+="output '$(cat "$tmp/a.out")'; "
    for f in a b; do
      [ "$(grep -c '^note: the text is longer than the context of 16 tokens' "$tmp/$f.err")" -eq 1 ] ||
        why+="$f: not one note of the sliding window: $(cat "$tmp/$f.err"); "
    done
    grep -qE '^speed: prefill 5 tokens at [0-9]+ tokens/s, generation 39 tokens at [0-9.]+ tokens/s \(KV cache, cpu\)$' \
      "$tmp/a.err" || why+="speed line '$(tail -1 "$tmp/a.err")'; "
    grep -q '(full recompute, cpu)$' "$tmp/b.err" || why+="no-cache speed line '$(tail -1 "$tmp/b.err")'; "
  done
  if [ -z "$why" ]; then pass "sample_cache_equals_recompute_$pos"; else fail "sample_cache_equals_recompute_$pos" "$why"; fi
done

# --num_samples: one after another from one seed, each under its header; the note once; the speed
# over all of them (prefill 2 x 1 token, generation 2 x 19)
out n --checkpoint "$tmp/rope" --prompt_ids 3 --tokens 20 --num_samples 2 --seed 5
if [ "$(grep -c '^--- sample [12] of 2 ---$' "$tmp/n.out")" -eq 2 ] && [ "$(grep -cE '^3( [0-9]+){20}$' "$tmp/n.out")" -eq 2 ] &&
  [ "$(grep -c '^note:' "$tmp/n.err")" -eq 1 ] && grep -q '^speed: prefill 2 tokens .* generation 38 tokens' "$tmp/n.err"
then pass sample_num_samples
else fail sample_num_samples "$(cat "$tmp/n.out" "$tmp/n.err")"; fi
# the first of them is the text a single sample with that seed gives
out one --checkpoint "$tmp/rope" --prompt_ids 3 --tokens 20 --seed 5
if [ "$(sed -n 2p "$tmp/n.out")" = "$(cat "$tmp/one.out")" ]; then pass sample_num_samples_first_is_single
else fail sample_num_samples_first_is_single "'$(sed -n 2p "$tmp/n.out")' vs '$(cat "$tmp/one.out")'"; fi

# --device auto: the GPU where one is usable, else the CPU, with the CPU's very text
out auto --checkpoint "$tmp/rope" --prompt_ids "3 1 4" --tokens 8 --seed 3 --device auto
out cpu3 --checkpoint "$tmp/rope" --prompt_ids "3 1 4" --tokens 8 --seed 3
if [ -s "$tmp/auto.out" ] && { grep -q ', cuda)$' "$tmp/auto.err" ||
  { grep -q ', cpu)$' "$tmp/auto.err" && cmp -s "$tmp/auto.out" "$tmp/cpu3.out"; }; }; then pass sample_device_auto
else fail sample_device_auto "$(cat "$tmp/auto.out" "$tmp/auto.err")"; fi

# --help: every option, from the key table the parser reads, with its default and a choice key's choices
help=$("$SAMPLE" --help)
why=""
for k in checkpoint rope_scaling rope_scaling_factor prompt prompt_ids encoder_json tokens temperature top_k seed \
  num_samples context device precision attention no_cache; do
  grep -q -- "^  --$k " <<<"$help" || why+="no line for --$k; "
done
grep -q -- '^  --tokens  *64  *tokens to generate' <<<"$help" || why+="--tokens without its default 64; "
grep -q -- '^  --device .*: cpu | cuda | auto$' <<<"$help" || why+="--device without its choices; "
if [ -z "$why" ]; then pass sample_help_lists_options; else fail sample_help_lists_options "$why$help"; fi

# --tokens 1: the token comes from the prefill's logits; the speed line says there was no step
out t1 --checkpoint "$tmp/rope" --prompt_ids "3 1 4" --tokens 1 --temperature 0
if grep -qE '^speed: prefill 3 tokens at [0-9]+ tokens/s, no generation step after the prefill \(KV cache, cpu\)$' \
  "$tmp/t1.err"; then pass sample_one_token_speed_line
else fail sample_one_token_speed_line "$(cat "$tmp/t1.err")"; fi

# past max_seq_len with --context 24 (no row of a table needed): cache = recompute, no sliding
for pos in rope alibi xpos; do
  ck=(--checkpoint "$tmp/$pos" --prompt_ids "3 1 4 1 5" --tokens 19 --temperature 0 --context 24)
  if out a "${ck[@]}" && out b "${ck[@]}" --no_cache && cmp -s "$tmp/a.out" "$tmp/b.out" &&
    ! grep -q '^note:' "$tmp/a.err"; then pass "sample_context_past_max_seq_len_$pos"
  else fail "sample_context_past_max_seq_len_$pos" "$(cat "$tmp/a.out" "$tmp/b.out" "$tmp/a.err")"; fi
done

# a rope checkpoint trained without scaling, sampled under linear, yarn and llama3 past its training
# length 16 (seeded sampling): cache = recompute (the cache recomputed as s grows), and not the
# unscaled text; the same for the partial-rotary checkpoint under llama3
for ckpt in rope partial; do
  ck=(--checkpoint "$tmp/$ckpt" --prompt_ids "3 1 4 1 5" --tokens 40 --temperature 0.9 --seed 1 --context 48)
  out plain "${ck[@]}"
  for sc in linear yarn llama3; do
    [ $ckpt = partial ] && [ $sc != llama3 ] && continue
    name=sample_rope_scaling_$sc$([ $ckpt = partial ] && echo _partial)
    if out a "${ck[@]}" --rope_scaling $sc && out b "${ck[@]}" --rope_scaling $sc --no_cache &&
      cmp -s "$tmp/a.out" "$tmp/b.out" && ! cmp -s "$tmp/a.out" "$tmp/plain.out"; then pass "$name"
    else fail "$name" "$(cat "$tmp/a.out" "$tmp/b.out" "$tmp/plain.out" "$tmp/a.err")"; fi
  done
done

# --device cuda under the emulation: the CPU's text in fp32 (TF32 or not, these greedy runs agree),
# cache = recompute in bf16
if [ -x "$EMU_SAMPLE" ]; then
  for pos in learned rope crope alibi; do
    ck=(--checkpoint "$tmp/$pos" --prompt_ids "3 1 4 1 5" --tokens 20 --temperature 0)
    why=""
    "$SAMPLE" "${ck[@]}" >"$tmp/cpu.out" 2>/dev/null
    for prec in fp32 bf16; do
      "$EMU_SAMPLE" "${ck[@]}" --device cuda --precision $prec >"$tmp/a.out" 2>"$tmp/a.err" &&
        "$EMU_SAMPLE" "${ck[@]}" --device cuda --precision $prec --no_cache >"$tmp/b.out" 2>/dev/null || why+="$prec exit status $(cat "$tmp/a.err"); "
      cmp -s "$tmp/a.out" "$tmp/b.out" || why+="$prec: cache '$(cat "$tmp/a.out")' vs no cache '$(cat "$tmp/b.out")'; "
      grep -q "(KV cache, cuda" "$tmp/a.err" || why+="speed line '$(tail -1 "$tmp/a.err")'; "
    done
    "$EMU_SAMPLE" "${ck[@]}" --device cuda >"$tmp/a.out" 2>/dev/null
    cmp -s "$tmp/a.out" "$tmp/cpu.out" || why+="cuda '$(cat "$tmp/a.out")' vs cpu '$(cat "$tmp/cpu.out")'; "
    if [ -z "$why" ]; then pass "sample_emu_cuda_$pos"; else fail "sample_emu_cuda_$pos" "$why"; fi
  done
else
  skip sample_emu_cuda "$EMU_SAMPLE not built (make emu builds it)"
fi
finish
