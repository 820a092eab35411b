# What make finds and says (Makefile): MPI through `mpicc -show` of Open MPI or MPICH, NCCL
# where NVIDIA's packages put it, and the JSON header of .gpu_deps/ when Debian's is missing.
# `make -n deps` reads the Makefile and runs nothing.
source test/testlib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/nccl/include"
# MPICH's wrapper: the compiler, then its flags, for -show alone (what the Makefile asks); it
# compiles nothing
printf '#!/bin/sh\n[ $# = 1 ] && [ "$1" = -show ] || { echo "fake mpicc: compiles nothing ($*)" >&2; exit 1; }
echo "gcc -Wl,-z,relro -I/opt/mpich/include -L/opt/mpich/lib -lmpich"\n' >"$tmp/bin/mpicc"
chmod +x "$tmp/bin/mpicc"
touch "$tmp/nccl/include/nccl.h"
# the Makefile's lines, then the flags it built (a second makefile read after it prints them)
printf 'flags:\n\t@echo "CXXFLAGS=$(CXXFLAGS) LDLIBS=$(LDLIBS) NVCCFLAGS=$(NVCCFLAGS)"\n' >"$tmp/flags.mk"
# (a make of its own: not a sub-make of the one running the tests, which says nothing)
says() {
  env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS make -n -f Makefile -f "$tmp/flags.mk" deps flags \
    NVCC=/usr/local/cuda/bin/nvcc "$@" 2>&1
}

out=$(says MPICC="$tmp/bin/mpicc" NCCL_HOME="$tmp/nccl")
if grep -q "^MPI: found ($tmp/bin/mpicc: -lmpich)" <<<"$out" && grep -q "CXXFLAGS=.*-DHAVE_MPI .*-I/opt/mpich/include" <<<"$out" &&
    grep -q "LDLIBS=.*-Wl,-z,relro -L/opt/mpich/lib -lmpich" <<<"$out"; then pass make_mpich
else fail make_mpich "$(head -c 400 <<<"$out")"; fi
if grep -q "^NCCL: found ($tmp/nccl/include/nccl.h): multi-GPU training with mpirun" <<<"$out" &&
    grep -q "NVCCFLAGS=.*-DHAVE_NCCL -I$tmp/nccl/include" <<<"$out" && grep -q "LDLIBS=.*-L$tmp/nccl/lib .*-lnccl" <<<"$out"; then
  pass make_nccl_home
else fail make_nccl_home "$(head -c 400 <<<"$out")"; fi
out=$(says MPICC="$tmp/bin/no-mpicc" NCCL_HOME="$tmp/nccl")
if grep -q "^MPI: not found: one process only" <<<"$out" && ! grep -q -- "-DHAVE_MPI\|-DHAVE_NCCL" <<<"$out" &&
    grep -q "^NCCL: found but not used: it needs MPI" <<<"$out"; then
  pass make_no_mpi
else fail make_no_mpi "$(head -c 400 <<<"$out")"; fi
# the JSON header of scripts/prepare_gpu_deps.sh, after the system's own
made=""
if [ ! -e .gpu_deps/include/nlohmann/json.hpp ]; then
  mkdir -p .gpu_deps/include/nlohmann && touch .gpu_deps/include/nlohmann/json.hpp && made=yes
fi
out=$(says)
[ -n "$made" ] && rm -rf .gpu_deps
if grep -q "CXXFLAGS=.*-idirafter .gpu_deps/include" <<<"$out"; then pass make_gpu_deps_json
else fail make_gpu_deps_json "$(head -c 400 <<<"$out")"; fi
finish
