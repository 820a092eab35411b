#!/usr/bin/env bash
# scripts/gpu_check.sh without a GPU: its options; the prerequisites on a fake machine
# (test/fake_gpu/: nvidia-smi, nvcc, the CUDA runtime, each as strict as the real tool): a working
# GPU passes, each refusal is one exact error: line before any build (no nvcc, no GPU, a wedged
# one, a driver too old for the toolkit's CUDA, a GPU below sm_80, a header missing, and CUDA's
# first call failing: fabric manager down, a cuda-compat libcuda over a newer driver, MIG without
# an instance, CUDA_VISIBLE_DEVICES naming no GPU, a call that never returns); the data-parallel
# part only with NCCL linked; racecheck's kernel filter; scripts/prepare_gpu_deps.sh's sources and
# its error; and, in the full tier, dry runs on the CPU execution layer (--emulated): a run whose plan leaves a part
# out (the parts it cut are failures, the rest written as it goes), a second run with --skip-done
# that does only what the first left (its rows copied, the report whole), --skip, a budget too
# short for anything, a run killed part way (its report still written), and the benchmark's
# tokens from a prepared shard, with a failed run whose output is kept.
cd "$(dirname "$0")/.." || exit 1
. test/testlib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gc=scripts/gpu_check.sh

out=$(bash $gc -h 2>&1)
if [ $? -eq 0 ] && grep -q -- '--emulated' <<<"$out" && grep -q -- '--budget' <<<"$out"; then pass gpu_check_help
else fail gpu_check_help "-h did not print the usage: $out"; fi
expect_fail gpu_check_bad_option "^error: unknown argument '--bogus'" -- bash $gc --bogus
expect_fail gpu_check_bad_budget "^error: --budget must be a positive number" -- bash $gc --budget 7m
expect_fail gpu_check_bad_grid_precision "^error: --grid-precision must be fp32 or bf16, got 'fp16'" -- bash $gc --grid-precision fp16
expect_fail gpu_check_bad_skip "^error: --skip: no part 'bogus'" -- bash $gc --skip tests,bogus
expect_fail gpu_check_bad_skip_done "^error: --skip-done: no parts.txt in '$tmp'" -- bash $gc --skip-done "$tmp"
mkdir -p "$tmp/same" && touch "$tmp/same/parts.txt"
expect_fail gpu_check_skip_done_same_out "^error: --skip-done: give the new run another --out" -- \
  bash $gc --skip-done "$tmp/same" --out "$tmp/same"

