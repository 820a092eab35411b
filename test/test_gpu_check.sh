#!/usr/bin/env bash
# scripts/gpu_check.sh without a GPU: its options, the prerequisite check (a missing nvcc
# gives one line), no GPU is a failure that still leaves its report, and dry runs on the CPU
# execution layer (--emulated): a run whose plan leaves a part out (the parts it cut are failures,
# the rest written as it goes), a second run with --skip-done that does only what the first left
# (its rows copied, the report whole), --skip, a budget too short for anything, a run killed
# part way (its report still written), and the benchmark's tokens from a prepared shard.
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
expect_fail gpu_check_bad_skip_done "^error: --skip-done: no parts.txt in '$tmp'" -- bash $gc --skip-done "$tmp"
mkdir -p "$tmp/same" && touch "$tmp/same/parts.txt"
expect_fail gpu_check_skip_done_same_out "^error: --skip-done: give the new run another --out" -- \
  bash $gc --skip-done "$tmp/same" --out "$tmp/same"

# test_cuda NAME...: the subsets the script names must all exist (a stale name would waste the
# GPU run on an error), and a name that matches no test is an error.
tc=${BUILD:-build}/test/test_cuda
if [ ! -x "$tc" ]; then
  skip gpu_check_test_subsets "$tc not built"
