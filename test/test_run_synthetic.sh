# scripts/run_synthetic.sh (make run's job) on short runs (-- --steps 40): every run's line, the
# comparison with the seeds that solved the task, a checkpoint build/sample reads (and the samples it
# prints), --results writing the README's files, and the same numbers whatever --jobs is.
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
logs=$(cd "$tmp/res/synthetic_logs" 2>/dev/null && ls | tr '\n' ' ')
if [ -f "$tmp/res/synthetic.md" ] && [ -f "$tmp/res/synthetic.png" ] && [ ! -e "$tmp/res/synthetic.svg" ] &&
  [ "$logs" = "crope-s1.jsonl.gz crope-s2.jsonl.gz rope-s1.jsonl.gz rope-s2.jsonl.gz " ]; then pass run_synthetic_results
else fail run_synthetic_results "$(ls "$tmp/res" 2>&1) logs: $logs"; fi

# one run at a time (OpenMP on every core) against two at once (one thread each): the same bits
scripts/run_synthetic.sh --out "$tmp/b" --jobs 1 "${short[@]}" >/dev/null 2>&1
same=1
for r in rope-s1 rope-s2 crope-s1 crope-s2; do
  cmp -s <(grep -o '"loss":[^,]*' "$tmp/a/$r/log.jsonl") <(grep -o '"loss":[^,]*' "$tmp/b/$r/log.jsonl") || same=0
done
[ $same -eq 1 ] && [ -s "$tmp/b/rope-s1/log.jsonl" ] && pass run_synthetic_jobs_same_numbers ||
  fail run_synthetic_jobs_same_numbers "--jobs 1 and --jobs 2 logged different losses"

expect_only_error run_synthetic_bad_jobs "^error: --jobs must be a whole number >= 1, got 'x'$" -- \
  scripts/run_synthetic.sh --jobs x
expect_only_error run_synthetic_missing_value "^error: the value of --seeds is missing" -- scripts/run_synthetic.sh --seeds
finish