# test_cuda NAME...: the subsets the script names must all exist (a stale name would waste the
# GPU run on an error), and a name that matches no test is an error.
tc=${BUILD:-build}/test/test_cuda
# subset_lists SCRIPT: each program and the names the script runs of it, one line each; a list is
# its lines from NAME=" to the line that closes the quote
subset_lists() {
  local EMU_SUBSET="" SAN_SUBSET="" SAN_FLASH=""
  eval "$(awk '/^(EMU_SUBSET|SAN_SUBSET|SAN_FLASH)="/ { on = 1; q = 0 }
    on { print; q += gsub(/"/, "&"); if (q % 2 == 0) on = 0 }' "$1")"
  echo "test_cuda $(tr '\n' ' ' <<<"$EMU_SUBSET")"
  echo "test_cuda $(tr ' ' '\n' <<<"$SAN_SUBSET" | grep '^cuda_' | grep -v '^cuda_bf16_' | tr '\n' ' ')"
  echo "test_cuda_bf16 $(tr ' ' '\n' <<<"$SAN_SUBSET" | grep '^cuda_bf16_' | tr '\n' ' ')"
  echo "test_cuda_flash $(tr '\n' ' ' <<<"$SAN_FLASH")"
}
# check_subsets SCRIPT: what is wrong with its subsets (nothing: empty): a list left empty (the
# program would run every test), a program failing on its names, fewer results than names
check_subsets() {
  local why="" prog names out n
  while read -r prog names; do
    [ -n "$names" ] || { why+="no names for $prog; "; continue; }
    # shellcheck disable=SC2086
    out=$(CUDA_VISIBLE_DEVICES='' "$(dirname "$tc")/$prog" $names 2>&1) || why+="exit $? for $prog '$names': $(tail -n 2 <<<"$out"); "
    n=$(grep -cE '^(PASS|FAIL|SKIPPED) ' <<<"$out")
    [ "$n" -ge "$(wc -w <<<"$names")" ] || why+="$n tests for the $(wc -w <<<"$names") names '$names' of $prog; "
  done < <(subset_lists "$1")
  echo "$why"
}
if [ ! -x "$tc" ]; then
  skip gpu_check_test_subsets "$tc not built"
else
  why=$(check_subsets $gc)
  if [ -n "$why" ]; then fail gpu_check_test_subsets "$why"; else pass gpu_check_test_subsets; fi
  # the check fails on a stale name and on an empty list (lists alone: the others are empty)
  printf 'SAN_FLASH="cuda_flash_head_sizes\n  cuda_no_such_test"  # two lines\n' >"$tmp/stale.sh"
  why=$(check_subsets "$tmp/stale.sh")
  if grep -q "exit [1-9][0-9]* for test_cuda_flash .*no test name contains 'cuda_no_such_test'" <<<"$why" &&
    grep -q "no names for test_cuda_bf16" <<<"$why"; then pass gpu_check_test_subsets_can_fail
  else fail gpu_check_test_subsets_can_fail "a stale name or an empty list went unnoticed: $why"; fi
  expect_fail test_cuda_unknown_name "^error: no test name contains 'no_such_test'" -- "$tc" cuda_layernorm no_such_test
fi

# The paper grid's gate (its block, as the script has it), on fake test programs that print
# what their tests named by the argument did: a bf16 grid whose bf16 tests all pass keeps bf16;
# a FAIL, a failing exit or no bf16 test passed (no GPU) falls back to fp32, which runs the tf32
# tests the same way and falls back to plain fp32 (TF32 off); programs without such tests are left
# out; the failed tests are named.
gate=$(sed -n '/# grid gate: begin/,/# grid gate: end/p' $gc)
fake() { printf '#!/bin/sh\n%s\n' "$2" >"$tmp/$1" && chmod +x "$tmp/$1"; }
nomatch='echo "error: no test name contains '"'"'$1'"'"'" >&2; exit 2'
fake ok 'echo "PASS cuda_a_$1"; echo "PASS cuda_b_$1"'
fake bad 'echo "PASS cuda_a_$1"; echo "FAIL cuda_flash_x_$1: rel err 1"; exit 1'
fake none 'echo "SKIPPED cuda_a_$1: no GPU"'
fake badbf16 '[ "$1" = bf16 ] && { echo "FAIL cuda_flash_x_bf16: rel err 1"; exit 1; }; echo "PASS cuda_a_$1"'
fake onlybf16 '[ "$1" = bf16 ] || { '"$nomatch"'; }; echo "PASS cuda_a_bf16"'
why=""
for case in "ok ok:bf16:bf16 1" "ok bad:bf16:fp32 0" "none:bf16:fp32 0" "badbf16:bf16:fp32 1" \
  "ok onlybf16:bf16:bf16 1" "ok onlybf16:fp32:fp32 1" "onlybf16:fp32:fp32 0" "ok:fp32:fp32 1" \
  "bad:fp32:fp32 0"; do
  IFS=: read -r bins prec want <<<"$case"
  # shellcheck disable=SC2034  # TEST_BINS is read by the gate
  out=$(TEST_BINS=$(for b in $bins; do echo "$tmp/$b"; done); GRID_PREC=$prec; eval "$gate"; echo "-> $GRID_PREC $GRID_TF32")
  grep -q -- "-> $want\$" <<<"$out" || why+="[$bins, $prec] expected $want: $out; "
done
out=$(TEST_BINS=$tmp/badbf16; GRID_PREC=bf16; eval "$gate")
grep -q "bf16 tests failed on this GPU:.*cuda_flash_x_bf16" <<<"$out" || why+="the failed bf16 test is not named: $out; "
out=$(TEST_BINS="$tmp/ok $tmp/bad"; GRID_PREC=fp32; eval "$gate")
grep -q "TF32 tests failed on this GPU:.*cuda_flash_x_tf32" <<<"$out" || why+="the failed tf32 test is not named: $out; "
if [ -z "$gate" ]; then fail gpu_check_grid_gate "the gate's block was not found in $gc"
elif [ -n "$why" ]; then fail gpu_check_grid_gate "$why"
else pass gpu_check_grid_gate; fi

# The prerequisites, on a fake machine (test/fake_gpu/: its README says what each fake answers)
# first on PATH and as CUDA_HOME, whatever this machine has: nvidia-smi, an nvcc that tells its
# version and architectures, the CUDA runtime's header and a libcudart.so for the script's CUDA
# probe, cuBLAS's files. Each fake answers only the argument vectors the script should send,
# in the form the real tool takes them, and refuses any other as the real one does. A working
# GPU passes; each refusal is one exact `error:` line, the FAIL line, the report, and nothing built.
mkdir -p "$tmp/fakebin" "$tmp/cuda/bin" "$tmp/cuda/include" "$tmp/cuda/lib64"
cp test/fake_gpu/nvidia-smi "$tmp/fakebin/"
cp test/fake_gpu/nvcc "$tmp/cuda/bin/"
cp test/fake_gpu/cuda_runtime_api.h "$tmp/cuda/include/"
gcc -shared -fPIC -Wall test/fake_gpu/cudart.c -o "$tmp/cuda/lib64/libcudart.so" || echo "# the fake libcudart.so did not build"
touch "$tmp/cuda/include/cublas_v2.h" "$tmp/cuda/lib64/libcublas.so"

# The fakes are strict: they refuse what the real tools refuse (the single argument that held
# both of nvidia-smi's options, a query without its format, a field the driver lacks) and what
# the script has no business sending, and answer the script's own calls.
H200="NVIDIA H200, 143771 MiB, 580.65.06, 9.0"
why=""
fk() {  # fk 0|x CMD...: CMD must succeed (0) or be refused (x)
  local want=$1 rc
  shift
  "$@" >/dev/null 2>&1
  rc=$?
  if [ "$want" = 0 ] && [ $rc != 0 ]; then why+="'$*' failed (status $rc); "; fi
  if [ "$want" = x ] && [ $rc = 0 ]; then why+="'$*' was answered; "; fi
}
smi_bin=$tmp/fakebin/nvidia-smi nvcc_bin=$tmp/cuda/bin/nvcc
export FAKE_GPU=$H200 FAKE_SMI=ok
fk x $smi_bin "--format=csv,noheader --query-gpu=name,memory.total,driver_version,compute_cap"
fk x $smi_bin --query-gpu=name
fk x $smi_bin --query-gpu=name --format=csv
fk x $smi_bin --query-gpu=name,bogus --format=csv,noheader
fk x $smi_bin -L
fk x env FAKE_GPU="Tesla K80, 11441 MiB, 470.82.01, 3.7" $smi_bin --query-gpu=name,compute_cap --format=csv,noheader
fk 0 $smi_bin --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader
fk 0 $smi_bin --format=csv,noheader --query-gpu=mig.mode.current
[ "$($smi_bin --format=csv,noheader --query-gpu=name,compute_cap)" = "NVIDIA H200, 9.0" ] || why+="nvidia-smi's answer: $($smi_bin --format=csv,noheader --query-gpu=name,compute_cap 2>&1); "
fk x $nvcc_bin "--version --list-gpu-arch"
fk x $nvcc_bin --version --list-gpu-arch
fk x $nvcc_bin -c x.cu -o x.o
fk 0 $nvcc_bin --version
fk 0 $nvcc_bin --list-gpu-arch
if [ -n "$why" ]; then fail gpu_check_fakes_strict "$why"; else pass gpu_check_fakes_strict; fi

# smi 'LINE' | smi -nodev | smi -hang: the fake machine has one GPU (LINE: name, memory, driver,
# compute capability as nvidia-smi prints them), or no GPU, or a driver that never answers
smi() {
  case $1 in
    -nodev) export FAKE_SMI=nodev ;;
    -hang) export FAKE_SMI=hang ;;
    *) export FAKE_SMI=ok FAKE_GPU=$1 ;;
  esac
}
# gpu_run DIR [VAR=VALUE...]: the check (not emulated) with the fakes; sets out and rc. The
# environment the CUDA runtime reads is the fake machine's unless given. The fake machine has no
# PyTorch (a torch module that fails to import): the check's optional probe of it, a second and
# a half of import where CI has it, tells nothing here.
mkdir -p "$tmp/notorch" && echo 'raise ImportError("no PyTorch on the fake machine")' >"$tmp/notorch/torch.py"
gpu_run() {
  local dir=$1
  shift
  out=$(env -u NCCL_HOME -u MPICC -u CXX -u GPU_CHECK_PROBE_S -u CUDA_VISIBLE_DEVICES -u LD_LIBRARY_PATH \
    PATH="$tmp/fakebin:$PATH" CUDA_HOME="$tmp/cuda" NVCC= PYTHONPATH="$tmp/notorch" "$@" bash $gc --out "$tmp/$dir" 2>&1)
  rc=$?
}
# refused NAME DIR LINE [OTHER-PATTERN]: the last gpu_run stopped at its prerequisites with LINE its
# only error line (OTHER-PATTERN: a line that must be there too), FAILED, and started no build
refused() {
  local name=$1 dir=$2 line=$3 why=""
  [ $rc -ne 0 ] || why+="exit status 0; "
  [ "$(grep '^error: ' <<<"$out")" = "$line" ] || why+="expected the one error line '$line', got '$(grep '^error: ' <<<"$out")'; "
  [ -z "${4:-}" ] || grep -q -- "$4" <<<"$out" || why+="no line '$4'; "
  grep -q "^FAIL gpu_check_prerequisites: .*nothing was built" "$tmp/$dir/parts.txt" 2>/dev/null || why+="no FAIL line in parts.txt; "
  grep -q 'Result: FAILED' "$tmp/$dir/report.md" 2>/dev/null || why+="no report.md saying FAILED; "
  { [ -e "$tmp/$dir/build.log" ] || grep -q '^== build' <<<"$out"; } && why+="a build started; "
  if [ -n "$why" ]; then fail "$name" "$why$(tail -n 12 <<<"$out")"; else pass "$name"; fi
}
# passed NAME DIR PATTERN...: the last gpu_run (GPU_CHECK_COSTS=build:100000: no time to build)
# passed its prerequisites, with a line matching each PATTERN, and then stopped, its build not
# started for the time budget
passed() {
  local name=$1 dir=$2 p why=""
  shift 2
  grep -q '^error: ' <<<"$out" && why+="$(grep '^error: ' <<<"$out"); "
  grep -qx 'PASS gpu_check_prerequisites' "$tmp/$dir/parts.txt" 2>/dev/null || why+="no PASS line for the prerequisites; "
  for p in "$@"; do grep -q -- "$p" <<<"$out" || why+="no line '$p'; "; done
  grep -q '^FAIL gpu_check_build: not run: needs ~100000 s' "$tmp/$dir/parts.txt" 2>/dev/null || why+="the build was not the next step; "
  if [ -n "$why" ]; then fail "$name" "$why$(tail -n 12 <<<"$out")"; else pass "$name"; fi
}
nobuild=(GPU_CHECK_COSTS=build:100000 BUILD="$tmp/nobuild")

