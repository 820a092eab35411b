# build/test/test_gradcheck as a user meets it: --help says what it checks and prints, an
# unknown argument is one error line, and a full run ends with "N passed, N failed", the counts of
# its own PASS and FAIL lines (run_tests.sh runs it for the checks themselves).
source test/testlib.sh
BUILD=${BUILD:-build}
GRADCHECK=${GRADCHECK:-$BUILD/test/test_gradcheck}
if [ ! -x "$GRADCHECK" ]; then
  skip gradcheck_cli "$GRADCHECK not built"
  finish
fi

if out=$("$GRADCHECK" --help 2>&1) && grep -q "^usage: .*test_gradcheck \[--list\]" <<<"$out" &&
  grep -q '"N passed, N failed"' <<<"$out" && ! grep -q "^PASS" <<<"$out"; then pass gradcheck_help
else fail gradcheck_help "status $?: $(head -c 300 <<<"$out")"; fi
expect_only_error gradcheck_unknown_argument "^error: unknown argument '--bogus' \(see --help\)$" -- "$GRADCHECK" --bogus

out=$("$GRADCHECK" 2>&1); rc=$?
p=$(grep -c "^PASS " <<<"$out"); f=$(grep -c "^FAIL " <<<"$out")
if [ $rc -eq 0 ] && [ "$p" -gt 20 ] && [ "$(tail -1 <<<"$out")" = "$p passed, $f failed" ]; then pass gradcheck_closing_count
else fail gradcheck_closing_count "status $rc, $p PASS and $f FAIL lines, last line '$(tail -1 <<<"$out")'"; fi

finish
