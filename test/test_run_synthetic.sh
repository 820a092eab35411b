# scripts/run_synthetic.sh (make run's job) on short runs (-- --steps 40): every run's line, the
# comparison with the seeds that solved the task, a checkpoint build/sample reads (and the samples it
# prints), the attention maps' figure, --results writing the README's files, and the same numbers
# whatever --jobs is.
source test/testlib.sh
TRAIN=${TRAIN:-build/train}
SAMPLE=${SAMPLE:-build/sample}
export TRAIN SAMPLE
if [ ! -x "$TRAIN" ] || [ ! -x "$SAMPLE" ]; then
  skip run_synthetic "$TRAIN or $SAMPLE not built"
  finish
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
short=(--seeds "1 2" --pos "rope crope" -- --steps 40 --eval_every 20)

out=$(scripts/run_synthetic.sh --out "$tmp/a" --jobs 2 --results "$tmp/res" "${short[@]}" 2>&1); rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c "^\(rope\|crope\) seed [12]: " <<<"$out")" -eq 4 ] &&
  grep -q "| synthetic | rope | 2 (1,2) |" "$tmp/a/compare.md" && grep -q "solved (≥ 0.99)" "$tmp/a/compare.md"; then
  pass run_synthetic_runs_and_table
else fail run_synthetic_runs_and_table "status $rc: $(tail -c 400 <<<"$out")"; fi
if [ -f "$tmp/a/rope-s1/latest" ] && grep -qE "^sample: .*--checkpoint $tmp/a/rope-s1 --prompt_ids 18 5 9 2 16 .* ->  18 5 9 2 16 [0-9]+$" <<<"$out" &&
  "$SAMPLE" --checkpoint "$tmp/a/crope-s2" --tokens 3 >/dev/null 2>&1; then pass run_synthetic_keeps_checkpoints
else fail run_synthetic_keeps_checkpoints "$(ls "$tmp/a/rope-s1" 2>&1) $(grep sample: <<<"$out")"; fi
# the terminal's ending is a summary a terminal shows whole (the wide tables are in compare.md),
# and the run lines' "(N)" and the sample lines are said once each
long=$(sed -n '/^synthetic: /,$p' <<<"$out" | grep -v "^tables \|^figures: \|^attention figure: \|^sample: \|^results in " |
  awk 'length > 100' | head -2)
if [ -z "$long" ] && grep -q "^  crope  *[0-2]/2  " <<<"$out" && ! grep -q "^|" <<<"$out" &&
  grep -q "^each run's last validation at 16 tokens; accuracy A (N): A of N markers answered right$" <<<"$out" &&
  grep -q "^rope seed 1's greedy next token after a marker: 16 asks for the token 1 back" <<<"$out"; then
  pass run_synthetic_short_ending
else fail run_synthetic_short_ending "long lines: $long; $(grep -e "^  crope " -e "^each run" -e "greedy next" -e "^|" <<<"$out")"; fi
logs=$(cd "$tmp/res/synthetic_logs" 2>/dev/null && ls | tr '\n' ' ')
if [ -f "$tmp/res/synthetic.md" ] && [ -f "$tmp/res/synthetic.png" ] && [ -f "$tmp/res/synthetic_lengths.png" ] &&
  [ ! -e "$tmp/res/synthetic.svg" ] &&
  cmp -s "$tmp/a/attention.png" "$tmp/res/attention.png" && grep -q "^attention figure: $tmp/a/attention.png " <<<"$out" &&
  [ "$logs" = "crope-s1.jsonl.gz crope-s2.jsonl.gz rope-s1.jsonl.gz rope-s2.jsonl.gz " ]; then pass run_synthetic_results
else fail run_synthetic_results "$(ls "$tmp/res" 2>&1) logs: $logs"; fi