# A working H200 (and CXX of two words, as CXX="ccache g++": each its own argument, as make has it).
smi "$H200"
gpu_run working "${nobuild[@]}" CXX="env g++"
passed gpu_check_working_gpu working "^GPU: $H200\$" "^nvcc: $tmp/cuda/bin/nvcc (CUDA 13.0)\$" \
  "^CUDA: 1 device(s); device 0: NVIDIA H200 (sm_90)\$"
# A driver without compute_cap (R470): the query falls back to the fields it has; CUDA 11 runs on it.
smi "NVIDIA A100-SXM4-80GB, 81251 MiB, 470.82.01, 8.0"
gpu_run olderfields "${nobuild[@]}" FAKE_CUDA=11.8
passed gpu_check_driver_without_compute_cap olderfields "^GPU: NVIDIA A100-SXM4-80GB, 81251 MiB, 470.82.01\$" \
  "^CUDA: 1 device(s); device 0: NVIDIA A100-SXM4-80GB (sm_80)\$"
# MIG on with two instances, the second chosen by CUDA_VISIBLE_DEVICES: CUDA has a device.
smi "$H200"
gpu_run mig1 "${nobuild[@]}" FAKE_MIG=Enabled FAKE_MIG_INSTANCES=2 CUDA_VISIBLE_DEVICES=1
passed gpu_check_mig_instance mig1 "^CUDA: 1 device(s); device 0: NVIDIA H200 (sm_90)\$"

# A PATH without nvcc (and no CUDA_HOME): one line names it.
nonvcc=""
IFS=: read -ra dirs <<<"$PATH"
for d in "${dirs[@]}"; do [ -x "$d/nvcc" ] || nonvcc+="${nonvcc:+:}$d"; done
gpu_run nonvcc PATH="$tmp/fakebin:$nonvcc" CUDA_HOME=/nonexistent
refused gpu_check_missing_nvcc nonvcc \
  "error: nvcc: not in \$CUDA_HOME/bin (/nonexistent) nor on PATH: install NVIDIA's CUDA toolkit, or set CUDA_HOME"

# No GPU (an nvidia-smi that finds none): a failure, never a pass; nvidia-smi's words are said.
smi -nodev
gpu_run nogpu
refused gpu_check_no_gpu nogpu "error: GPU: nvidia-smi finds no GPU (it says: No devices were found); for a dry run without one: --emulated"

# A wedged GPU (an nvidia-smi that never answers): refused once the probe's time is up.
smi -hang
start=$SECONDS
gpu_run wedged GPU_CHECK_PROBE_S=1
if [ $((SECONDS - start)) -gt 15 ]; then fail gpu_check_wedged_gpu "took $((SECONDS - start)) s with 1 s probes"
else refused gpu_check_wedged_gpu wedged \
  "error: GPU: nvidia-smi did not answer within 1 s: the GPU or its driver is wedged (dmesg says more; nvidia-smi -r or a reboot)"; fi
expect_fail gpu_check_bad_probe_s "^error: GPU_CHECK_PROBE_S must be a positive number of seconds, got '0'" -- \
  env GPU_CHECK_PROBE_S=0 bash $gc --emulated --out "$tmp/probe0"

