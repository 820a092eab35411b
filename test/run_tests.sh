#!/usr/bin/env bash
# Runs the test programs of a tier and counts their PASS / FAIL / SKIPPED lines (test/README.md).
#   test/run_tests.sh [--all] [-j N] [NAME...]
#   (default)  every CPU test, the gradient check, every CUDA test once under the emulation
#   --all      also the CUDA tests in reverse thread order with deferred work and the sanitizer
#              builds' runs (the subsets test/cuda_emu/sanitizers.sh declares), the TF32 tests
#              with truncated operands, the long scripts and the long cases of the others (TEST_ALL=1)
#   -j N       programs run at once (default: the number of cores); each one's output is kept
#              apart and printed whole when it ends, with its time
#   NAME...    only the programs whose name contains one of these (e.g. test_io datasets)
# Last line: "N passed, N failed, N skipped".
cd "$(dirname "$0")/.." || exit 1
ALL=0 JOBS=$(nproc 2>/dev/null || echo 2) FILTERS=()
while [ $# -gt 0 ]; do
  case $1 in
    --all) ALL=1; shift ;;
    -j) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "error: -j needs a positive number" >&2; exit 2; }; JOBS=$2; shift 2 ;;
    -h | --help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "error: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) FILTERS+=("$1"); shift ;;
  esac
done
export PYTHON=${PYTHON:-$(scripts/pick_python.sh)} BUILD=${BUILD:-build}
# the CUDA backend built for the CPU emulation (make emu)
export EMU_BUILD=${EMU_BUILD:-${BUILD}_emu}
export TRAIN=${TRAIN:-$BUILD/train} SAMPLE=${SAMPLE:-$BUILD/sample}
export TEST_ALL=$ALL
# Idle OpenMP threads spin briefly, then sleep, as the trainer sets for itself (src/config.cpp
# setup_process): with libgomp's long default spin, a test's idle host threads took the cores
# from the test running beside it (the full tier on 2 cores: 874 s of tests, 619 s with this).
[ -z "${OMP_WAIT_POLICY:-}" ] && [ -z "${GOMP_SPINCOUNT:-}" ] && export GOMP_SPINCOUNT=1000

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
run_tf32_truncated() { CUDA_EMU_TF32=truncate run_renamed emu-tf32-truncate "$@"; }
# The sanitizer builds (test-all) and what of each runs, and what of each program the reverse
# thread order runs, as test/cuda_emu/sanitizers.sh declares them: san_build TAG FOLDER TARGET
# WHAT [VAR=VALUE...], san_cuda_env TAG WHAT VAR=VALUE..., san_only TAG PROGRAM NAME...,
# san_never TAG PROGRAM.
SAN_TAGS=()
declare -A SAN_DIR SAN_TARGET SAN_WHAT SAN_ENV SAN_CUDA_WHAT SAN_CUDA_ENV SAN_ONLY
san_build() {
  local tag=$1
  SAN_TAGS+=("$tag") SAN_DIR[$tag]=$BUILD$2/test SAN_TARGET[$tag]=$3 SAN_WHAT[$tag]=$4
  shift 4
  SAN_ENV[$tag]=${*:+$(printf '%s\n' "$@")}  # one a line
}
san_cuda_env() {
  local tag=$1
  SAN_CUDA_WHAT[$tag]=", $2"
  shift 2
  SAN_CUDA_ENV[$tag]=$(printf '%s\n' "$@")
}
san_only() {
  local key="$1 $2"
  shift 2
  SAN_ONLY[$key]="$*"
}
san_never() { SAN_ONLY["$1 $2"]=-; }

