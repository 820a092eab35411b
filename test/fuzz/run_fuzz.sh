#!/usr/bin/env bash
# make fuzz: runs every fuzz target (test/fuzz/fuzz_*.cpp, built into $FUZZ_BUILD) for FUZZ_SECONDS
# each, one at a time in one process, from its committed seeds (corpus/NAME/) and what earlier
# runs added ($FUZZ_BUILD/corpus/NAME/), then prints per target the executions, the coverage
# (libFuzzer's edges "cov" and features "ft") and the findings. A finding (a crash, a sanitizer
# report, a timeout, a blow-up) is saved as test/fuzz/regressions/NAME/KIND-SHA1, which make test
# replays from then on (test/test_fuzz_replay.sh): fix it, commit it.
#   FUZZ_SECONDS=600 test/fuzz/run_fuzz.sh [NAME...]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
FUZZ_BUILD=${FUZZ_BUILD:-build_fuzz} FUZZ_SECONDS=${FUZZ_SECONDS:-60}
[[ $FUZZ_SECONDS =~ ^[1-9][0-9]*$ ]] || { echo "error: FUZZ_SECONDS must be a positive number of seconds" >&2; exit 2; }
names=("$@")
[ ${#names[@]} -eq 0 ] && for f in test/fuzz/fuzz_*.cpp; do n=${f##*/fuzz_}; names+=("${n%.cpp}"); done
for n in "${names[@]}"; do
  [ -x "$FUZZ_BUILD/fuzz_$n" ] || { echo "error: $FUZZ_BUILD/fuzz_$n is not built (make fuzz-targets)" >&2; exit 2; }
done
{ cat test/fuzz/fuzz.dict; "$FUZZ_BUILD/print_keys"; } >"$FUZZ_BUILD/fuzz.dict"
rows=() total=0
for n in "${names[@]}"; do
  corpus=$FUZZ_BUILD/corpus/$n regress=test/fuzz/regressions/$n log=$FUZZ_BUILD/fuzz_$n.log
  mkdir -p "$corpus" "$regress"
  before=$(ls "$regress")
  echo "== fuzz_$n: $FUZZ_SECONDS s (log: $log)"
  # -rss_limit_mb, -malloc_limit_mb: an input that makes a reader take this much is a finding
  "$FUZZ_BUILD/fuzz_$n" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -max_len=65536 -dict="$FUZZ_BUILD/fuzz.dict" -artifact_prefix="$regress/" -print_final_stats=1 \
    "$corpus" "test/fuzz/corpus/$n" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 | awk '{ print $2 " / " $4 }')
  what=$(comm -13 <(echo "$before") <(ls "$regress") | tr '\n' ' ')
  found=$(wc -w <<<"$what")
  total=$((total + found))
  [ $rc -ne 0 ] && [ "$found" -eq 0 ] && what="exit status $rc without an input saved (see the log)" && total=$((total + 1))
  rows+=("$(printf '| %-12s | %12s | %15s | %s |' "$n" "${execs:-?}" "${cov:-?}" "${what:-none}")")
done
echo
printf '| %-12s | %12s | %15s | %s |\n' target executions "edges / features" findings
echo "|--------------|--------------|-----------------|----------|"
printf '%s\n' "${rows[@]}"
echo
echo "$total finding(s)$( ((total)) && echo ": each saved input is replayed by make test (test/test_fuzz_replay.sh); fix it, then commit it")"
[ "$total" -eq 0 ]
