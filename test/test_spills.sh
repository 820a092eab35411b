#!/usr/bin/env bash
# scripts/check_spills.sh: on fake compilers that print ptxas reports (a kernel that spills, one
# over the register limit, a clean one, a file that does not compile), on build reports (--build:
# only the sm_90 part counts; a missing or stale report is an error) and its bad arguments; then
# the real sm_90 build of cuda/*.cu, which must have no spill and no kernel over 240 registers: the
# build's own reports where it made them, else compiled here (SKIPPED without nvcc: it needs the
# CUDA toolkit, not a GPU).
cd "$(dirname "$0")/.." || exit 1
. test/testlib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cs=scripts/check_spills.sh

# fake NAME REGS SPILL: an nvcc whose ptxas report has kernel NAME() with REGS registers and SPILL
# bytes of spill stores (and loads); REGS "fail": it does not compile. It takes only the argument
# vector check_spills.sh sends (each option its own argument, an existing .cu, -o a .cubin), and
# refuses any other as nvcc does.
fake() {
  local m="_Z${#1}$1v"  # mangled NAME()
  cat >"$tmp/$1" <<EOF
#!/bin/sh
all="\$*"
refuse() { echo "nvcc fatal   : fake nvcc: not the call check_spills.sh makes: \$all" >&2; exit 1; }
for w in -O3 -arch=sm_90 -std=c++17 -Isrc -Icuda; do [ "\${1-}" = "\$w" ] || refuse; shift; done
[ "\${1-}" = -DHAVE_NCCL ] && shift
for w in -cubin -Xptxas -v; do [ "\${1-}" = "\$w" ] || refuse; shift; done
[ \$# = 3 ] && [ -f "\$1" ] && [ "\$2" = -o ] && [ "\${3%.cubin}" != "\$3" ] || refuse
[ "$2" = fail ] && { echo "x.cu(1): error: expected a declaration" >&2; exit 1; }
echo "ptxas info    : Compiling entry function '$m' for 'sm_90'" >&2
echo "ptxas info    : Function properties for $m" >&2
echo "    $3 bytes stack frame, $3 bytes spill stores, $3 bytes spill loads" >&2
echo "ptxas info    : Used $2 registers, used 1 barriers" >&2
EOF
  chmod +x "$tmp/$1"
}
fake spiller 96 24
fake greedy 250 0
fake clean 128 0
fake broken fail
one=cuda/norm.cu  # any file: the fake compilers do not read it
# the fakes refuse what nvcc would not be asked: an option folded into another's argument, no -o
if "$tmp/clean" -O3 -arch=sm_90 -std=c++17 -Isrc -Icuda -cubin "-Xptxas -v" $one -o "$tmp/x.cubin" 2>/dev/null ||
  "$tmp/clean" -O3 -arch=sm_90 -std=c++17 -Isrc -Icuda -cubin -Xptxas -v $one 2>/dev/null ||
  ! "$tmp/clean" -O3 -arch=sm_90 -std=c++17 -Isrc -Icuda -cubin -Xptxas -v $one -o "$tmp/x.cubin" 2>/dev/null; then
  fail spill_check_fake_strict "the fake nvcc's answers do not follow its arguments"
else pass spill_check_fake_strict; fi

out=$(NVCC=$tmp/spiller bash $cs "$one" 2>&1)
if [ $? = 1 ] && grep -q '^FAILED: spiller spills (24 bytes stored, 24 loaded)' <<<"$out" &&
    grep -q '^| spiller | 96 | 24 | 24 | 24 |$' <<<"$out"; then pass spill_check_spill
else fail spill_check_spill "expected a FAILED line naming the kernel: $out"; fi
out=$(NVCC=$tmp/greedy bash $cs "$one" 2>&1)
if [ $? = 1 ] && grep -q '^FAILED: greedy uses 250 registers (over 240)' <<<"$out"; then pass spill_check_registers
else fail spill_check_registers "expected a FAILED line for 250 registers: $out"; fi
out=$(NVCC=$tmp/greedy bash $cs --max-regs 255 --out "$tmp/t.md" "$one" 2>&1)
if [ $? = 0 ] && grep -q '^| greedy | 250 | 0 | 0 | 0 |$' "$tmp/t.md"; then pass spill_check_clean
else fail spill_check_clean "expected exit 0 and the table in --out: $out"; fi
expect_fail spill_check_compile_error "^error: $one does not compile for sm_90" -- env NVCC="$tmp/broken" bash $cs "$one"
# report NAME REGS80 SPILL80 REGS90 SPILL90: the build's ptxas report of cuda/NAME.cu (sm_80 first,
# as the build's -gencode order has it) with kernel NAME() at those registers and spills
report() {
  local m="_Z${#1}$1v" arch regs spill
  mkdir -p "$tmp/b/cuda"
  echo "ptxas info    : 0 bytes gmem" >"$tmp/b/cuda/$1.o.ptxas"
  for arch in "sm_80 $2 $3" "sm_90 $4 $5"; do
    read -r arch regs spill <<<"$arch"
    printf "ptxas info    : Compiling entry function '%s' for '%s'\n" "$m" "$arch"
    echo "ptxas info    : Function properties for $m"
    echo "    $spill bytes stack frame, $spill bytes spill stores, $spill bytes spill loads"
    echo "ptxas info    : Used $regs registers, used 0 barriers, 368 bytes cmem[0]"
  done >>"$tmp/b/cuda/$1.o.ptxas"
}
report norm 250 8 128 0
out=$(bash $cs --build "$tmp/b" cuda/norm.cu 2>&1)
if [ $? = 0 ] && grep -q '^| norm | 128 | 0 | 0 | 0 |$' <<<"$out"; then pass spill_check_build_sm90_only
else fail spill_check_build_sm90_only "expected sm_90's clean row, not sm_80's spill: $out"; fi
report norm 96 0 96 16
out=$(bash $cs --build "$tmp/b" cuda/norm.cu 2>&1)
if [ $? = 1 ] && grep -q '^FAILED: norm spills (16 bytes stored, 16 loaded)' <<<"$out"; then pass spill_check_build_spill
else fail spill_check_build_spill "expected a FAILED line for sm_90's spill: $out"; fi
expect_fail spill_check_build_missing "^error: no ptxas report $tmp/b/cuda/gelu.o.ptxas" -- bash $cs --build "$tmp/b" cuda/gelu.cu
touch -d '2000-01-01' "$tmp/b/cuda/norm.o.ptxas"
expect_fail spill_check_build_stale "^error: $tmp/b/cuda/norm.o.ptxas is older than cuda/norm.cu" -- bash $cs --build "$tmp/b" cuda/norm.cu
expect_fail spill_check_bad_limit "^error: --max-regs must be 1..255, got '300'" -- bash $cs --max-regs 300
expect_fail spill_check_bad_option "^error: unknown argument '--bogus'" -- bash $cs --bogus
expect_fail spill_check_no_file "^error: no such file: cuda/nothing.cu" -- bash $cs cuda/nothing.cu

nvcc=$(command -v /usr/local/cuda/bin/nvcc || command -v nvcc)
if [ -z "$nvcc" ]; then
  skip spill_check_sm90 "no nvcc (the CUDA toolkit) on this machine"
else
  start=$SECONDS b=${BUILD:-build}
  # the build's reports when it has one for every file (make with nvcc writes them)
  from=(--build "$b")
  for f in cuda/*.cu; do [ -f "$b/cuda/$(basename "$f" .cu).o.ptxas" ] || from=(); done
  [ ${#from[@]} = 0 ] && echo "# $b has no ptxas report for every cuda/*.cu: compiling them here"
  out=$(NVCC=$nvcc bash $cs "${from[@]}" 2>&1)
  if [ $? = 0 ]; then pass spill_check_sm90; echo "# $(tail -n 1 <<<"$out") ($((SECONDS - start)) s)"
  else fail spill_check_sm90 "$(tail -n 3 <<<"$out")"; fi
fi
finish
