# Tiny test protocol shared by the shell tests (source it): one line per check,
# PASS / FAIL / SKIPPED, counted by test/run_tests.sh.
_failed=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; _failed=$((_failed + 1)); }
skip() { echo "SKIPPED $1: $2"; }
# expect_fail NAME PATTERN -- CMD...: CMD must exit non-zero (not by a signal)
# and print a line matching PATTERN (grep -E) on stdout or stderr.
expect_fail() {
  local name=$1 pattern=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ $rc -eq 0 ]; then fail "$name" "exit status 0, expected an error"
  elif [ $rc -ge 128 ]; then fail "$name" "killed by signal $((rc - 128))"
  elif ! grep -qE -- "$pattern" <<<"$out"; then fail "$name" "no line matching '$pattern' in: $(head -c 300 <<<"$out")"
  else pass "$name"; fi
}
finish() { [ $_failed -eq 0 ]; exit $?; }