# A driver older than the toolkit's CUDA needs (CUDA 13: R580): advice, and the CUDA probe decides.
# CUDA 12 runs on R535; so does 13 with cuda-compat's libcuda, from LD_LIBRARY_PATH (its folder
# compat/, or compat/lib as NGC containers lay it out) or registered with ldconfig.
H100_OLD="NVIDIA H100 80GB HBM3, 81559 MiB, 535.104.05, 9.0"
OLD_DRIVER="^driver: 535.104.05, older than the R580 that CUDA 13.0 needs by itself"
insufficient="error: GPU: CUDA's cudaGetDeviceCount fails with cudaErrorInsufficientDriver (35: CUDA driver version is insufficient for CUDA runtime version): the driver 535.104.05 is older than CUDA 13.0's runtime needs (R580), and no cuda-compat libcuda is loaded: update the driver, or install NVIDIA's forward-compatibility package cuda-compat (datacenter GPUs) and put its folder first on LD_LIBRARY_PATH"
smi "$H100_OLD"
gpu_run olddriver
refused gpu_check_old_driver olddriver "$insufficient" "$OLD_DRIVER"
mkdir -p "$tmp/cuda/compat/lib" && touch "$tmp/cuda/compat/lib/libcuda.so.580.65.06" &&
  ln -s libcuda.so.580.65.06 "$tmp/cuda/compat/lib/libcuda.so.1"
gpu_run compatlib_unused
refused gpu_check_old_driver_compat_unused compatlib_unused "$insufficient (here: $tmp/cuda/compat/lib)"
gpu_run compatlib "${nobuild[@]}" LD_LIBRARY_PATH="/nonexistent:$tmp/cuda/compat/lib"
passed gpu_check_driver_compat_lib compatlib "$OLD_DRIVER" "^CUDA: 1 device(s); device 0: NVIDIA H100 80GB HBM3 (sm_90)\$"
gpu_run compatldconfig "${nobuild[@]}" FAKE_LDCONFIG="$tmp/cuda/compat/lib"
passed gpu_check_driver_compat_ldconfig compatldconfig "$OLD_DRIVER" "^CUDA: 1 device(s); device 0: NVIDIA H100 80GB HBM3 (sm_90)\$"
rm -r "$tmp/cuda/compat/lib"
T4_OLD="Tesla T4, 15360 MiB, 535.104.05, 7.5"
T4_LINE="error: GPU: the GPU is sm_75 (Tesla T4); the trainer needs sm_80 or newer (its kernels use TF32 and bf16 tensor-core instructions)"
smi "$T4_OLD"
gpu_run cuda12 FAKE_CUDA=12.4
refused gpu_check_driver_cuda12 cuda12 "$T4_LINE"
# cuda-compat's folder as NVIDIA's package lays it out: libcuda.so.1 a link to libcuda.so.VERSION
mkdir -p "$tmp/cuda/compat" && touch "$tmp/cuda/compat/libcuda.so.580.65.06" && ln -s libcuda.so.580.65.06 "$tmp/cuda/compat/libcuda.so.1"
gpu_run compat LD_LIBRARY_PATH="$tmp/cuda/compat"
refused gpu_check_driver_compat compat "$T4_LINE" "$OLD_DRIVER"

# A GPU below sm_80 (a T4 with a new driver).
smi "Tesla T4, 15360 MiB, 580.65.06, 7.5"
gpu_run sm75
refused gpu_check_old_gpu sm75 "$T4_LINE"

