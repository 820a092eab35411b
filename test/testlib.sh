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
# expect_only_error NAME PATTERN -- CMD...: as expect_fail, and the error line (matching PATTERN)
# is all CMD prints, on stdout and stderr together
expect_only_error() {
  local name=$1 pattern=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then fail "$name" "exit status $rc, expected an error"
  elif [ "$(wc -l <<<"$out")" -ne 1 ] || ! grep -qE -- "$pattern" <<<"$out"; then
    fail "$name" "expected one line matching '$pattern', got: $(head -c 400 <<<"$out")"
  else pass "$name"; fi
}
finish() { [ $_failed -eq 0 ]; exit $?; }
# pattern_shards DIR SEED NOISE VOCAB N NAME:START:END...: a small learnable token stream, N
# tokens of the 12-token pattern 3 1 4 1 5 9 2 6 5 3 5 8 with each token, at probability NOISE,
# a random one below VOCAB (Python's random, seeded with SEED), written by the dataset scripts'
# shard writer (so the C++ reader is checked against what the Python writer writes): one shard
# DIR/NAME_000000.bin per NAME:START:END, holding the tokens [START, END) (END empty: to the end).
pattern_shards() {
  "$PYTHON" - "$@" <<'PY'
import random, sys
sys.path.insert(0, "data")
from shards import write_shard
out, seed, noise, vocab, n = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
random.seed(seed)
pat = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8]
toks = [pat[i % 12] if random.random() > noise else random.randrange(vocab) for i in range(n)]
for spec in sys.argv[6:]:
    name, start, end = spec.split(":")
    write_shard(f"{out}/{name}_000000.bin", toks[int(start):int(end) if end else None])
PY
}
# needs_built NAME FILE: unless FILE is built, SKIPPED NAME and the script ends there
needs_built() { [ -x "$2" ] && return 0; skip "$1" "$2 not built"; exit 0; }
# scratch: a new folder in $tmp, removed when the script exits
scratch() { tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT; }
