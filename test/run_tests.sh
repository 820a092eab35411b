#!/usr/bin/env bash
# Runs every test program and counts its PASS / FAIL / SKIPPED lines.
# Last line: "N passed, N failed, N skipped".
cd "$(dirname "$0")/.." || exit 1
export PYTHON=${PYTHON:-$(scripts/pick_python.sh)} BUILD=${BUILD:-build}
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
for t in "$BUILD"/test/test_*; do [ -x "$t" ] && run_one "$t" "$t"; done
for t in test/test_*.sh; do [ -f "$t" ] && run_one "$t" bash "$t"; done
for t in test/test_*.py; do [ -f "$t" ] && run_one "$t" "$PYTHON" "$t"; done
echo
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