# --- the programs of the tier: NAMES[i] runs CMDS[i] (words of a command line)
NAMES=() CMDS=() NOTES=()
wanted() {  # wanted NAME: no names were given, or NAME contains one of them
  local f
  [ ${#FILTERS[@]} -eq 0 ] && return 0
  for f in "${FILTERS[@]}"; do [[ $1 == *"$f"* ]] && return 0; done
  return 1
}
add() {
  local name=$1; shift
  wanted "$name" || return 0
  NAMES+=("$name") CMDS+=("$(printf '%q ' "$@")")
}
# note: a SKIPPED line of the runner's own (a build it did not find)
note() { wanted "$1" && NOTES+=("SKIPPED $1"); }

# shellcheck source=test/cuda_emu/sanitizers.sh
[ $ALL = 1 ] && source test/cuda_emu/sanitizers.sh
for t in "$BUILD"/test/test_*; do [ -x "$t" ] && add "$t" "$t"; done
if [ -x "$EMU_BUILD/test/test_cuda" ]; then
  for t in "$EMU_BUILD"/test/test_cuda*; do
    [ -x "$t" ] || continue
    add "$t (emulated, forward order)" run_emu emu forward 0 "$t"
    only=${SAN_ONLY["emu-rev-defer ${t##*/}"]:-}
    # shellcheck disable=SC2086
    [ $ALL = 1 ] && [ "$only" != - ] && add "$t (emulated, reverse order, deferred work)" run_emu emu-rev-defer reverse 1 "$t" $only
  done
  # the TF32 tests again with cuBLAS's TF32 operands truncated, not rounded (which the GPU does is
  # not documented: the tolerances must hold either way)
  if [ $ALL = 1 ]; then
    for t in test_cuda test_cuda_flash; do
      add "$EMU_BUILD/test/$t tf32 (emulated, TF32 truncated)" run_tf32_truncated "$EMU_BUILD/test/$t" tf32
    done
  fi
  [ -x "$EMU_BUILD/test/test_emu_selftest" ] && add "$EMU_BUILD/test/test_emu_selftest" "$EMU_BUILD/test/test_emu_selftest"
else
  note "emu: no emulated CUDA build in $EMU_BUILD (make emu BUILD=$BUILD builds it)"
fi
# the sanitizer builds: the self-tests and every test_cuda* of each, with the build's variables
# and the test names sanitizers.sh gives; SKIPPED when the build is missing (make TARGET builds it)
if [ $ALL = 1 ]; then
  for tag in "${SAN_TAGS[@]}"; do
    dir=${SAN_DIR[$tag]}
    if [ ! -x "$dir/test_emu_selftest" ]; then
      note "$tag: no ${SAN_WHAT[$tag]} build of the emulated CUDA tests (make ${SAN_TARGET[$tag]})"
      continue
    fi
    mapfile -t vars < <(printf '%s' "${SAN_ENV[$tag]}")
    mapfile -t cuda_vars < <(printf '%s' "${SAN_CUDA_ENV[$tag]:-}")
    # shellcheck disable=SC2086
    add "$dir/test_emu_selftest" run_renamed "$tag" env "${vars[@]}" "$dir/test_emu_selftest" \
      ${SAN_ONLY["$tag test_emu_selftest"]:-}
    for t in "$dir"/test_cuda*; do
      only=${SAN_ONLY["$tag ${t##*/}"]:-}
      if [ -x "$t" ] && [ "$only" != - ]; then
        # shellcheck disable=SC2086
        add "$t (emulated, ${SAN_WHAT[$tag]}${SAN_CUDA_WHAT[$tag]:-})" run_renamed "$tag" \
          env "${vars[@]}" "${cuda_vars[@]}" "$t" $only
      fi
    done
  done
fi
# the long scripts run in the full tier only
LONG_SCRIPTS=" test/test_spills.sh "
for t in test/test_*.sh; do
  [ -f "$t" ] && { [ $ALL = 1 ] || [[ $LONG_SCRIPTS != *" $t "* ]]; } && add "$t" bash "$t"
done
for t in test/test_*.py; do [ -f "$t" ] && add "$t" "$PYTHON" "$t"; done
if [ ${#FILTERS[@]} -gt 0 ] && [ ${#NAMES[@]} -eq 0 ]; then
  echo "error: no test program's name contains: ${FILTERS[*]}" >&2
  exit 2
fi

# The longest programs (about a minute of CPU or more in the full tier) start first, so that the
# jobs end near together rather than one long program running alone at the end; the rest keep
# the order above.
FIRST=("test_gpu_check.sh" "test_cuda_graph (emulated, forward" "test_cuda_generate (emulated, forward"
  "test_memory.sh" "test_cuda_flash (emulated, sanitizer" "test_recipes.py" "test_emu_train.sh"
  "test_cuda_flash (emulated, race detector)" "test_fuzz_readers.py" "test_compare_runs.py")
order=()
for f in "${FIRST[@]}"; do
  for i in "${!NAMES[@]}"; do [[ ${NAMES[i]} == *"$f"* && " ${order[*]} " != *" $i "* ]] && order+=("$i"); done
done
for i in "${!NAMES[@]}"; do [[ " ${order[*]} " == *" $i "* ]] || order+=("$i"); done
# --- run them, JOBS at a time; each one's output goes to its own log, printed when it ends
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
passed=0 failed=0 skipped=0
declare -A JOB START
# the CPU seconds (user + system) of a job's processes, from the `times` it wrote
cpu_seconds() {
  tail -1 "$1" 2>/dev/null | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] }
                                    printf "%.0f", t }'
}
report() {  # report I: the finished program I's output and counts
  local i=$1 log=$tmp/$1.log rc p f s
  rc=$(cat "$tmp/$i.rc")
  echo "== ${NAMES[$i]} ($(($(date +%s) - START[$i])) s, $(cpu_seconds "$tmp/$i.times") s CPU)"
  cat "$log"
  p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log"); s=$(grep -c '^SKIPPED ' "$log")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL ${NAMES[$i]}: exited with status $rc without reporting a failure"; f=1
  fi
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
}
t0=$(date +%s)
for i in "${order[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do
    wait -n -p done_pid
    report "${JOB[$done_pid]}"
    unset "JOB[$done_pid]"
  done
  START[$i]=$(date +%s)
  (eval "${CMDS[$i]}" >"$tmp/$i.log" 2>&1; echo $? >"$tmp/$i.rc"; times >"$tmp/$i.times") &
  JOB[$!]=$i
done
while [ ${#JOB[@]} -gt 0 ]; do
  wait -n -p done_pid
  report "${JOB[$done_pid]}"
  unset "JOB[$done_pid]"
done
for n in "${NOTES[@]}"; do echo "$n"; skipped=$((skipped + 1)); done
echo
echo "$(basename "$0")$([ $ALL = 1 ] && echo " --all"), $JOBS at a time: $(($(date +%s) - t0)) s"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
