#!/usr/bin/env bash
# scripts/gpu_check.sh without a GPU: its options, the prerequisite check (a missing nvcc
# gives one line), no GPU is a failure that still leaves its report, a dry run on the CPU
# execution layer (--emulated) writes its files into --out as it goes, and a budget too short
# for the whole check fails the parts it cuts off.
cd "$(dirname "$0")/.." || exit 1
. test/testlib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gc=scripts/gpu_check.sh

out=$(bash $gc -h 2>&1)
if [ $? -eq 0 ] && grep -q -- '--emulated' <<<"$out" && grep -q -- '--budget' <<<"$out"; then pass gpu_check_help
else fail gpu_check_help "-h did not print the usage: $out"; fi
expect_fail gpu_check_bad_option "^error: unknown argument '--bogus'" -- bash $gc --bogus
expect_fail gpu_check_bad_budget "^error: --budget must be a positive number" -- bash $gc --budget 7m
expect_fail gpu_check_bad_grid_precision "^error: --grid-precision must be fp32 or bf16, got 'fp16'" -- bash $gc --grid-precision fp16
expect_fail gpu_check_bad_skip "^error: --skip: no part 'bogus'" -- bash $gc --skip tests,bogus

# test_cuda NAME...: the subsets the script names must all exist (a stale name would waste the
# GPU run on an error), and a name that matches no test is an error.
tc=${BUILD:-build}/test/test_cuda
if [ ! -x "$tc" ]; then
  skip gpu_check_test_subsets "$tc not built"