# GPUs nvidia-smi lists but CUDA cannot open, refused by the CUDA probe before the build: an
# NVSwitch machine whose fabric manager is down (802); cuda-compat's libcuda (of R580) left on
# LD_LIBRARY_PATH over a newer driver (803); MIG on without an instance; CUDA_VISIBLE_DEVICES
# naming no GPU; CUDA's first call never returning; no runtime header to build the probe with.
smi "$H200"
cuda_line() { echo "error: GPU: CUDA's cudaGetDeviceCount fails with $1"; }
gpu_run fabric FAKE_FABRIC_MANAGER=stopped
refused gpu_check_cuda_fabric_manager fabric "$(cuda_line "cudaErrorSystemNotReady (802: system not yet initialized): on an NVSwitch machine (HGX, DGX) NVIDIA's fabric manager must run before CUDA can use the GPUs: sudo systemctl start nvidia-fabricmanager (at the driver's version, 580.65.06; systemctl status nvidia-fabricmanager says why it stopped)")"
smi "NVIDIA H200, 143771 MiB, 590.48.01, 9.0"
gpu_run compat803 LD_LIBRARY_PATH="$tmp/cuda/compat"
refused gpu_check_cuda_compat_mismatch compat803 "$(cuda_line "cudaErrorSystemDriverMismatch (803: system has unsupported display driver / cuda driver combination): the libcuda.so.1 of $tmp/cuda/compat (cuda-compat's, first on LD_LIBRARY_PATH) does not fit the driver 590.48.01, which runs CUDA 13.0 by itself: take $tmp/cuda/compat off LD_LIBRARY_PATH")"
rm -r "$tmp/cuda/compat"
smi "$H200"
gpu_run mig0 FAKE_MIG=Enabled
refused gpu_check_cuda_mig_without_instance mig0 "$(cuda_line "cudaErrorNoDevice (100: no CUDA-capable device is detected): MIG mode is on and CUDA finds no MIG instance: create one (sudo nvidia-smi mig -cgi PROFILE -C; nvidia-smi mig -lgip lists the profiles), or turn MIG off (sudo nvidia-smi -mig 0, then a GPU reset)")"
# (a scheduler's CUDA_VISIBLE_DEVICES beside it: still MIG's line)
gpu_run mig0cvd FAKE_MIG=Enabled CUDA_VISIBLE_DEVICES=0
refused gpu_check_cuda_mig_without_instance_cvd mig0cvd "$(cuda_line "cudaErrorNoDevice (100: no CUDA-capable device is detected): MIG mode is on and CUDA finds no MIG instance in CUDA_VISIBLE_DEVICES='0' (nvidia-smi -L lists their UUIDs): create one (sudo nvidia-smi mig -cgi PROFILE -C; nvidia-smi mig -lgip lists the profiles), or turn MIG off (sudo nvidia-smi -mig 0, then a GPU reset)")"
gpu_run cvd CUDA_VISIBLE_DEVICES=1
refused gpu_check_cuda_visible_devices cvd "$(cuda_line "cudaErrorNoDevice (100: no CUDA-capable device is detected): CUDA_VISIBLE_DEVICES='1' names none of the GPUs (nvidia-smi lists 1: their indices from 0, or their UUIDs, nvidia-smi -L): name one, or unset it")"
start=$SECONDS
gpu_run cudahang FAKE_CUDA_HANG=1 GPU_CHECK_PROBE_S=3
if [ $((SECONDS - start)) -gt 30 ]; then fail gpu_check_cuda_wedged "took $((SECONDS - start)) s with 3 s probes"
else refused gpu_check_cuda_wedged cudahang \
  "error: GPU: CUDA's first call did not return within 6 s: the GPU or its driver is wedged (dmesg says more; nvidia-smi -r or a reboot)"; fi
mv "$tmp/cuda/include/cuda_runtime_api.h" "$tmp/"
gpu_run noruntime
refused gpu_check_cuda_no_runtime_header noruntime "error: CUDA runtime: no program builds with g++ against $tmp/cuda's runtime (cuda_runtime_api.h, libcudart.so): cuda_runtime_api.h: No such file or directory"
mv "$tmp/cuda_runtime_api.h" "$tmp/cuda/include/"

# Missing headers: nlohmann/json (a compiler that finds no such header), cuBLAS, and NCCL's
# library where its header is (an mpicc that shows MPI's flags and NCCL_HOME with nccl.h only:
# the Makefile then links -lnccl).
smi "$H200"
printf '#!/bin/sh\nfor a; do case $a in *.cpp) ! grep -q nlohmann "$a" || exit 1 ;; esac; done\nexec g++ "$@"\n' >"$tmp/nojson-cxx"
chmod +x "$tmp/nojson-cxx"
gpu_run nojson CXX="$tmp/nojson-cxx"
refused gpu_check_missing_json nojson "error: nlohmann/json: no <nlohmann/json.hpp> (Debian's nlohmann-json3-dev) here nor in .gpu_deps/include: run scripts/prepare_gpu_deps.sh (it fetches the header without root)"
mv "$tmp/cuda/include/cublas_v2.h" "$tmp/cublas_v2.h"
gpu_run nocublas
refused gpu_check_missing_cublas nocublas "error: cuBLAS: no cublas_v2.h and libcublas.so under $tmp/cuda: they come with NVIDIA's CUDA toolkit (the libcublas-dev-* package of its apt repository)"
mv "$tmp/cublas_v2.h" "$tmp/cuda/include/"
printf 'int main() { return 0; }\n' >"$tmp/main.cpp"
if g++ "$tmp/main.cpp" -o "$tmp/main" -lnccl 2>/dev/null; then
  skip gpu_check_missing_nccl_lib "this machine's system folders have libnccl"
else
  # an mpicc answers -show alone (what the script and the Makefile ask); it compiles nothing
  printf '#!/bin/sh\n[ $# = 1 ] && [ "$1" = -show ] || { echo "fake mpicc: compiles nothing (arguments: $*)" >&2; exit 1; }\necho "gcc -I/mpi -lmpi"\n' >"$tmp/fakebin/mpicc"
  chmod +x "$tmp/fakebin/mpicc"
  mkdir -p "$tmp/ncclhome/include" && touch "$tmp/ncclhome/include/nccl.h"
  gpu_run nonccl NCCL_HOME="$tmp/ncclhome"
  refused gpu_check_missing_nccl_lib nonccl "error: NCCL: $tmp/ncclhome/include/nccl.h is there, so the build links -lnccl, but no libnccl.so links from $tmp/cuda/lib64, $tmp/ncclhome/lib or the system's folders: install NCCL's library (libnccl2 and libnccl-dev) beside its header"
  rm "$tmp/fakebin/mpicc"
fi

# The data-parallel part runs only on a trainer that links NCCL (here a program linking a stub
# libnccl.so.2), else it is SKIPPED with the reason.
eval "$(grep '^nccl_linked()' $gc)"
mkdir -p "$tmp/nccl"
printf 'int ncclGetVersion(int* v) { *v = 0; return 0; }\n' >"$tmp/nccl/stub.c"
printf 'int ncclGetVersion(int*);\nint main() { int v; return ncclGetVersion(&v); }\n' >"$tmp/nccl/main.c"
if ! gcc -shared -fPIC -Wl,-soname,libnccl.so.2 "$tmp/nccl/stub.c" -o "$tmp/nccl/libnccl.so.2" ||
  ! gcc "$tmp/nccl/main.c" "$tmp/nccl/libnccl.so.2" -Wl,-rpath,"$tmp/nccl" -o "$tmp/nccl/with"; then
  fail gpu_check_dist_needs_nccl "could not build the stub programs"
elif ! nccl_linked "$tmp/nccl/with"; then fail gpu_check_dist_needs_nccl "a program linking libnccl.so.2 is not seen as one"
elif nccl_linked "$tmp/main"; then fail gpu_check_dist_needs_nccl "a program without NCCL is seen as linking it"
elif ! grep -q 'part nccl skip "$BUILD/train is built without NCCL' $gc; then fail gpu_check_dist_needs_nccl "part_dist does not skip without NCCL"
else pass gpu_check_dist_needs_nccl; fi

# racecheck's kernel filter names every kernel of cuda/ (a kernel named otherwise would go
# unchecked), and the tests it leaves out are in the sanitizer's list.
eval "$(grep '^our_kernels()' $gc)"
eval "$(grep '^SAN_NO_RACE=' $gc)"
names=$(our_kernels | tr '|' '\n')
n=$(cat cuda/*.cu cuda/*.cuh | grep -c '^__global__')
why=""
[ "$(wc -l <<<"$names")" = "$n" ] || why+="$(wc -l <<<"$names") names for the $n kernels: $(our_kernels); "
for k in adamw_kernel flash_forward_mma_kernel column_sums_kernel; do grep -qx $k <<<"$names" || why+="no $k; "; done
eval "$(sed -n '/^SAN_SUBSET="/,/"$/p' $gc)"
for t in $SAN_NO_RACE; do tr -s ' \n' '\n\n' <<<"$SAN_SUBSET" | grep -qx "$t" || why+="$t is not in SAN_SUBSET; "; done
if [ -n "$why" ]; then fail gpu_check_racecheck_filter "$why"; else pass gpu_check_racecheck_filter; fi

# scripts/prepare_gpu_deps.sh: the header from the system's folder, from Debian's package
# unpacked (a fake apt-get that downloads a .deb built here), and one error line when nothing
# works (no such folder, apt-get and the download failing, a download whose sha256 is wrong).
# The fake apt-get and curl answer only the script's own calls, each option its own argument,
# and refuse any other as the real ones do.
pg=scripts/prepare_gpu_deps.sh
url=https://github.com/nlohmann/json/releases/download/v3.11.3/json.hpp
mkdir -p "$tmp/sys/nlohmann" "$tmp/depsbin"
# apt_fake BODY: an apt-get that runs BODY for `apt-get download nlohmann-json3-dev`
apt_fake() {
  printf '#!/bin/sh\n[ $# = 2 ] && [ "$1" = download ] && [ "$2" = nlohmann-json3-dev ] || { echo "E: Invalid operation $1"; exit 100; }\n%s\n' \
    "$1" >"$tmp/depsbin/apt-get"
  chmod +x "$tmp/depsbin/apt-get"
}
# curl_fake BODY: a curl that runs BODY (the file to write: $5) for `curl -fsSL --max-time 120 -o FILE URL`
curl_fake() {
  printf '#!/bin/sh\n[ $# = 6 ] && [ "$1" = -fsSL ] && [ "$2" = --max-time ] && [ "$3" = 120 ] && [ "$4" = -o ] && [ "$6" = %s ] ||
  { echo "curl: (2) fake curl: not the call modelled: $*" >&2; exit 2; }\n%s\n' "$url" "$1" >"$tmp/depsbin/curl"
  chmod +x "$tmp/depsbin/curl"
}
echo '// json' >"$tmp/sys/nlohmann/json.hpp"
out=$(SYSTEM_INCLUDE="$tmp/sys" bash $pg "$tmp/deps1" 2>&1)
if [ $? = 0 ] && cmp -s "$tmp/sys/nlohmann/json.hpp" "$tmp/deps1/include/nlohmann/json.hpp"; then pass gpu_deps_system
else fail gpu_deps_system "$out"; fi
if ! command -v dpkg-deb >/dev/null; then
  skip gpu_deps_apt_download "no dpkg-deb"
else
  mkdir -p "$tmp/debroot/DEBIAN" "$tmp/debroot/usr/include/nlohmann"
  printf 'Package: nlohmann-json3-dev\nVersion: 1\nArchitecture: all\nMaintainer: t <t@t>\nDescription: t\n' >"$tmp/debroot/DEBIAN/control"
  echo '// json from the deb' >"$tmp/debroot/usr/include/nlohmann/json.hpp"
  dpkg-deb --build "$tmp/debroot" "$tmp/nlohmann-json3-dev_1_all.deb" >/dev/null
  apt_fake "cp $tmp/nlohmann-json3-dev_1_all.deb ."
  out=$(PATH="$tmp/depsbin:$PATH" SYSTEM_INCLUDE=/nonexistent bash $pg "$tmp/deps2" 2>&1)
  if [ $? = 0 ] && grep -q "from Debian's nlohmann-json3-dev, unpacked" <<<"$out" &&
    grep -q 'json from the deb' "$tmp/deps2/include/nlohmann/json.hpp" 2>/dev/null; then pass gpu_deps_apt_download
  else fail gpu_deps_apt_download "$out"; fi
fi
apt_fake 'echo "E: Unable to locate package $2"; exit 100'
curl_fake 'echo "curl: (6) Could not resolve host: github.com" >&2; exit 6'
why=""
"$tmp/depsbin/apt-get" download "nlohmann-json3-dev " >/dev/null 2>&1
[ $? = 100 ] && grep -q 'Invalid operation' <("$tmp/depsbin/apt-get" install x) || why+="the fake apt-get takes other calls; "
"$tmp/depsbin/curl" -fsSL --max-time 120 "$url" >/dev/null 2>&1
[ $? = 2 ] || why+="the fake curl takes other calls; "
if [ -n "$why" ]; then fail gpu_deps_fakes_strict "$why"; else pass gpu_deps_fakes_strict; fi
expect_only_error gpu_deps_none_works "^error: no nlohmann/json header for $tmp/deps3/include: not in /nonexistent/nlohmann; apt-get download nlohmann-json3-dev failed: E: Unable to locate package nlohmann-json3-dev; the download of $url failed \(curl: \(6\) Could not resolve host: github.com\) \(install" -- \
  env PATH="$tmp/depsbin:$PATH" SYSTEM_INCLUDE=/nonexistent bash $pg "$tmp/deps3"
[ -e "$tmp/deps3" ] && fail gpu_deps_none_works_nothing_left "$tmp/deps3 was left behind"
curl_fake 'echo "not json" >"$5"'
expect_only_error gpu_deps_bad_checksum "the downloaded json.hpp's sha256 is not v3.11.3's 9bea4c8066ef4a1c206b2be5a36302f8926f7fdc6087af5d20b417d0cf103ea6 \(install" -- \
  env PATH="$tmp/depsbin:$PATH" SYSTEM_INCLUDE=/nonexistent bash $pg "$tmp/deps4"

# The dry runs on the CPU execution layer (a minute: the full tier's, make test-all).
if ! grep -qs '^emu:' Makefile test/cuda_emu/emu.mk; then
  skip gpu_check_emulated "the Makefile has no emu target (the CPU execution layer)"
elif [ "${TEST_ALL:-0}" != 1 ]; then
  skip gpu_check_emulated "the dry runs on the CPU execution layer run in the full tier (TEST_ALL=1, make test-all)"
else
  # the emulated build is make test's (a no-op then); built here when this test runs alone
  make --no-print-directory -j2 BUILD="${BUILD:-build}" ${EMU_BUILD:+EMU_BUILD="$EMU_BUILD"} emu lab-emu >"$tmp/build.log" 2>&1 ||
    echo "# make emu failed: $(tail -n 3 "$tmp/build.log")"

  # 1. A plan in which the head sweep does not fit (GPU_CHECK_COSTS): it fails for the time budget,
  # said so; every other part runs and writes its results and its measured cost.
  a="$tmp/first"
  out=$(GPU_CHECK_COSTS="head:100000" bash $gc --emulated --budget 300 --out "$a" 2>&1)
  rc=$?
  why=""
  [ $rc -ne 0 ] || why+="exit status 0 with a part cut; "
  grep -q '^FAIL gpu_check_head: not run: needs ~100000 s (GPU_CHECK_COSTS), [0-9]* s of the 300 s budget left (time budget)$' \
    "$a/parts.txt" 2>/dev/null || why+="no FAIL line for the head sweep's time budget; "
  [ "$(grep -c '^FAIL ' "$a/parts.txt" 2>/dev/null)" = 1 ] || why+="other parts failed: $(grep '^FAIL ' "$a/parts.txt" | head -n 3); "
  for p in build tests paper gpt2 profile rest lab; do
    grep -q "^$p	[0-9]*	complete$" "$a/costs.tsv" 2>/dev/null || why+="no measured cost for $p; "
  done
  grep -q '^  paper *15 s  (estimate)$' <<<"$out" || why+="the plan does not show the estimates; "
  [ -s "$a/head.md" ] && why+="the head sweep ran; "
  grep -q 'Result: FAILED' "$a/report.md" 2>/dev/null || why+="no report.md saying FAILED; "
  if [ -n "$why" ]; then fail gpu_check_plan_cut "$why$(tail -n 20 <<<"$out")"; else pass gpu_check_plan_cut; fi

  # 2. --skip-done: the second run does only the head sweep (the rest SKIPPED, done in the first,
  # its rows copied), plans with the first run's measured costs, and its report is whole.
  o="$tmp/emu"
  start=$SECONDS
  out=$(bash $gc --emulated --budget 300 --skip-done "$a" --out "$o" 2>&1)
  rc=$?
  why=""
  [ $rc -eq 0 ] || why="exit status $rc; "
  for f in gpu_check.log bench.md phases.md head.md report.md; do [ -s "$o/$f" ] || why+="no $f; "; done
  grep -q "^SKIPPED gpu_check_tests: done in $a\$" "$o/parts.txt" 2>/dev/null || why+="the tests were not skipped as done; "
  grep -q "^SKIPPED gpu_check_bench_paper_rope_bf16_graph: done in $a\$" "$o/parts.txt" 2>/dev/null ||
    why+="a benchmark row was not skipped as done; "
  grep -q '^PASS gpu_check_head_bf16_chunk16$' "$o/parts.txt" 2>/dev/null || why+="the head sweep did not run; "
  [ "$(grep -c '^PASS gpu_check_bench_' "$o/parts.txt")" = 0 ] || why+="a benchmark row ran again; "
  grep -q "^  paper *[0-9]* s  (measured in $a)\$" <<<"$out" || why+="the plan does not use the measured costs; "
  [ -s "$o/test_cuda.log" ] && why+="the GPU tests ran again; "
  rows=$(grep -c '^| emulated tiny .* | [0-9.]* | ' "$o/bench.md" 2>/dev/null)
  [ "${rows:-0}" -ge 12 ] || why+="$rows benchmark rows with timings, expected at least 12 (copied); "
  grep -q '| FAIL\|not run' "$o/bench.md" 2>/dev/null && why+="a failed or skipped benchmark row; "
  for mode in graph eager profile; do
    grep -q "^| emulated tiny .* | rope | bf16 | $mode | [0-9.]* | " "$o/bench.md" 2>/dev/null ||
      why+="no bf16 rope row with the $mode step in bench.md; "
  done
  grep -q 'tokens: Zipf-like' "$o/bench.md" 2>/dev/null || why+="bench.md does not say where its tokens come from; "
  grep -q '^| paper_rope_fp32_profile | [0-9.]* | [0-9.]* | [0-9.]* | [0-9.]* |' "$o/phases.md" 2>/dev/null ||
    why+="no per-phase row for paper_rope_fp32 in phases.md; "
  for h in "fused | bf16" "chunk 4096 | bf16" "chunk 16 | bf16" "tile 128 | bf16" "fused | fp32" "chunk 4096 | fp32" \
    "tile 128 | fp32"; do
    grep -q "^| $h | [0-9.]* | [0-9,]* | [0-9.]* | [0-9.]* | [0-9]* | " "$o/head.md" 2>/dev/null ||
      why+="no head sweep row '$h' with ms, TFLOP/s and GB/s; "
  done
  grep -q '^| fused | bf16 .* | the default (--classifier auto) |$' "$o/head.md" || why+="the default head is not marked; "
  grep -q "^| chunk 4096 | bf16 .* | the logits head's default (cuda/backend_cuda.h) |\$" "$o/head.md" ||
    why+="the logits head's default is not marked; "
  grep -q '^Fastest head: none (emulated' "$o/head.md" || why+="head.md names a fastest head from emulated timings; "
  grep -q '^| paper setting, rope, bf16, fastest LM head of the sweep | 5,500,000 | - | - |' "$o/report.md" 2>/dev/null ||
    why+="report.md has no goal row for the sweep's fastest (or it claims one emulated); "
  grep -q '^| GPT-2 124M, rope, bf16 | 550,000 | - | - |' "$o/report.md" 2>/dev/null ||
    why+="report.md has no goals table (or it claims a measurement the emulated run cannot make); "
  grep -q 'not meaningful' "$o/bench.md" 2>/dev/null || why+="bench.md does not say the timings are not meaningful; "
  grep -q '^# GPU check: EMULATED' "$o/report.md" 2>/dev/null || why+="report.md does not say EMULATED; "
  grep -q 'every required part passed' "$o/report.md" 2>/dev/null || why+="report.md does not say every part passed; "
  if [ -n "$why" ]; then fail gpu_check_skip_done "$why$(tail -n 30 <<<"$out")"
  else pass gpu_check_skip_done; echo "# the second emulated dry run: $((SECONDS - start)) s"; fi

  # --skip: the parts named are reported SKIPPED (not failed) and not run; the rest runs
  out=$(bash $gc --emulated --skip tests,sanitizer,dist,paper,gpt2 --skip profile,head,rest,torch,lab --out "$tmp/skip" 2>&1)
  rc=$?
  why=""
  [ $rc -eq 0 ] || why+="exit status $rc; "
  for p in tests paper gpt2 profile head sanitizer dist rest torch lab; do
    grep -q "^SKIPPED gpu_check_$p: --skip $p" "$tmp/skip/parts.txt" 2>/dev/null || why+="no SKIPPED line for $p; "
  done
  [ -s "$tmp/skip/bench.md" ] && why+="a benchmark row ran; "
  [ -s "$tmp/skip/test_cuda.log" ] && why+="the GPU tests ran; "
  if [ -n "$why" ]; then fail gpu_check_skip "$why$(tail -n 20 <<<"$out")"; else pass gpu_check_skip; fi

  # A test program past its own limit (no work: 1 s; all of test_cuda's checks, some 20 s
  # emulated): the part fails naming it.
  out=$(GPU_CHECK_COSTS="test_cuda:0" GPU_CHECK_EMU_TESTS="" bash $gc --emulated --skip paper,gpt2,profile,head,sanitizer,dist,rest,torch,lab \
    --out "$tmp/testlimit" 2>&1)
  if grep -q '^FAIL gpu_check_tests: .*; test_cuda ran out of its 1 s$' "$tmp/testlimit/parts.txt" 2>/dev/null &&
    grep -q '^test_cuda: [0-9]* s of its 1 s$' "$tmp/testlimit/test_cuda.log"; then pass gpu_check_test_limit
  else fail gpu_check_test_limit "$(cat "$tmp/testlimit/parts.txt" 2>/dev/null) $(tail -n 8 <<<"$out")"; fi

  # A budget too short for the whole check: the parts it cut off are failures, said so, and
  # the report is still written.
  out=$(bash $gc --emulated --budget 12 --out "$tmp/short" 2>&1)
  rc=$?
  if [ $rc -eq 0 ]; then fail gpu_check_budget "exit status 0 with a 12 s budget"
  elif ! grep -q '^FAIL .*time budget' "$tmp/short/parts.txt" 2>/dev/null; then
    fail gpu_check_budget "no part failed for the time budget: $(tail -n 20 <<<"$out")"
  elif ! grep -q 'Result: FAILED' "$tmp/short/report.md" 2>/dev/null; then fail gpu_check_budget "no report.md saying FAILED"
  else pass gpu_check_budget; fi

  # Killed part way (SIGTERM, as a GPU slot's end does): what it measured is kept, the report written.
  # The signal goes once the first benchmark row is in (timeout passes it on to the whole process
  # group), not at a fixed time: how long the emulated check takes depends on the machine's load.
  timeout -s TERM 300 bash $gc --emulated --skip tests --out "$tmp/killed" >"$tmp/killed.log" 2>&1 &
  tpid=$!
  for _ in $(seq 1200); do
    grep -q '^PASS gpu_check_bench_' "$tmp/killed/parts.txt" 2>/dev/null && break
    kill -0 $tpid 2>/dev/null || break
    sleep 0.1
  done
  kill -TERM $tpid 2>/dev/null
  wait $tpid
  why=""
  grep -q 'gpu_check: interrupted' "$tmp/killed/gpu_check.log" || why+="not interrupted; "
  grep -q '^PASS gpu_check_bench_' "$tmp/killed/parts.txt" 2>/dev/null || why+="no finished row in parts.txt; "
  grep -q '^| emulated tiny .* | [0-9.]* | ' "$tmp/killed/report.md" 2>/dev/null || why+="the report lacks the rows measured; "
  grep -q 'Result: FAILED' "$tmp/killed/report.md" 2>/dev/null || why+="the report does not say FAILED; "
  if [ -n "$why" ]; then fail gpu_check_killed "$why$(tail -n 10 "$tmp/killed.log")"; else pass gpu_check_killed; fi

  # The benchmark's tokens from a prepared shard (DATA/NAME/NAME_train_*.bin, ids below V): used,
  # and said so. In the same run two training runs fail (a stdbuf first on PATH that makes the
  # crope fp32 run exit 3 after its steps): its row fails, and its output stays in failed/<run>/.
  mkdir -p "$tmp/data/wikitext2"
  "$PYTHON" - "$tmp/data/wikitext2/wikitext2_train_000000.bin" <<'PY'
import struct, sys
from array import array
n = 20000
toks = array("H", (i * 7 % 500 for i in range(n)))
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)) + toks.tobytes())
PY
  # (and the crope bf16 run's losses made flat, as a broken path that trains nothing would log)
  mkdir -p "$tmp/failbin"
  cat >"$tmp/failbin/stdbuf" <<EOF
#!/bin/sh
case "\$*" in
  *run_paper_crope_fp32_graph*) $(command -v stdbuf) "\$@"; echo "error: injected failure"; exit 3 ;;
  *run_paper_crope_bf16_graph*)
    $(command -v stdbuf) "\$@" || exit
    for a; do d=\$a; done  # the last argument: the run folder
    sed -i 's/"loss": *[0-9.e+-]*/"loss":6.0/' "\$d/log.jsonl"; exit 0 ;;
esac
exec $(command -v stdbuf) "\$@"
EOF
  chmod +x "$tmp/failbin/stdbuf"
  out=$(PATH="$tmp/failbin:$PATH" DATA=$tmp/data bash $gc --emulated --skip tests,gpt2,profile,head,sanitizer,dist,rest,torch,lab \
    --out "$tmp/shard" 2>&1)
  rc=$?
  if grep -q "tokens: a prepared shard of real text, $tmp/data/wikitext2/wikitext2_train_000000.bin;" "$tmp/shard/bench.md" &&
      grep -q '^| emulated tiny .* | rope | bf16 | graph | [0-9.]* | ' "$tmp/shard/bench.md"; then
    pass gpu_check_prepared_shard
  else fail gpu_check_prepared_shard "$(head -n 2 "$tmp/shard/bench.md" 2>/dev/null) $(tail -n 5 <<<"$out")"; fi
  kept="$tmp/shard/failed/paper_crope_fp32_graph"
  why=""
  [ $rc -ne 0 ] || why+="exit status 0 with a failed run; "
  [ "$(grep '^FAIL ' "$tmp/shard/parts.txt" 2>/dev/null)" = "FAIL gpu_check_bench_paper_crope_bf16_graph: the loss did not fall: 6.0000 at the first step, 6.0000 at the last (ln V = 6.2383) (output in failed/paper_crope_bf16_graph/)
FAIL gpu_check_bench_paper_crope_fp32_graph: exit 3: error: injected failure (output in failed/paper_crope_fp32_graph/)" ] ||
    why+="FAIL lines: $(grep '^FAIL ' "$tmp/shard/parts.txt" 2>/dev/null); "
  grep -q '^[0-9.]* error: injected failure$' "$kept/train.out" 2>/dev/null || why+="no train.out with the run's output; "
  grep -q '"type": *"train"' "$kept/log.jsonl" 2>/dev/null || why+="no log.jsonl of the run; "
  [ -e "$tmp/shard/failed/paper_rope_fp32_graph" ] && why+="a run that passed was kept as failed; "
  if [ -n "$why" ]; then fail gpu_check_failed_run_kept "$why$(tail -n 5 <<<"$out")"; else pass gpu_check_failed_run_kept; fi
fi
finish