else
  eval "$(sed -n '/^\(EMU\|SAN\)_SUBSET="/,/"$/p' $gc)"  # the subset lists, as the script defines them
  eval "$(grep '^SAN_FLASH=' $gc)"
  why=""
  san_bf16=$(tr ' ' '\n' <<<"$SAN_SUBSET" | grep '^cuda_bf16_' | tr '\n' ' ')
  san_rest=$(tr ' ' '\n' <<<"$SAN_SUBSET" | grep '^cuda_' | grep -v '^cuda_bf16_' | tr '\n' ' ')
  for subset in "$EMU_SUBSET" "$san_rest" "bf16:$san_bf16" "flash:$SAN_FLASH"; do
    bin=$tc
    [[ $subset == flash:* ]] && bin=${tc}_flash subset=${subset#flash:}
    [[ $subset == bf16:* ]] && bin=${tc}_bf16 subset=${subset#bf16:}
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

# The dry runs on the CPU execution layer.
if ! grep -qs '^emu:' Makefile test/cuda_emu/emu.mk; then
  skip gpu_check_emulated "the Makefile has no emu target (the CPU execution layer)"
else
  # the emulated build is make test's (a no-op then); built here when this test runs alone
  make --no-print-directory -j2 BUILD="${BUILD:-build}" ${EMU_BUILD:+EMU_BUILD="$EMU_BUILD"} emu lab-emu >"$tmp/build.log" 2>&1 ||
    echo "# make emu failed: $(tail -n 3 "$tmp/build.log")"

  # 1. A plan in which the head sweep does not fit (GPU_CHECK_COSTS): it fails for the time budget,
  # said so; every other part runs and writes its results and its measured cost.
  a="$tmp/first"
  out=$(GPU_CHECK_COSTS="head:100000" bash $gc --emulated --budget 300 --out "$a" 2>&1)
  rc=$?
  why=""
  [ $rc -ne 0 ] || why+="exit status 0 with a part cut; "
  grep -q '^FAIL gpu_check_head: not run: needs ~100000 s (GPU_CHECK_COSTS), [0-9]* s of the 300 s budget left (time budget)$' \
    "$a/parts.txt" 2>/dev/null || why+="no FAIL line for the head sweep's time budget; "
  [ "$(grep -c '^FAIL ' "$a/parts.txt" 2>/dev/null)" = 1 ] || why+="other parts failed: $(grep '^FAIL ' "$a/parts.txt" | head -n 3); "
  for p in build tests paper gpt2 profile rest lab; do
    grep -q "^$p	[0-9]*	complete$" "$a/costs.tsv" 2>/dev/null || why+="no measured cost for $p; "
  done
  grep -q '^  paper *8 s  (estimate)$' <<<"$out" || why+="the plan does not show the estimates; "
  [ -s "$a/head.md" ] && why+="the head sweep ran; "
  grep -q 'Result: FAILED' "$a/report.md" 2>/dev/null || why+="no report.md saying FAILED; "
  if [ -n "$why" ]; then fail gpu_check_plan_cut "$why$(tail -n 20 <<<"$out")"; else pass gpu_check_plan_cut; fi

  # 2. --skip-done: the second run does only the head sweep (the rest SKIPPED, done in the first,
  # its rows copied), plans with the first run's measured costs, and its report is whole.
  o="$tmp/emu"
  start=$SECONDS
  out=$(bash $gc --emulated --budget 300 --skip-done "$a" --out "$o" 2>&1)
  rc=$?
  why=""
  [ $rc -eq 0 ] || why="exit status $rc; "
  for f in gpu_check.log bench.md phases.md head.md report.md; do [ -s "$o/$f" ] || why+="no $f; "; done
  grep -q "^SKIPPED gpu_check_tests: done in $a\$" "$o/parts.txt" 2>/dev/null || why+="the tests were not skipped as done; "
  grep -q "^SKIPPED gpu_check_bench_paper_rope_bf16_graph: done in $a\$" "$o/parts.txt" 2>/dev/null ||
    why+="a benchmark row was not skipped as done; "
  grep -q '^PASS gpu_check_head_bf16_chunk16$' "$o/parts.txt" 2>/dev/null || why+="the head sweep did not run; "
  [ "$(grep -c '^PASS gpu_check_bench_' "$o/parts.txt")" = 0 ] || why+="a benchmark row ran again; "
  grep -q "^  paper *[0-9]* s  (measured in $a)\$" <<<"$out" || why+="the plan does not use the measured costs; "
  [ -s "$o/test_cuda.log" ] && why+="the GPU tests ran again; "
  rows=$(grep -c '^| emulated tiny .* | [0-9.]* | ' "$o/bench.md" 2>/dev/null)
  [ "${rows:-0}" -ge 12 ] || why+="$rows benchmark rows with timings, expected at least 12 (copied); "
  grep -q '| FAIL\|not run' "$o/bench.md" 2>/dev/null && why+="a failed or skipped benchmark row; "
  for mode in graph eager profile; do
    grep -q "^| emulated tiny .* | rope | bf16 | $mode | [0-9.]* | " "$o/bench.md" 2>/dev/null ||
      why+="no bf16 rope row with the $mode step in bench.md; "
  done
  grep -q 'tokens: Zipf-like' "$o/bench.md" 2>/dev/null || why+="bench.md does not say where its tokens come from; "
  grep -q '^| paper_rope_fp32_profile | [0-9.]* | [0-9.]* | [0-9.]* | [0-9.]* |' "$o/phases.md" 2>/dev/null ||
    why+="no per-phase row for paper_rope_fp32 in phases.md; "
  for h in "chunk 16 | bf16" "chunk 32 | bf16" "chunk 4096 | bf16" "tile 128 | bf16" "chunk 16 | fp32" "tile 128 | fp32"; do
    grep -q "^| $h | [0-9.]* | [0-9,]* | [0-9.]* | [0-9.]* | [0-9]* | " "$o/head.md" 2>/dev/null ||
      why+="no head sweep row '$h' with ms, TFLOP/s and GB/s; "
  done
  grep -q '^| chunk 4096 | bf16 .* | the default (cuda/backend_cuda.h) |$' "$o/head.md" || why+="the default head is not marked; "
  grep -q '^Fastest head: none (emulated' "$o/head.md" || why+="head.md names a fastest head from emulated timings; "
  grep -q '^| paper setting, rope, bf16, fastest LM head of the sweep | 5,500,000 | - | - |' "$o/report.md" 2>/dev/null ||
    why+="report.md has no goal row for the sweep's fastest (or it claims one emulated); "
  grep -q '^| GPT-2 124M, rope, bf16 | 550,000 | - | - |' "$o/report.md" 2>/dev/null ||
    why+="report.md has no goals table (or it claims a measurement the emulated run cannot make); "
  grep -q 'not meaningful' "$o/bench.md" 2>/dev/null || why+="bench.md does not say the timings are not meaningful; "
  grep -q '^# GPU check: EMULATED' "$o/report.md" 2>/dev/null || why+="report.md does not say EMULATED; "
  grep -q 'every required part passed' "$o/report.md" 2>/dev/null || why+="report.md does not say every part passed; "
  if [ -n "$why" ]; then fail gpu_check_skip_done "$why$(tail -n 30 <<<"$out")"
  else pass gpu_check_skip_done; echo "# the second emulated dry run: $((SECONDS - start)) s"; fi

  # --skip: the parts named are reported SKIPPED (not failed) and not run; the rest runs
  out=$(bash $gc --emulated --skip tests,sanitizer,dist,paper,gpt2 --skip profile,head,rest,torch,lab --out "$tmp/skip" 2>&1)
  rc=$?
  why=""
  [ $rc -eq 0 ] || why+="exit status $rc; "
  for p in tests paper gpt2 profile head sanitizer dist rest torch lab; do
    grep -q "^SKIPPED gpu_check_$p: --skip $p" "$tmp/skip/parts.txt" 2>/dev/null || why+="no SKIPPED line for $p; "
  done
  [ -s "$tmp/skip/bench.md" ] && why+="a benchmark row ran; "
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

  # Killed part way (SIGTERM, as a GPU slot's end does): what it measured is kept, the report written.
  # The signal goes once the first benchmark row is in (timeout passes it on to the whole process
  # group), not at a fixed time: how long the emulated check takes depends on the machine's load.
  timeout -s TERM 300 bash $gc --emulated --skip tests --out "$tmp/killed" >"$tmp/killed.log" 2>&1 &
  tpid=$!
  for _ in $(seq 1200); do
    grep -q '^PASS gpu_check_bench_' "$tmp/killed/parts.txt" 2>/dev/null && break
    kill -0 $tpid 2>/dev/null || break
    sleep 0.1
  done
  kill -TERM $tpid 2>/dev/null
  wait $tpid
  why=""
  grep -q 'gpu_check: interrupted' "$tmp/killed/gpu_check.log" || why+="not interrupted; "
  grep -q '^PASS gpu_check_bench_' "$tmp/killed/parts.txt" 2>/dev/null || why+="no finished row in parts.txt; "
  grep -q '^| emulated tiny .* | [0-9.]* | ' "$tmp/killed/report.md" 2>/dev/null || why+="the report lacks the rows measured; "
  grep -q 'Result: FAILED' "$tmp/killed/report.md" 2>/dev/null || why+="the report does not say FAILED; "
  if [ -n "$why" ]; then fail gpu_check_killed "$why$(tail -n 10 "$tmp/killed.log")"; else pass gpu_check_killed; fi

  # The benchmark's tokens from a prepared shard (DATA/NAME/NAME_train_*.bin, ids below V): used,
  # and said so
  mkdir -p "$tmp/data/wikitext2"
  "$PYTHON" - "$tmp/data/wikitext2/wikitext2_train_000000.bin" <<'PY'
import struct, sys
from array import array
n = 20000
toks = array("H", (i * 7 % 500 for i in range(n)))
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)) + toks.tobytes())
PY
  out=$(DATA=$tmp/data bash $gc --emulated --skip tests,gpt2,profile,head,sanitizer,dist,rest,torch,lab --out "$tmp/shard" 2>&1)
  if [ $? = 0 ] && grep -q "tokens: a prepared shard of real text, $tmp/data/wikitext2/wikitext2_train_000000.bin;" "$tmp/shard/bench.md" &&
      grep -q '^| emulated tiny .* | rope | bf16 | graph | [0-9.]* | ' "$tmp/shard/bench.md"; then
    pass gpu_check_prepared_shard
  else fail gpu_check_prepared_shard "$(head -n 2 "$tmp/shard/bench.md" 2>/dev/null) $(tail -n 5 <<<"$out")"; fi
fi
finish