else
  eval "$(sed -n '/^\(EMU\|SAN\)_SUBSET="/,/"$/p' $gc)"  # the subset lists, as the script defines them
  eval "$(grep '^SAN_FLASH=' $gc)"
  why=""
  for subset in "$EMU_SUBSET" "$SAN_SUBSET" "flash:$SAN_FLASH"; do
    bin=$tc
    [[ $subset == flash:* ]] && bin=${tc}_flash subset=${subset#flash:}
    # shellcheck disable=SC2086
    out=$(CUDA_VISIBLE_DEVICES= "$bin" $subset 2>&1) || why+="exit $? for '$subset': $out; "
    n=$(grep -cE '^(PASS|FAIL|SKIPPED) ' <<<"$out")
    [ "$n" -ge "$(wc -w <<<"$subset")" ] || why+="$n tests for the $(wc -w <<<"$subset") names '$subset'; "
  done
  if [ -n "$why" ]; then fail gpu_check_test_subsets "$why"; else pass gpu_check_test_subsets; fi
  expect_fail test_cuda_unknown_name "^error: no test name contains 'no_such_test'" -- "$tc" cuda_layernorm no_such_test
fi

# The paper grid's gate (its block, as the script has it), on fake test programs that print
# what their tests named by the argument did: a bf16 grid whose bf16 tests all pass keeps bf16;
# a FAIL, a failing exit or no bf16 test passed (no GPU) falls back to fp32, which runs the tf32
# tests the same way and falls back to plain fp32 (TF32 off); programs without such tests are left
# out; the failed tests are named.
gate=$(sed -n '/# grid gate: begin/,/# grid gate: end/p' $gc)
fake() { printf '#!/bin/sh\n%s\n' "$2" >"$tmp/$1" && chmod +x "$tmp/$1"; }
nomatch='echo "error: no test name contains '"'"'$1'"'"'" >&2; exit 2'
fake ok 'echo "PASS cuda_a_$1"; echo "PASS cuda_b_$1"'
fake bad 'echo "PASS cuda_a_$1"; echo "FAIL cuda_flash_x_$1: rel err 1"; exit 1'
fake none 'echo "SKIPPED cuda_a_$1: no GPU"'
fake badbf16 '[ "$1" = bf16 ] && { echo "FAIL cuda_flash_x_bf16: rel err 1"; exit 1; }; echo "PASS cuda_a_$1"'
fake onlybf16 '[ "$1" = bf16 ] || { '"$nomatch"'; }; echo "PASS cuda_a_bf16"'
why=""
for case in "ok ok:bf16:bf16 1" "ok bad:bf16:fp32 0" "none:bf16:fp32 0" "badbf16:bf16:fp32 1" \
  "ok onlybf16:bf16:bf16 1" "ok onlybf16:fp32:fp32 1" "onlybf16:fp32:fp32 0" "ok:fp32:fp32 1" \
  "bad:fp32:fp32 0"; do
  IFS=: read -r bins prec want <<<"$case"
  # shellcheck disable=SC2034  # TEST_BINS is read by the gate
  out=$(TEST_BINS=$(for b in $bins; do echo "$tmp/$b"; done); GRID_PREC=$prec; eval "$gate"; echo "-> $GRID_PREC $GRID_TF32")
  grep -q -- "-> $want\$" <<<"$out" || why+="[$bins, $prec] expected $want: $out; "
done
out=$(TEST_BINS=$tmp/badbf16; GRID_PREC=bf16; eval "$gate")
grep -q "bf16 tests failed on this GPU:.*cuda_flash_x_bf16" <<<"$out" || why+="the failed bf16 test is not named: $out; "
out=$(TEST_BINS="$tmp/ok $tmp/bad"; GRID_PREC=fp32; eval "$gate")
grep -q "TF32 tests failed on this GPU:.*cuda_flash_x_tf32" <<<"$out" || why+="the failed tf32 test is not named: $out; "
if [ -z "$gate" ]; then fail gpu_check_grid_gate "the gate's block was not found in $gc"
elif [ -n "$why" ]; then fail gpu_check_grid_gate "$why"
else pass gpu_check_grid_gate; fi

# A PATH without nvcc (and no CUDA_HOME): one line names it, and the check fails.
nonvcc=""
IFS=: read -ra dirs <<<"$PATH"
for d in "${dirs[@]}"; do [ -x "$d/nvcc" ] || nonvcc+="${nonvcc:+:}$d"; done
out=$(PATH=$nonvcc CUDA_HOME=/nonexistent NVCC= bash $gc --out "$tmp/nonvcc" 2>&1)
rc=$?
if [ $rc -eq 0 ]; then fail gpu_check_missing_nvcc "exit status 0 without nvcc"
elif [ "$(grep -c '^missing: nvcc (' <<<"$out")" != 1 ]; then fail gpu_check_missing_nvcc "no single 'missing: nvcc' line in: $out"
elif ! grep -q '^FAIL gpu_check_prerequisites: missing .*nvcc' <<<"$out"; then fail gpu_check_missing_nvcc "no FAIL line in: $out"
else pass gpu_check_missing_nvcc; fi

# No GPU (an nvidia-smi that finds none, whatever this machine has): a failure, never a
# pass, with its report written.
mkdir -p "$tmp/fakebin"
printf '#!/bin/sh\necho "No devices were found" >&2\nexit 6\n' >"$tmp/fakebin/nvidia-smi"
chmod +x "$tmp/fakebin/nvidia-smi"
out=$(PATH="$tmp/fakebin:$PATH" bash $gc --out "$tmp/nogpu" 2>&1)
rc=$?
if [ $rc -eq 0 ]; then fail gpu_check_no_gpu "exit status 0 without a GPU"
elif ! grep -q '^missing: GPU (nvidia-smi finds no GPU' <<<"$out"; then fail gpu_check_no_gpu "no 'missing: GPU' line in: $out"
elif ! grep -q 'FAIL gpu_check_prerequisites: missing GPU' "$tmp/nogpu/report.md" 2>/dev/null; then
  fail gpu_check_no_gpu "report.md missing or without the FAIL line"
else pass gpu_check_no_gpu; fi

# The dry run on the CPU execution layer: every file written, every part passed.
if ! grep -q '^emu:' Makefile; then
  skip gpu_check_emulated "the Makefile has no emu target (the CPU execution layer)"
else
  o="$tmp/emu"
  # the emulated build is make test's (a no-op then); built here when this test runs alone
  make --no-print-directory -j2 BUILD="${BUILD:-build}" ${EMU_BUILD:+EMU_BUILD="$EMU_BUILD"} emu lab-emu >"$tmp/build.log" 2>&1 ||
    echo "# make emu failed: $(tail -n 3 "$tmp/build.log")"
  start=$SECONDS
  out=$(bash $gc --emulated --budget 120 --out "$o" 2>&1)
  rc=$?
  why=""
  [ $rc -eq 0 ] || why="exit status $rc; "
  for f in gpu_check.log test_cuda.log bench.md report.md; do [ -s "$o/$f" ] || why+="no $f; "; done
  grep -q '^PASS cuda_' "$o/test_cuda.log" 2>/dev/null || why+="no PASS line in test_cuda.log; "
  rows=$(grep -c '^| emulated tiny .* | [0-9.]* | ' "$o/bench.md" 2>/dev/null)
  [ "${rows:-0}" -ge 12 ] || why+="$rows benchmark rows with timings, expected 3 schemes x 2 settings x 2 precisions; "
  grep -q '| FAIL\|not run' "$o/bench.md" 2>/dev/null && why+="a failed or skipped benchmark row; "
  for mode in graph eager profile; do
    grep -q "^| emulated tiny .* | rope | bf16 | $mode | [0-9.]* | " "$o/bench.md" 2>/dev/null ||
      why+="no bf16 rope row with the $mode step in bench.md; "
  done
  grep -q '^| paper_rope_fp32_profile | [0-9.]* | [0-9.]* | [0-9.]* | [0-9.]* |' "$o/bench.md" 2>/dev/null ||
    why+="no per-phase row (profiling mode) for paper_rope_fp32 in bench.md; "
  for prec in bf16 fp32; do
    for head in "chunk 16" "tile 128"; do
      grep -q "^| emulated tiny .*, classifier_$head | rope | $prec | graph | [0-9.]* | " "$o/bench.md" 2>/dev/null ||
        why+="no $prec classifier_$head row in bench.md; "
    done
  done
  grep -q '^| paper setting, rope, bf16, fastest of the classifier sweep | 5,500,000 | - | - |' "$o/report.md" 2>/dev/null ||
    why+="report.md has no goal row for the classifier sweep's fastest (or it claims one emulated); "
  grep -q '^| GPT-2 124M, rope, bf16 | 550,000 | - | - |' "$o/report.md" 2>/dev/null ||
    why+="report.md has no goals table (or it claims a measurement the emulated run cannot make); "
  grep -q 'not meaningful' "$o/bench.md" 2>/dev/null || why+="bench.md does not say the timings are not meaningful; "
  grep -q '^# GPU check: EMULATED' "$o/report.md" 2>/dev/null || why+="report.md does not say EMULATED; "
  grep -q 'every required part passed' "$o/report.md" 2>/dev/null || why+="report.md does not say every part passed; "
  if [ -n "$why" ]; then fail gpu_check_emulated "$why$(tail -n 30 <<<"$out")"
  else pass gpu_check_emulated; echo "# emulated dry run: $((SECONDS - start)) s"; fi

  # --skip: the parts named are reported SKIPPED (not failed) and not run; the rest runs
  out=$(bash $gc --emulated --skip tests,sanitizer,dist --skip bench,chunks,lab --out "$tmp/skip" 2>&1)
  rc=$?
  why=""
  [ $rc -eq 0 ] || why+="exit status $rc; "
  for p in tests sanitizer_memcheck nccl bench chunks lab; do
    grep -q "^SKIPPED gpu_check_$p: --skip" "$tmp/skip/parts.txt" 2>/dev/null || why+="no SKIPPED line for $p; "
  done
  grep -q '^| emulated tiny' "$tmp/skip/bench.md" 2>/dev/null && why+="a benchmark row ran; "
  [ -s "$tmp/skip/test_cuda.log" ] && why+="the GPU tests ran; "
  if [ -n "$why" ]; then fail gpu_check_skip "$why$(tail -n 20 <<<"$out")"; else pass gpu_check_skip; fi

  # A budget too short for the whole check: the parts it cut off are failures, said so, and
  # the report is still written.
  out=$(bash $gc --emulated --budget 12 --out "$tmp/short" 2>&1)
  rc=$?
  if [ $rc -eq 0 ]; then fail gpu_check_budget "exit status 0 with a 12 s budget"
  elif ! grep -q '^FAIL .*time budget' "$tmp/short/parts.txt" 2>/dev/null; then
    fail gpu_check_budget "no part failed for the time budget: $(tail -n 20 <<<"$out")"
  elif ! grep -q 'Result: FAILED' "$tmp/short/report.md" 2>/dev/null; then fail gpu_check_budget "no report.md saying FAILED"
  else pass gpu_check_budget; fi
fi
finish
