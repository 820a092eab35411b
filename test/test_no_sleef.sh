#!/usr/bin/env bash
# The build without SLEEF (a machine without libsleef-dev, such as a GPU machine that cannot
# install packages, or make SLEEF=0): the Makefile leaves -DHAVE_SLEEF and -lsleef out when it
# finds no sleef.h or is given SLEEF=0, and puts both in when it finds one (dry runs, make -n);
# and the CPU ops' vector paths with libm's exp, lane by lane, pass every check of
# test/test_cpu_vec.cpp (built here without SLEEF, and without BLAS: src/ops/matmul.h's loop GEMM).
cd "$(dirname "$0")/.." || exit 1
. test/testlib.sh
scratch
CXX=${CXX:-g++}

# dry_run NAME MAKE-ARGS...: the commands make would run to build test_cpu_vec, in $out
dry_run() {
  local name=$1; shift
  out=$(make -n -B NVCC= BUILD="$tmp/b" "$@" "$tmp/b/test/test_cpu_vec" 2>&1) ||
    { fail "$name" "make -n failed: $(tail -n 3 <<<"$out")"; return 1; }
}
uses_sleef() { grep -q -- '-DHAVE_SLEEF' <<<"$out" && grep -q -- '-lsleef' <<<"$out"; }
no_sleef() { ! grep -q -- '-DHAVE_SLEEF' <<<"$out" && ! grep -q -- '-lsleef' <<<"$out"; }

if dry_run make_sleef_0 SLEEF=0; then
  if no_sleef; then pass make_sleef_0; else fail make_sleef_0 "SLEEF=0 still compiles or links with SLEEF"; fi
fi
# -nostdinc: the compiler finds no system header, sleef.h among them (only preprocessed: a dry run)
if dry_run make_without_sleef_h CPPFLAGS=-nostdinc; then
  if no_sleef; then pass make_without_sleef_h; else fail make_without_sleef_h "SLEEF used though sleef.h is not found"; fi
fi
if echo '#include <sleef.h>' | $CXX -E -x c++ - >/dev/null 2>&1; then
  if dry_run make_with_sleef_h; then
    if uses_sleef; then pass make_with_sleef_h; else fail make_with_sleef_h "sleef.h is here but not used"; fi
  fi
else
  skip make_with_sleef_h "no sleef.h on this machine (Debian: libsleef-dev)"
fi

# The Makefile's compile flags (-O3 -march=native, C++17, OpenMP), without SLEEF and BLAS.
if ! $CXX -O3 -march=native -std=c++17 -fopenmp -fno-math-errno -DNO_CBLAS -Isrc test/test_cpu_vec.cpp \
     -o "$tmp/test_cpu_vec" 2>"$tmp/build.err"; then
  fail build_without_sleef "$(head -c 600 "$tmp/build.err")"
  finish
fi
out=$("$tmp/test_cpu_vec" 2>&1)
rc=$?
if grep -q 'exp from libm' <<<"$out"; then pass built_with_libm; else fail built_with_libm "$(head -n 1 <<<"$out")"; fi
sed -nE 's/^(PASS|FAIL|SKIPPED) /\1 no_sleef:/p' <<<"$out"
if grep -q '^FAIL ' <<<"$out"; then _failed=$((_failed + 1)); fi
if [ $rc -ne 0 ] && ! grep -q '^FAIL ' <<<"$out"; then fail no_sleef_run "exit status $rc: $(tail -n 3 <<<"$out")"; fi
finish