# one run at a time against two at once: the same bits
scripts/run_synthetic.sh --out "$tmp/b" --jobs 1 "${short[@]}" >/dev/null 2>&1
same=1
for r in rope-s1 rope-s2 crope-s1 crope-s2; do
  cmp -s <(grep -o '"loss":[^,]*' "$tmp/a/$r/log.jsonl") <(grep -o '"loss":[^,]*' "$tmp/b/$r/log.jsonl") || same=0
done
[ $same -eq 1 ] && [ -s "$tmp/b/rope-s1/log.jsonl" ] && pass run_synthetic_jobs_same_numbers ||
  fail run_synthetic_jobs_same_numbers "--jobs 1 and --jobs 2 logged different losses"

# without --pos, every scheme build/train --list-pos names, and crope=rope: crope with a wider MLP
# (match_params rope)
out=$(scripts/run_synthetic.sh --out "$tmp/all" --seeds 1 -- --steps 2 --eval_every 2 2>&1); rc=$?
got=$(grep -o '^[a-z=]* seed 1: ' <<<"$out" | cut -d' ' -f1 | sort | tr '\n' ' ')
want=$( (echo crope=rope; "$TRAIN" --list-pos) | sort | tr '\n' ' ')
[ $rc -eq 0 ] && [ "$got" = "$want" ] && pass run_synthetic_default_every_scheme ||
  fail run_synthetic_default_every_scheme "status $rc, trained '$got', schemes '$want'"
eq=$(tr -d ' \n' <"$tmp/all/crope=rope-s1/config.json" 2>/dev/null)
plain=$(tr -d ' \n' <"$tmp/all/crope-s1/config.json" 2>/dev/null)
if [[ $eq == *'"match_params":"rope"'* && $eq == *'"pos":"crope"'* && $plain == *'"mlp_hidden":256'* &&
  $eq =~ \"mlp_hidden\":([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -gt 256 ]; then
  pass run_synthetic_equal_params_variant
else fail run_synthetic_equal_params_variant "crope=rope's config: $eq"; fi

# the trainer itself at 1 and 2 threads, GPT-2's vocabulary size (the LM head in 66 tiles per
# chunk): the same bits. With OpenBLAS's SkylakeX kernels, which round a product the same however
# many threads share it, so that what differs would be the trainer's own ops; OpenBLAS's Haswell
# kernels round differently at another thread count (the reason make run gives each run one; this
# check fails with them). A batch of 16 and one evaluation batch at two lengths: the rows still
# split among the threads, at a small part of the config's work.
if grep -qw avx512f /proc/cpuinfo; then
  same=1
  for pos in learned rope crope alibi; do
    for t in 1 2; do
      OPENBLAS_CORETYPE=SkylakeX OMP_NUM_THREADS=$t "$TRAIN" --config configs/synthetic.json --pos $pos \
        --vocab_size 50257 --batch_size 16 --steps 4 --eval_every 2 --eval_batches 1 --eval_seq_lens 16,32 \
        --checkpoint_every 0 --run_dir "$tmp/t$t-$pos" >/dev/null 2>&1
    done
    [ -s "$tmp/t1-$pos/log.jsonl" ] && cmp -s <(grep -o '"loss":[^,]*' "$tmp/t1-$pos/log.jsonl") \
      <(grep -o '"loss":[^,]*' "$tmp/t2-$pos/log.jsonl") || same=0
  done
  [ $same -eq 1 ] && pass trainer_threads_same_numbers ||
    fail trainer_threads_same_numbers "1 and 2 OpenMP threads logged different losses"
else
  skip trainer_threads_same_numbers "no AVX-512 here for OpenBLAS's SkylakeX kernels (its others may round by thread count)"
fi

expect_only_error run_synthetic_bad_jobs "^error: --jobs must be a whole number >= 1, got 'x'$" -- \
  scripts/run_synthetic.sh --jobs x
expect_only_error run_synthetic_missing_value "^error: the value of --seeds is missing" -- scripts/run_synthetic.sh --seeds
finish
