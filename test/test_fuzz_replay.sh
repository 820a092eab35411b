#!/usr/bin/env bash
# The readers' fuzz targets (test/fuzz/README.md) on every committed input: each target runs its
# seed corpus and its regression inputs (findings of make fuzz, fixed) and must end cleanly, no
# crash, sanitizer report, timeout or blow-up. The full tier (TEST_ALL=1) also fuzzes each target
# for FUZZ_CI_SECONDS (default 2) from its seeds. SKIPPED without the targets (make fuzz-targets,
# which needs clang and libFuzzer).
# shellcheck source=test/testlib.sh
source "$(dirname "$0")/testlib.sh"
cd "$(dirname "$0")/.." || exit 1
FUZZ_BUILD=${FUZZ_BUILD:-${BUILD:-build}_fuzz} FUZZ_CI_SECONDS=${FUZZ_CI_SECONDS:-2}
scratch
shopt -s nullglob
{ cat test/fuzz/fuzz.dict; [ -x "$FUZZ_BUILD/print_keys" ] && "$FUZZ_BUILD/print_keys"; } >"$tmp/fuzz.dict"
limits=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024)
for src in test/fuzz/fuzz_*.cpp; do
  n=${src##*/fuzz_} n=${n%.cpp} bin=$FUZZ_BUILD/fuzz_$n
  if [ ! -x "$bin" ]; then
    skip "fuzz_replay:$n" "$bin not built (make fuzz-targets; needs clang and libclang-rt-dev)"
    continue
  fi
  seeds=(test/fuzz/corpus/"$n"/*)
  inputs=("${seeds[@]}" test/fuzz/regressions/"$n"/*)
  if [ ${#seeds[@]} -eq 0 ]; then
    fail "fuzz_replay:$n" "no seeds in test/fuzz/corpus/$n"
    continue
  fi
  # files as arguments: libFuzzer runs each once, without fuzzing
  if out=$("$bin" "${limits[@]}" "${inputs[@]}" 2>&1); then
    pass "fuzz_replay:$n (${#inputs[@]} inputs)"
  else
    fail "fuzz_replay:$n" "$(grep -m3 -E 'ERROR|finding|runtime error|SUMMARY|Running:' <<<"$out" | tr '\n' ' ')"
  fi
  if [ "${TEST_ALL:-0}" = 1 ]; then
    mkdir -p "$tmp/$n"
    if out=$("$bin" "${limits[@]}" -max_total_time="$FUZZ_CI_SECONDS" -dict="$tmp/fuzz.dict" \
        -artifact_prefix="$tmp/$n/" "$tmp/$n" test/fuzz/corpus/"$n" 2>&1); then
      pass "fuzz:$n ($FUZZ_CI_SECONDS s, $(grep -oE '^#[0-9]+' <<<"$out" | tail -1 | tr -d '#') runs)"
    else
      fail "fuzz:$n" "a finding in $FUZZ_CI_SECONDS s (make fuzz reproduces it): $(grep -m3 -E 'ERROR|finding|runtime error|SUMMARY|Base64' <<<"$out" | tr '\n' ' ')"
    fi
  fi
done
finish
