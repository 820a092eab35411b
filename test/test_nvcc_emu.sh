#!/usr/bin/env bash
# test/cuda_emu/nvcc-emu as a build tool: the object and its dependency file (-MMD) name the real
# source, never the temporary copy it compiles; a failed compile leaves the previous .d as it was;
# and a compile cut off after g++ wrote its files (make interrupted, a killed job) leaves no .d
# naming the deleted temporary file, which would stop the next make with "No rule to make target";
# and a .cuh reached through -I is rewritten like one beside the file.
cd "$(dirname "$0")/.." || exit 1
. test/testlib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
emu=test/cuda_emu/nvcc-emu

printf '__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n' >"$tmp/k.cu"
printf '__global__ void k(float* x) { x[threadIdx.x] = ; }\n' >"$tmp/bad.cu"

if ! TMPDIR="$tmp" $emu -MMD -MP -c "$tmp/k.cu" -o "$tmp/k.o" >"$tmp/k.log" 2>&1; then
  fail nvcc_emu_compiles "$(tail -n 3 "$tmp/k.log")"
elif [ ! -s "$tmp/k.o" ] || ! grep -q "k\.o: $tmp/k\.cu" "$tmp/k.d" 2>/dev/null; then
  fail nvcc_emu_compiles "no object, or k.d does not name k.cu: $(head -c 200 "$tmp/k.d" 2>/dev/null)"
elif grep -q 'nvcc-emu-' "$tmp/k.d"; then fail nvcc_emu_compiles "k.d names the temporary copy: $(head -c 200 "$tmp/k.d")"
else pass nvcc_emu_compiles; fi

# a failed compile: an error, no object, and the .d of the last good compile unchanged
cp "$tmp/k.d" "$tmp/bad.d"
if TMPDIR="$tmp" $emu -MMD -MP -c "$tmp/bad.cu" -o "$tmp/bad.o" >"$tmp/bad.log" 2>&1; then
  fail nvcc_emu_failed_compile "exit status 0 for a syntax error"
elif [ -e "$tmp/bad.o" ] || ! cmp -s "$tmp/k.d" "$tmp/bad.d"; then
  fail nvcc_emu_failed_compile "it wrote bad.o or changed bad.d"
else pass nvcc_emu_failed_compile; fi

# a kernel launched in a .cuh that a header in another folder includes through -I (as
# test/lab/lab.cuh includes cuda/common.cuh): found and rewritten, so the launch compiles
mkdir -p "$tmp/inc" "$tmp/sub"
printf '#pragma once\n__global__ void k2(float* x) { x[0] = 2.0f; }\ninline void go(float* x) { k2<<<1, 1>>>(x); }\n' \
  >"$tmp/inc/launch.cuh"
printf '#pragma once\n#include "launch.cuh"\n' >"$tmp/sub/mid.cuh"
printf '#include "mid.cuh"\nvoid f(float* x) { go(x); }\n' >"$tmp/sub/user.cu"
if TMPDIR="$tmp" $emu -I"$tmp/inc" -c "$tmp/sub/user.cu" -o "$tmp/user.o" >"$tmp/user.log" 2>&1 && [ -s "$tmp/user.o" ]; then
  pass nvcc_emu_include_path
else fail nvcc_emu_include_path "$(tail -n 3 "$tmp/user.log")"; fi

# a __shared__ declaration whose type has template arguments (a comma inside <>), and a second
# name after it: both slots declared, the kernel compiles
printf 'template <int N, class T> struct Two { T x[N]; };\n__global__ void k3(float* o) {\n  __shared__ Two<2, float> a, b[2];\n  a.x[1] = b[1].x[0] = 1.0f;\n  o[0] = a.x[1] + b[1].x[0];\n}\n' >"$tmp/tmpl.cu"
if TMPDIR="$tmp" $emu -c "$tmp/tmpl.cu" -o "$tmp/tmpl.o" >"$tmp/tmpl.log" 2>&1 && [ -s "$tmp/tmpl.o" ]; then
  pass nvcc_emu_shared_template_type
else fail nvcc_emu_shared_template_type "$(tail -n 3 "$tmp/tmpl.log")"; fi

# cut off: a stand-in for g++ writes what g++ writes (the object, and a .d naming the temporary
# source it was given), then kills nvcc-emu before it can rewrite anything
cat >"$tmp/cxx" <<'EOF'
#!/usr/bin/env bash
out="" dep="" src=""
while [ $# -gt 0 ]; do
  case $1 in -o) out=$2; shift ;; -MF) dep=$2; shift ;; -MT) shift ;; *.cpp) src=$1 ;; esac
  shift
done
echo object >"$out"
echo "x.o: $src" >"$dep"
kill -KILL "$PPID"
EOF
chmod +x "$tmp/cxx"
(TMPDIR="$tmp" NVCC_EMU_CXX="$tmp/cxx" $emu -MMD -MP -c "$tmp/k.cu" -o "$tmp/cut.o" >/dev/null 2>&1; true) 2>/dev/null
if grep -qs 'nvcc-emu-' "$tmp/cut.d"; then fail nvcc_emu_cut_off "cut.d names the temporary copy: $(cat "$tmp/cut.d")"
elif [ -e "$tmp/cut.o" ]; then fail nvcc_emu_cut_off "a cut-off compile left cut.o"
elif ! ls -d "$tmp"/nvcc-emu-* >/dev/null 2>&1; then fail nvcc_emu_cut_off "the stand-in for g++ did not run"
else pass nvcc_emu_cut_off; fi
finish
