#!/usr/bin/env bash
# Runs every test program and counts its PASS / FAIL / SKIPPED lines.
# Last line: "N passed, N failed, N skipped".
cd "$(dirname "$0")/.." || exit 1
export PYTHON=${PYTHON:-$(scripts/pick_python.sh)} BUILD=${BUILD:-build}
# the CUDA backend built for the CPU emulation (make emu); its tests run in two thread orders, the
# second with the streams' work deferred until the host waits for it (CUDA_EMU_DEFER=1)
export EMU_BUILD=${EMU_BUILD:-${BUILD}_emu}
export TRAIN=${TRAIN:-$BUILD/train} SAMPLE=${SAMPLE:-$BUILD/sample}
passed=0 failed=0 skipped=0
run_one() {
  local name=$1; shift
  local log; log=$(mktemp)
  echo "== $name"
  "$@" >"$log" 2>&1
  local rc=$?
  cat "$log"
  local p f s
  p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log"); s=$(grep -c '^SKIPPED ' "$log")
  if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL $name: exited with status $rc without reporting a failure"; f=1
  fi
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  rm -f "$log"
}
# A test program with its lines renamed "PASS $1:name" (so an emulated pass never reads as a
# GPU pass).
run_renamed() {
  local tag=$1; shift
  "$@" 2>&1 | sed -E "s/^(PASS|FAIL|SKIPPED) /\1 $tag:/"
  return "${PIPESTATUS[0]}"
}
# An emulated CUDA test under CUDA_EMU_ORDER=$2 and CUDA_EMU_DEFER=$3, renamed with tag $1.
run_emu() {
  local tag=$1 order=$2 defer=$3; shift 3
  CUDA_EMU_ORDER=$order CUDA_EMU_DEFER=$defer run_renamed "$tag" "$@"
}
for t in "$BUILD"/test/test_*; do [ -x "$t" ] && run_one "$t" "$t"; done
if [ ! -x "$EMU_BUILD/test/test_cuda" ]; then
  echo "SKIPPED emu: no emulated CUDA build in $EMU_BUILD (make emu BUILD=$BUILD builds it)"; skipped=$((skipped + 1))
fi
for t in "$EMU_BUILD"/test/test_cuda*; do
  [ -x "$t" ] || continue
  run_one "$t (emulated, forward order)" run_emu emu forward 0 "$t"
  run_one "$t (emulated, reverse order, deferred work)" run_emu emu-rev-defer reverse 1 "$t"
done
[ -x "$EMU_BUILD/test/test_emu_selftest" ] && run_one "$EMU_BUILD/test/test_emu_selftest" "$EMU_BUILD/test/test_emu_selftest"
# sanitizer_suite TAG WHAT DIR TARGET: the self-tests and every test_cuda* of a sanitizer build
# DIR, through run_TAG, each with the test names TAG_args NAME prints (failing: not run); SKIPPED
# when DIR was not built (make TARGET builds it).
sanitizer_suite() {
  local tag=$1 what=$2 dir=$3 target=$4 t args
  if [ ! -x "$dir/test_emu_selftest" ]; then
    echo "SKIPPED $tag: no $what build of the emulated CUDA tests (make $target)"; skipped=$((skipped + 1))
    return
  fi
  run_one "$dir/test_emu_selftest" "run_$tag" "$dir/test_emu_selftest"
  for t in "$dir"/test_cuda*; do
    [ -x "$t" ] || continue
    args=$("${tag}_args" "${t##*/}") || continue
    # shellcheck disable=SC2086
    run_one "$t (emulated, $what)" "run_$tag" "$t" $args
  done
}
# the sanitizer build (make emu-asan-tests): the self-tests' out-of-bounds and misaligned accesses
# inside a kernel, and every CUDA test under AddressSanitizer and UBSan (the kernels' shared and
# global memory accesses, vector loads' alignment), reported as "asan:NAME". The flash tests leave
# out the bf16 determinism test (the same kernels as forward_backward_bf16, a minute under asan).
run_asan() { run_renamed asan "$@"; }
asan_args() {
  [ "$1" != test_cuda_flash ] ||
    echo "cpu_ config forward_backward head_sizes deterministic_fp32 unaligned bad_head_size memory model eval_longer"
}
sanitizer_suite asan sanitizer "${BUILD}_emu_asan/test" emu-asan-tests
# the race detector build (make emu-tsan-tests): the self-tests' races that no thread order shows,
# and the CUDA tests under ThreadSanitizer, which reports any shared or global memory access that
# no barrier or __syncwarp orders against another thread's write ("tsan:NAME"). For time, test_cuda
# runs its kernel tests and a model per precision, test_cuda_flash every head size and precision,
# and test_cuda_graph not at all (its kernels are test_cuda_step's; in full they all pass, in 8
# minutes). One OpenMP thread: the host's OpenBLAS threads are not what it checks.
run_tsan() { OMP_NUM_THREADS=1 run_renamed tsan "$@"; }
tsan_args() {
  case $1 in
    test_cuda) echo "cuda_encoder cuda_layernorm cuda_rope cuda_crope cuda_attention cuda_gelu cuda_residual" \
      "cuda_softmax cuda_adamw cuda_sum_squares cuda_model_crope_loss cuda_tf32_model_learned_loss" \
      "cuda_bf16_model_rope_loss" ;;
    test_cuda_flash) echo "forward_backward head_sizes unaligned" ;;
    test_cuda_graph) return 1 ;;
  esac
}
sanitizer_suite tsan "race detector" "${BUILD}_emu_tsan/test" emu-tsan-tests
for t in test/test_*.sh; do [ -f "$t" ] && run_one "$t" bash "$t"; done
for t in test/test_*.py; do [ -f "$t" ] && run_one "$t" "$PYTHON" "$t"; done
echo
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
