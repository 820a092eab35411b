#!/usr/bin/env bash
# The kernel lab (test/lab/*.cu) under the CPU emulation of CUDA: every program runs at a tiny
# size, in both thread orders, and must report every one of its versions as matching the CPU
# reference (its PASS line, the tests' protocol; timings read "emulated: not timed"); bad arguments
# give one "error: ..." line and a non-zero exit. A program's output goes into a FAIL's message
# indented, so that its PASS and FAIL lines are not counted as this script's.
cd "$(dirname "$0")/.." || exit 1
. test/testlib.sh
BUILD=${BUILD:-build}
EMU_BUILD=${EMU_BUILD:-${BUILD}_emu}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# make test builds the lab first (a no-op then); built here when this test runs alone
if ! make --no-print-directory -j2 BUILD="$BUILD" EMU_BUILD="$EMU_BUILD" lab-emu >"$tmp/build.log" 2>&1; then
  fail lab_build "make lab-emu failed: $(tail -n 5 "$tmp/build.log")"
  finish
fi

# tiny arguments per program; every program of test/lab/ must have a line here
declare -A ARGS=(
  [attention]="--B 1 --T 16 --H 2 --D 16"
  [classifier]="--N 8 --C 32 --V 100"
  [layernorm]="--N 64 --C 128"
  [adamw]="--L 1 --C 64 --V 100 --maxT 16"
)
# each program in forward thread order, and with TEST_ALL=1 (make test-all) in reverse order
# too (a missing barrier in a lab kernel shows in one of them)
orders="forward$([ "${TEST_ALL:-0}" = 1 ] && echo " reverse")"
for src in test/lab/*.cu; do
  name=$(basename "$src" .cu)
  bin=$EMU_BUILD/lab/$name
  if [ -z "${ARGS[$name]+x}" ]; then fail "lab_$name" "no tiny arguments for $src in test/test_lab.sh"; continue; fi
  for order in $orders; do
    t=lab_$name$([ $order = reverse ] && echo _reverse)
    # shellcheck disable=SC2086
    out=$(set -o pipefail; CUDA_EMU_ORDER=$order "$bin" ${ARGS[$name]} 2>&1 | sed 's/^/  /')
    rc=$?
    versions=$(grep -c '^  version [0-9]*: ' <<<"$out")
    matched=$(grep -c "^  PASS ${name}_" <<<"$out")
    untimed=$(grep -c '^    time  emulated: not timed$' <<<"$out")
    if [ $rc -ne 0 ]; then fail "$t" "exit status $rc: $(tail -n 5 <<<"$out")"
    elif [ "$versions" -lt 2 ]; then fail "$t" "fewer than 2 versions reported: $out"
    elif [ "$matched" != "$versions" ] || grep -q '^  FAIL ' <<<"$out"; then
      fail "$t" "$matched of $versions versions match the reference: $out"
    elif [ "$untimed" != "$versions" ]; then fail "$t" "$untimed of $versions versions say 'emulated: not timed'"
    else pass "$t"; echo "# $name ($order order): $versions versions match the CPU reference"; fi
  done
done

# --version N runs that version only
out=$(set -o pipefail; "$EMU_BUILD/lab/adamw" --L 1 --C 64 --V 100 --maxT 16 --version 2 2>&1 | sed 's/^/  /')
if [ $? -eq 0 ] && [ "$(grep -c '^  version ' <<<"$out")" = 1 ] && grep -q '^  version 2: ' <<<"$out"; then
  pass lab_one_version
else fail lab_one_version "--version 2 did not run version 2 alone: $out"; fi

lab=$EMU_BUILD/lab
expect_fail lab_bad_option "^error: unknown argument '--bogus'" -- "$lab/attention" --bogus 3
expect_fail lab_not_positive "^error: --B needs a positive integer, got '0'" -- "$lab/attention" --B 0
expect_fail lab_not_integer "^error: --N needs a positive integer, got '8x'" -- "$lab/classifier" --N 8x
expect_fail lab_missing_value "^error: --reps needs a value" -- "$lab/adamw" --reps
expect_fail lab_no_such_version "^error: --version 9: this lab has versions 1 to 3" -- "$lab/layernorm" --version 9
expect_fail lab_bad_channels "^error: --C must be one of 128, 256" -- "$lab/layernorm" --C 100
expect_fail lab_bad_head_size "^error: flash-rope-load supports head sizes 16, 32 and 64, got 8" -- \
  "$lab/attention" --D 8 --version 5
finish
