#!/usr/bin/env bash
# The build without ICU (a machine without libicu-dev, such as a GPU machine that cannot install
# packages, or make ICU=0): the Makefile leaves -DHAVE_ICU and -licuuc out when it finds no
# unicode/uchar.h or is given ICU=0, and puts both in when it finds it (dry runs, make -n); and
# src/gpt2_encoder.cpp built without it refuses with one clear error (build/sample --prompt says
# "error: --prompt: this build has no Unicode library ...").
cd "$(dirname "$0")/.." || exit 1
. test/testlib.sh
scratch
CXX=${CXX:-g++}

# icu_flags MAKE-ARGS...: "yes" when make would compile and link build/sample with ICU, "no" when
# with neither
icu_flags() {
  local out c l
  out=$(make -n -B NVCC= BUILD="$tmp/b" "$@" "$tmp/b/sample" 2>&1) || { echo "make failed: $(tail -n 2 <<<"$out")"; return; }
  if grep -q -- '-DHAVE_ICU' <<<"$out"; then c=1; else c=0; fi
  if grep -q -- '-licuuc' <<<"$out"; then l=1; else l=0; fi
  case $c$l in 11) echo yes ;; 00) echo no ;; *) echo "compiled with it $c, linked $l" ;; esac
}
# expect_icu NAME WANT MAKE-ARGS...
expect_icu() {
  local name=$1 want=$2 got
  shift 2
  got=$(icu_flags "$@")
  if [ "$got" = "$want" ]; then pass "$name"; else fail "$name" "ICU in the build: $got, expected $want"; fi
}
expect_icu make_icu_0 no ICU=0
# -nostdinc: the compiler finds no system header, unicode/uchar.h among them (a dry run only)
expect_icu make_without_icu_headers no CPPFLAGS=-nostdinc
if echo '#include <unicode/uchar.h>' | $CXX -E -x c++ - >/dev/null 2>&1; then
  expect_icu make_with_icu_headers yes
else
  skip make_with_icu_headers "no unicode/uchar.h on this machine (Debian: libicu-dev)"
fi

# The encoder and its test program built as the Makefile builds them without ICU
if ! $CXX -O0 -std=c++17 -Isrc test/test_gpt2_encoder.cpp src/gpt2_encoder.cpp src/gpt2_decoder.cpp src/fileio.cpp \
     -o "$tmp/test_gpt2_encoder" 2>"$tmp/build.err"; then
  fail build_without_icu "$(head -c 600 "$tmp/build.err")"
  finish
fi
pass build_without_icu
out=$("$tmp/test_gpt2_encoder" 2>&1)
sed -nE 's/^(PASS|FAIL|SKIPPED) /\1 no_icu:/p' <<<"$out"
grep -q '^PASS no_unicode_library' <<<"$out" || fail no_icu_run "$(tail -n 3 <<<"$out")"
expect_fail no_icu_encode_mode "^error: this build has no Unicode library" -- "$tmp/test_gpt2_encoder" --encode x.json
finish
