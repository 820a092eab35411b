#!/usr/bin/env bash
# The one call to make on a GPU machine; everything in one run within a time budget, and
# nothing lost if the run is cut short (results are written as they come):
#   1. prerequisites, one line each (make, g++, nvcc, cuBLAS, nlohmann/json, python3, a GPU,
#      compute-sanitizer, PyTorch); never apt (such a machine has no network)
#   2. build (only the trainer and the GPU test programs; the Debian package step is skipped)
#   3. the GPU tests (every build/test/test_cuda*), bf16 included   -> OUT/test_cuda.log
#   3a. compute-sanitizer memcheck and racecheck over a short subset of the GPU tests
#   3b. data parallel: the NCCL path on 1 rank (and 2/4/8 with that many GPUs) -> OUT/dist.log
#   4. benchmark rows: learned/rope/crope at the CRoPE paper's setting (V=50257 C=128 L=4 H=4
#      B=16 T=1024) and at GPT-2 124M (C=768 L=12 H=12), fp32 (TF32) and bf16, the step
#      as one CUDA graph: ms/step, tokens/s, peak memory, evaluation ms per batch and the
#      projected 10k-step wall time with and without the paper config's evaluation (20 batches
#      every 20 steps); rope again eagerly and profiled (per-phase table)   -> OUT/bench.md
#   5. PyTorch (scripts/torch_reference.py) at the paper's setting, optional and bounded:
#      torch.compile only while 2 minutes are left                   -> OUT/torch.md
#   5b. tuning: a sweep of the classifier's vocabulary tiles and row chunks -> OUT/bench.md
#   5c. the kernel lab: every version of every test/lab/ program checked against the CPU and
#      timed (TFLOP/s or GB/s) at the paper's and 124M's shapes              -> OUT/lab.md
#   (--paper-grid: as many of the paper's nine runs as the time left allows, in bf16 unless
#   --grid-precision fp32; its precision's GPU tests first, falling back to fp32, then to plain
#   fp32 without TF32, when they fail)
#   6. the report, with the goals table                              -> OUT/report.md
# Every part prints PASS / FAIL / SKIPPED gpu_check_<part>; the exit status is 0 only if every
# required part passed. No GPU is a failure. --emulated accepts the CPU execution layer
# (test/cuda_emu, `make emu`) as the device, for a dry run of this script at tiny sizes.
set -u

usage() {
  cat <<'EOF'
usage: scripts/gpu_check.sh [--out DIR] [--budget SECONDS] [--emulated] [--paper-grid]
                            [--grid-precision fp32|bf16] [--skip PARTS]
  --out DIR         results folder (default build_gpu/gpu_check; build_emu/gpu_check with
                    --emulated): gpu_check.log, test_cuda.log, bench.md, report.md, ...
  --budget SECONDS  keep the whole check within this time (default 420); optional parts
                    are skipped when time runs short
  --emulated        dry run on the CPU execution layer (no GPU): builds with `make emu`,
                    tiny sizes, timings not meaningful
  --paper-grid      at the end, as many of the paper's nine runs (scripts/paper_grid.sh) as the
                    time left allows, skipping those committed under scripts/results/paper/;
                    each finished run's log in OUT/paper_grid/ (the shards are checked first)
  --grid-precision P  the paper grid's precision: bf16 (default: the precision of the
                    30-second goal, so more runs fit) or fp32 (TF32 GEMMs and attention)
  --skip PARTS      comma-separated parts not to run, each reported SKIPPED: tests, sanitizer,
                    dist, bench, torch, chunks, lab (a second, targeted run after a full one:
                    e.g. --skip tests,sanitizer,dist,bench to spend its time on the rest)
  -h, --help        this text
EOF
}

OUT="" BUDGET=420 EMU=0 GRID=0 GRID_PREC=bf16 SKIP=","
PARTS=",tests,sanitizer,dist,bench,torch,chunks,lab,"
while [ $# -gt 0 ]; do
  case $1 in
    --out) [ $# -ge 2 ] || { echo "error: --out needs a folder" >&2; exit 2; }; OUT=$2; shift 2 ;;
    --out=*) OUT=${1#--out=}; shift ;;
    --budget) [ $# -ge 2 ] || { echo "error: --budget needs a number of seconds" >&2; exit 2; }; BUDGET=$2; shift 2 ;;
    --budget=*) BUDGET=${1#--budget=}; shift ;;
    --emulated) EMU=1; shift ;;
    --paper-grid) GRID=1; shift ;;
    --grid-precision) [ $# -ge 2 ] || { echo "error: --grid-precision needs fp32 or bf16" >&2; exit 2; }; GRID_PREC=$2; shift 2 ;;
    --grid-precision=*) GRID_PREC=${1#--grid-precision=}; shift ;;
    --skip) [ $# -ge 2 ] || { echo "error: --skip needs a list of parts" >&2; exit 2; }; SKIP+="$2,"; shift 2 ;;
    --skip=*) SKIP+="${1#--skip=},"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for p in ${SKIP//,/ }; do
  [[ $PARTS == *",$p,"* ]] || { echo "error: --skip: no part '$p' (parts: ${PARTS:1:-1})" >&2; exit 2; }
done
skipping() { [[ $SKIP == *",$1,"* ]]; }
[[ $GRID_PREC == fp32 || $GRID_PREC == bf16 ]] || { echo "error: --grid-precision must be fp32 or bf16, got '$GRID_PREC'" >&2; exit 2; }
[[ $BUDGET =~ ^[0-9]+$ ]] && [ "$BUDGET" -gt 0 ] || { echo "error: --budget must be a positive number of seconds, got '$BUDGET'" >&2; exit 2; }
# Output folders: build_gpu/ on a GPU; emulated, the Makefile's emu folder (BUILD_emu, or EMU_BUILD
# as make test sets it). Both follow BUILD when it is set.
if [ $EMU = 1 ]; then BASE=${BUILD:-build}; BUILD=${EMU_BUILD:-${BASE}_emu}; else BUILD=${BUILD:-build_gpu}; fi
[ -n "$OUT" ] || OUT="$(cd "$(dirname "$0")/.." && pwd)/$BUILD/gpu_check"
mkdir -p "$OUT" || { echo "error: cannot create the results folder '$OUT'" >&2; exit 2; }
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.." || exit 1
rm -f "$OUT"/{gpu_check.log,parts.txt,build.log,test_cuda.log,memcheck.log,racecheck.log,bench.md,torch.md,lab.md,report.md}
exec > >(tee -a "$OUT/gpu_check.log") 2>&1  # everything printed is also kept, line by line

T0=$SECONDS
left() { echo $((BUDGET - (SECONDS - T0))); }
# cap N: a timeout of at most N seconds that still leaves 10 s for the report
cap() { local l=$(($(left) - 10)); echo $((l < $1 ? (l > 1 ? l : 1) : $1)); }
section() { echo; echo "== $1 ($((SECONDS - T0)) s of $BUDGET)"; }

STATUS=0
# part NAME pass|fail|skip [WHY]: one protocol line, kept in parts.txt for the report
part() {
  local line
  case $2 in
    pass) line="PASS gpu_check_$1" ;;
    fail) line="FAIL gpu_check_$1: $3"; STATUS=1 ;;
    skip) line="SKIPPED gpu_check_$1: $3" ;;
  esac
  echo "$line"
  echo "$line" >>"$OUT/parts.txt"
}

MODE="GPU"
[ $EMU = 1 ] && MODE="EMULATED (CPU execution layer test/cuda_emu, no GPU; timings not meaningful)"
DEVICE="unknown"
TEST_SUMMARY="not run"

# The speed goals, from the rows of bench.md and torch.md that exist: the paper setting at 5.5M
# tokens/s (10k steps in 30 s; with the trainer's default classifier, and with the classifier
# sweep's fastest) and GPT-2 124M at 550K tokens/s, both bf16 with the graph; the
# paper setting's fp32 (TF32) graph step against PyTorch's (TF32) eager (3x) and torch.compile (1.5x).
goals() {
  "${PY:-python3}" - "$OUT/bench.md" "$OUT/torch.md" <<'EOF'
import sys
def rows(path, ncols):
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return []
    out = []
    for l in lines:
        c = [x.strip() for x in l.strip().strip("|").split("|")]
        if len(c) == ncols and c[0] not in ("setting", "mode") and not c[0].startswith("---"):
            out.append(c)
    return out
def tps(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return None
bench, torch = rows(sys.argv[1], 11), rows(sys.argv[2], 5)
def ours(prefix, pos, prec):
    return next((tps(r[5]) for r in bench if r[0].startswith(prefix) and "," not in r[0] and r[1:4] == [pos, prec, "graph"]), None)
print("Goals (tokens/s or speed-up against the target; - = not measured in this run):")
print()
print("| goal | target | measured | met |")
print("| --- | ---: | ---: | --- |")
def line(goal, target, got, fmt):
    met = "-" if got is None else ("yes" if got >= target else "no")
    print("| %s | %s | %s | %s |" % (goal, fmt(target), "-" if got is None else fmt(got), met))
num = lambda x: f"{x:,.0f}"
ratio = lambda x: f"{x:.2f}x"
for pos in ("rope", "crope"):
    line(f"paper setting, {pos}, bf16 (10k steps in 30 s)", 5.5e6, ours("paper", pos, "bf16"), num)
# the classifier sweep's fastest head (vocabulary tiles or row chunks) at the paper setting
swept = [(tps(r[5]), r[0].split(", ", 1)[1]) for r in bench if r[0].startswith("paper") and ", classifier_" in r[0]
         and r[1:4] == ["rope", "bf16", "graph"] and tps(r[5])]
got, head = max(swept) if swept else (None, "")
line("paper setting, rope, bf16, fastest of the classifier sweep" + (f" ({head})" if head else ""), 5.5e6, got, num)
line("GPT-2 124M, rope, bf16", 550e3, ours("GPT-2", "rope", "bf16"), num)
for mode, target in (("eager", 3.0), ("compile", 1.5)):
    for pos in ("learned", "rope", "crope"):
        t = next((tps(r[3]) for r in torch if r[0] == mode and r[1] == pos), None)
        o = ours("paper", pos, "fp32")
        line(f"paper setting, {pos}, fp32: ours / PyTorch {mode}", target, o / t if o and t else None, ratio)
EOF
}

# The report is written on any exit, so a run cut short (SIGTERM) still leaves it.
report() {
  {
    echo "# GPU check: $MODE"
    echo
    echo "- device: $DEVICE"
    echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (+ uncommitted changes)')"
    echo "- GPU tests: $TEST_SUMMARY"
    echo "- time: $((SECONDS - T0)) s of a $BUDGET s budget"
    echo
    echo "Parts:"
    echo
    sed 's/^/    /' "$OUT/parts.txt" 2>/dev/null
    if [ -s "$OUT/bench.md" ]; then echo; cat "$OUT/bench.md"; fi
    if [ -s "$OUT/torch.md" ]; then echo; cat "$OUT/torch.md"; fi
    if [ -s "$OUT/bench.md" ]; then echo; goals; fi
    if [ -s "$OUT/lab.md" ]; then echo; cat "$OUT/lab.md"; fi
    echo
    if [ $STATUS = 0 ]; then echo "Result: every required part passed."
    else echo "Result: FAILED (see the FAIL lines above)."; fi
  } >"$OUT/report.md"
}
finish() {
  local rc=$?
  # an exit nobody reported (a bash error): a failure, said as one
  [ $rc != 0 ] && ! grep -q '^FAIL ' "$OUT/parts.txt" 2>/dev/null && part script fail "stopped with status $rc"
  [ $STATUS = 0 ] && [ $rc != 0 ] && STATUS=$rc
  report
  echo
  cat "$OUT/report.md"
  echo "results in $OUT"
  [ -n "${WORK:-}" ] && rm -rf "$WORK"
  exit $STATUS
}
trap finish EXIT
trap 'echo "gpu_check: interrupted"; STATUS=1; exit 1' TERM INT

# ---------------------------------------------------------------- 1. prerequisites
section "prerequisites"
missing=()
need() {  # need NAME WHAT-IS-MISSING: a required prerequisite is missing
  echo "missing: $1 ($2)"
  missing+=("$1")
}
for tool in make g++ timeout stdbuf; do
  if command -v $tool >/dev/null; then echo "$tool: $(command -v $tool)"; else need $tool "not on PATH"; fi
done
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ $EMU = 1 ]; then
  echo "nvcc, cuBLAS: not needed (emulated: test/cuda_emu/nvcc-emu and its cuBLAS stand-in)"
else
  NVCC=${NVCC:-$(command -v "$CUDA_HOME/bin/nvcc" || command -v nvcc || true)}
  if [ -z "$NVCC" ]; then
    need nvcc "not in \$CUDA_HOME/bin ($CUDA_HOME) nor on PATH: the CUDA toolkit is needed"
  else
    echo "nvcc: $NVCC ($("$NVCC" --version | grep -o 'release [0-9.]*' || echo 'version unknown'))"
    home=$(dirname "$(dirname "$NVCC")")
    if [ -f "$home/include/cublas_v2.h" ] && ls "$home"/lib64/libcublas.so* >/dev/null 2>&1; then
      echo "cuBLAS: $home/lib64"
    else
      need cuBLAS "no cublas_v2.h and libcublas.so under $home"
    fi
  fi
fi
# nlohmann/json: the system's package, else the copy carried in .gpu_deps/ (prepare_gpu_deps.sh)
has_json() { echo '#include <nlohmann/json.hpp>' | g++ ${1:+-I"$1"} -E -x c++ - >/dev/null 2>&1; }
if has_json ""; then
  echo "nlohmann/json: the system's package"
elif [ -d .gpu_deps/include ] && has_json "$PWD/.gpu_deps/include"; then
  echo "nlohmann/json: from .gpu_deps/include (this machine has no such package)"
  export CPPFLAGS="${CPPFLAGS:-} -I$PWD/.gpu_deps/include"
else
  need nlohmann/json "no <nlohmann/json.hpp>: run scripts/prepare_gpu_deps.sh where it is installed and copy .gpu_deps/ here"
fi
PY=${PYTHON:-$(command -v python3 || true)}
if [ -n "$PY" ]; then echo "python3: $PY"; else need python3 "writes the benchmark's token shards and reads its logs"; fi
CC_FLAGS=""
if [ $EMU = 1 ]; then
  DEVICE="emulated (CPU execution layer, test/cuda_emu)"
  echo "GPU: none used (emulated)"
else
  q="--format=csv,noheader --query-gpu=name,memory.total,driver_version"
  # compute_cap needs a driver from 2022 on; an older one still names the GPU
  gpu=$(nvidia-smi $q,compute_cap 2>/dev/null | head -n 1) cc=${gpu##*,}
  [ -n "$gpu" ] || { gpu=$(nvidia-smi $q 2>/dev/null | head -n 1) cc=""; }
  if [ -z "$gpu" ]; then
    need GPU "nvidia-smi $(command -v nvidia-smi >/dev/null && echo 'finds no GPU' || echo 'not found'); for a dry run without one: --emulated"
  else
    DEVICE=$gpu
    echo "GPU: $gpu"
    # machine code for this GPU only: a third of the default build's device compilation
    cc=$(echo "$cc" | tr -d ' .')  # 9.0 -> 90
    [[ $cc =~ ^[0-9]+$ ]] && CC_FLAGS="-O3 -gencode arch=compute_$cc,code=sm_$cc"
  fi
fi
SANITIZER=""
if [ $EMU = 1 ]; then
  echo "compute-sanitizer: not used (emulated)"
else
  SANITIZER=$(command -v "$CUDA_HOME/bin/compute-sanitizer" || command -v compute-sanitizer || true)
  [ -z "$SANITIZER" ] && [ -n "${NVCC:-}" ] && SANITIZER=$(command -v "$(dirname "$NVCC")/compute-sanitizer" || true)
  echo "compute-sanitizer: ${SANITIZER:-not found (memcheck and racecheck will be SKIPPED)}"
fi
TORCH=0
if [ $EMU = 0 ] && [ -n "$PY" ] && "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  TORCH=1
  echo "PyTorch: $("$PY" -c 'import torch; print(torch.__version__)') with CUDA (optional)"
else
  echo "PyTorch: not used ($([ $EMU = 1 ] && echo emulated || echo 'no torch with CUDA'); optional)"
fi
if [ ${#missing[@]} -gt 0 ]; then
  part prerequisites fail "missing ${missing[*]}"
  exit 1
fi
part prerequisites pass

if [ $GRID = 1 ]; then  # the paper grid's shards (they travel with the check), said now, not at the end
  for d in wikitext2 ptb pg19; do
    if compgen -G "data/$d/${d}_train_*.bin" >/dev/null && compgen -G "data/$d/${d}_val_*.bin" >/dev/null; then
      echo "paper grid data: data/$d"
    else
      echo "missing: paper grid shards data/$d/${d}_{train,val}_*.bin (its runs will be skipped)"
    fi
  done
fi

# ---------------------------------------------------------------- 2. build
section "build ($BUILD)"
# The Makefile's $(BUILD)/.deps stamp runs scripts/install_deps.sh (apt); this machine may have
# no network, so mark the step done and build with what is here.
mkdir -p "$BUILD" && touch "$BUILD/.deps"
if [ $EMU = 1 ]; then
  timeout -k 5 "$(cap 300)" make -j"$(nproc)" BUILD="$BASE" EMU_BUILD="$BUILD" emu >"$OUT/build.log" 2>&1
else
  targets="$BUILD/train $(ls test/test_cuda*.cpp | sed "s|^test/\(.*\)\.cpp$|$BUILD/test/\1|")"
  # shellcheck disable=SC2086
  env ${CC_FLAGS:+"NVCCFLAGS=$CC_FLAGS"} timeout -k 5 "$(cap 300)" make -j"$(nproc)" BUILD="$BUILD" NVCC="$NVCC" \
    $targets >"$OUT/build.log" 2>&1
fi
rc=$?
TEST_BINS=$(ls "$BUILD"/test/test_cuda* 2>/dev/null | grep -v '\.[od]$')
if [ $rc -ne 0 ] || [ ! -x "$BUILD/train" ] || [ ! -x "$BUILD/test/test_cuda" ]; then
  tail -n 15 "$OUT/build.log"
  why="make exited with $rc$([ $rc = 124 ] && echo ' (time budget)')"
  [ $rc = 0 ] && why="$BUILD/train or $BUILD/test/test_cuda missing after make"
  part build fail "$why (see build.log)"
  exit 1
fi
part build pass

# ---------------------------------------------------------------- 3. GPU tests
section "GPU tests"
# Emulated, the dry run takes a quick subset (make test runs them all under the emulation).
EMU_SUBSET="cuda_layernorm_forward cuda_softmax_crossentropy_loss cuda_model_rope_loss"
SAN_SUBSET="cuda_encoder_backward cuda_layernorm cuda_bf16_model_rope_loss cuda_rope cuda_crope cuda_attention_forward
  cuda_attention_backward cuda_gelu cuda_softmax_crossentropy cuda_adamw_update cuda_sum_squares cuda_model_crope_loss"
SAN_FLASH="cuda_flash_forward_backward cuda_flash_head_sizes"  # test_cuda_flash: every head size, small shapes
[ $EMU = 1 ] && TEST_BINS="$BUILD/test/test_cuda"
if skipping tests; then
  part tests skip "--skip tests"
  TEST_SUMMARY="not run (--skip tests)"
else
for t in $TEST_BINS; do
  echo "== $t" >>"$OUT/test_cuda.log"
  # shellcheck disable=SC2086
  timeout -k 5 "$(cap 200)" "$t" $([ $EMU = 1 ] && echo $EMU_SUBSET) 2>&1 | tee -a "$OUT/test_cuda.log"
  rc=${PIPESTATUS[0]}
  [ $rc -ne 0 ] && echo "FAIL $(basename "$t"): exited with status $rc$([ $rc = 124 ] && echo ' (time budget)')" |
    tee -a "$OUT/test_cuda.log"
done
np=$(grep -c '^PASS ' "$OUT/test_cuda.log") nf=$(grep -c '^FAIL ' "$OUT/test_cuda.log")
ns=$(grep -c '^SKIPPED ' "$OUT/test_cuda.log")
bp=$(grep -c '^PASS .*bf16' "$OUT/test_cuda.log") bfail=$(grep -c '^FAIL .*bf16' "$OUT/test_cuda.log")
tp=$(grep -c '^PASS .*tf32' "$OUT/test_cuda.log") tfail=$(grep -c '^FAIL .*tf32' "$OUT/test_cuda.log")
TEST_SUMMARY="$np passed, $nf failed, $ns skipped; bf16: $bp passed, $bfail failed; tf32: $tp passed, $tfail failed"
TEST_SUMMARY+=$([ $EMU = 1 ] && echo ' (emulated subset)')
echo "$TEST_SUMMARY"
if [ "$nf" -gt 0 ] || [ "$ns" -gt 0 ] || [ "$np" -eq 0 ]; then
  part tests fail "$TEST_SUMMARY (a skipped GPU test means no usable GPU)"
else
  part tests pass
fi
if [ $EMU = 1 ]; then part tests_bf16 skip "the emulated subset has no bf16 test (make test runs them)"
elif [ "$bfail" -gt 0 ] || [ "$bp" -eq 0 ]; then part tests_bf16 fail "bf16: $bp passed, $bfail failed"
else part tests_bf16 pass; fi
fi

# ---------------------------------------------------------------- 3a. compute-sanitizer
# Right after the tests: the bug classes only a GPU shows come before the benchmarks.
section "compute-sanitizer"
for tool in memcheck racecheck; do
  if skipping sanitizer; then part "sanitizer_$tool" skip "--skip sanitizer"; continue; fi
  if [ $EMU = 1 ]; then part "sanitizer_$tool" skip "emulated (the emulation has its own checks)"; continue; fi
  if [ -z "$SANITIZER" ]; then part "sanitizer_$tool" skip "compute-sanitizer not found"; continue; fi
  t=$(cap 60)
  if [ "$t" -lt 20 ]; then part "sanitizer_$tool" fail "not run: the time budget ran out"; continue; fi
  # the listed tests of test_cuda, then the flash kernels (shared-memory tiles; fp32, and the
  # tf32 and bf16 tensor-core ones) at every head size, on small shapes
  # shellcheck disable=SC2086
  timeout -k 5 "$t" "$SANITIZER" --tool $tool --error-exitcode 99 --print-limit 20 \
    "$BUILD/test/test_cuda" $SAN_SUBSET >"$OUT/$tool.log" 2>&1
  rc=$?
  if [ $rc = 0 ]; then
    t=$(cap 60)
    # shellcheck disable=SC2086
    timeout -k 5 "$t" "$SANITIZER" --tool $tool --error-exitcode 99 --print-limit 20 \
      "$BUILD/test/test_cuda_flash" $SAN_FLASH >>"$OUT/$tool.log" 2>&1
    rc=$?
  fi
  grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^FAIL ' "$OUT/$tool.log" | head -n 5
  if [ $rc = 0 ]; then part "sanitizer_$tool" pass
  elif [ $rc = 124 ]; then part "sanitizer_$tool" fail "timed out after $t s (see $tool.log)"
  else part "sanitizer_$tool" fail "exit $rc (see $tool.log)"; fi
done

# ---------------------------------------------------------------- 3b. data parallel (NCCL)
# test/test_dist.sh --device: one rank under mpirun runs every NCCL call (all-reduce, ZeRO-1's
# reduce-scatter and all-gather) and must log the plain run's losses bit for bit; with several
# GPUs, 2, 4 or 8 ranks agree with it to rounding.
section "data parallel"
if skipping dist; then part nccl skip "--skip dist"
elif [ $EMU = 1 ]; then part nccl skip "emulated: make test runs test/test_dist.sh (NCCL emulated over MPI)"
elif ! command -v mpirun >/dev/null; then part nccl skip "mpirun not found (openmpi-bin, libopenmpi-dev; then rebuild)"
else
  TRAIN="$BUILD/train" PYTHON="$PY" timeout -k 5 "$(cap 120)" bash test/test_dist.sh --device >"$OUT/dist.log" 2>&1
  dp=$(grep -c '^PASS ' "$OUT/dist.log") df=$(grep -c '^FAIL ' "$OUT/dist.log")
  if [ "$df" -gt 0 ] || [ "$dp" -eq 0 ]; then part nccl fail "$dp passed, $df failed (see dist.log)"
  else part nccl pass; fi
fi

# ---------------------------------------------------------------- 4. benchmark
section "benchmark"
if [ $EMU = 1 ]; then  # tiny sizes: the emulation runs every CUDA thread in turn
  B=2 T=32 V=512 WARM=1 STEPS=1 EVAL=1 ROW_MAX=60 TILES_MAIN=tile128
  SETTINGS=("paper:emulated tiny (C=32 L=1 H=2):1:2:32" "gpt2:emulated tiny (C=64 L=2 H=2):2:2:64")
else
  B=16 T=1024 V=50257 WARM=5 STEPS=20 EVAL=20 ROW_MAX=90 TILES_MAIN="tile1024 tile4096"
  SETTINGS=("paper:paper (C=128 L=4 H=4):4:4:128" "gpt2:GPT-2 124M (C=768 L=12 H=12):12:12:768")
fi
WORK=$(mktemp -d /tmp/gpu_check.XXXXXX)
SHARD="$WORK/synth_train_000000.bin"
# random tokens, enough for every training step and the evaluation batches without wrapping
"$PY" - "$SHARD" $(((WARM + STEPS + EVAL + 2) * B * (T + 1))) "$V" <<'EOF' || { part bench_data fail "could not write the token shard"; exit 1; }
import random, struct, sys
from array import array
path, n, V = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(1234)
toks = array("H", (rng.randrange(V) for _ in range(n)))
if sys.byteorder != "little":
    toks.byteswap()
with open(path, "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)) + toks.tobytes())
EOF

# The header of bench.md's tables (the benchmark's and the classifier sweep's; bench_row writes rows).
bench_header() {
  echo "| setting | pos | precision | step | ms/step | tokens/s | peak MiB | eval ms/batch | 10k steps | 10k steps + eval | loss (last) |"
  echo "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
}
{
  echo "Benchmark: $BUILD/train, B=$B, T=$T, V=$V, random tokens; median of $STEPS steps after $WARM warm-up steps;"
  echo "evaluation: ms per batch of $B x $T (forward only), from the $EVAL-batch evaluation at the end."
  echo "fp32 = TF32 GEMMs and flash attention (the trainer's default); bf16 = bf16 activations and GEMMs, fp32 accumulation and master weights."
  echo "10k steps: ms/step x 10,000; + eval adds the paper config's evaluation (20 batches every 20 steps)."
  [ $EMU = 1 ] && echo "EMULATED: the CPU execution layer at tiny sizes; timings are not meaningful."
  echo
  echo "step: graph = the whole step replayed as one CUDA graph (the trainer's default); eager = --cuda_graph 0;"
  echo "profile = --profile 1 (eager, a CUDA event at each phase boundary: the per-phase table below)."
  echo
  bench_header
} >"$OUT/bench.md"

# bench_row KEY LABEL L H C POS PREC STEP [HEAD]: one training run; appends its row to bench.md at
# once. STEP: graph (the default step), eager (--cuda_graph 0) or profile (--profile 1, eager).
# HEAD: chunkN (--classifier_chunk N, rows per LM head + loss chunk) or tileN (--classifier_tile N,
# vocabulary columns per tile over all rows); none = the trainer's choice (row chunks of 4096).
bench_row() {
  local key=$1 label=$2 L=$3 H=$4 C=$5 pos=$6 prec=$7 mode=$8 head=${9:-}
  local id="${key}_${pos}_${prec}_${mode}${head:+_$head}" t
  local name="bench_$id" dir="$WORK/run_$id" flags=()
  case $mode in eager) flags=(--cuda_graph 0) ;; profile) flags=(--profile 1) ;; esac
  case $head in chunk*) flags+=(--classifier_chunk "${head#chunk}") ;; tile*) flags+=(--classifier_tile "${head#tile}") ;; esac
  t=$(cap $ROW_MAX)
  if [ "$t" -lt $((EMU == 1 ? 5 : 20)) ]; then
    echo "| $label | $pos | $prec | $mode | not run (time budget) | | | | | | |" >>"$OUT/bench.md"
    part "$name" fail "not run: the time budget ran out"
    return
  fi
  echo "-- $label $pos $prec"
  # line-buffered output, each line stamped on arrival: the final evaluation's time is the gap
  # between the last step's line and the last val line (eval_every = the step count: one
  # evaluation before the first step, which also warms the evaluation up, one after the last)
  timeout -k 5 "$t" stdbuf -oL "$BUILD/train" --device cuda --pos "$pos" --n_layer "$L" --n_head "$H" \
    --n_embd "$C" --vocab_size "$V" --max_seq_len "$T" --batch_size "$B" --seq_len "$T" \
    --steps $((WARM + STEPS)) --lr 1e-3 --schedule constant --eval_every $((WARM + STEPS)) --eval_batches "$EVAL" \
    --checkpoint_every 0 --sample_every 0 --precision "$prec" --train_data "$SHARD" --val_data "$SHARD" \
    "${flags[@]}" --run_dir "$dir" 2>&1 | while IFS= read -r l; do echo "$EPOCHREALTIME $l"; done >"$dir.out"
  local rc=${PIPESTATUS[0]}
  local row
  row=$("$PY" - "$dir" "$WARM" "$EVAL" "$B" "$T" <<'EOF'
import json, re, statistics, sys
d, warm, nev, B, T = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
lines = [l.rstrip("\n").split(" ", 1) for l in open(d + ".out")]
train = []
try:
    train = [r for r in map(json.loads, open(d + "/log.jsonl")) if r.get("type") == "train"][warm:]
except (OSError, ValueError):
    pass
if not train:
    sys.exit(1)
ms = statistics.median(r["step_ms"] for r in train)
peak = next((m.group(1) for _, l in lines for m in [re.match(r"peak device memory: ([0-9.]+) MiB", l)] if m), "-")
last_step = [float(t) for t, l in lines if l.startswith("step ")]
val = [float(t) for t, l in lines if l.startswith("val |")]
ev = (val[-1] - last_step[-1]) * 1000 / nev if val and last_step and val[-1] > last_step[-1] else None
def hours(ms_step):
    s = ms_step * 10000 / 1000
    return f"{s / 3600:.2f} h" if s >= 3600 else f"{s / 60:.1f} min"
print(" | ".join([f"{ms:.1f}", f"{B * T / ms * 1000:,.0f}", peak, f"{ev:.1f}" if ev else "-", hours(ms),
                  hours(ms + ev) if ev else "-", f"{train[-1]['loss']:.4f}"]))
EOF
  )
  if [ $rc -ne 0 ] || [ -z "$row" ]; then
    local why
    why=$(sed 's/^[0-9.]* //' "$dir.out" | grep -m1 'error' || sed 's/^[0-9.]* //' "$dir.out" | tail -n 1)
    [ $rc = 124 ] && why="timed out after $t s"
    echo "| $label | $pos | $prec | $mode | FAIL: exit $rc | | | | | | |" >>"$OUT/bench.md"
    part "$name" fail "exit $rc: $why"
    return
  fi
  echo "| $label | $pos | $prec | $mode | $row |" >>"$OUT/bench.md"
  echo "   $row"
  part "$name" pass
}
if skipping bench; then part bench skip "--skip bench"; else
for setting in "${SETTINGS[@]}"; do
  IFS=: read -r key label L H C <<<"$setting"
  for prec in fp32 bf16; do  # the bf16 column always runs: a bf16 failure is a failure
    for pos in learned rope crope; do bench_row "$key" "$label" "$L" "$H" "$C" "$pos" "$prec" graph; done
  done
done
# The classifier over vocabulary tiles at the paper setting (rope, bf16: the 5.5M tokens/s goal),
# here rather than in the sweep below, which a short budget cuts first
IFS=: read -r key label L H C <<<"${SETTINGS[0]}"
for head in $TILES_MAIN; do
  bench_row "$key" "$label, classifier_tile ${head#tile}" "$L" "$H" "$C" rope bf16 graph "$head"
done
head=${TILES_MAIN%% *}  # the first tile width profiled too: the per-phase table's head with tiles
bench_row "$key" "$label, classifier_tile ${head#tile}" "$L" "$H" "$C" rope bf16 profile "$head"
# What the graph gains (the same step launched op by op), and the per-phase breakdown (profiling
# runs eagerly: the events sit between the ops)
for setting in "${SETTINGS[@]}"; do
  IFS=: read -r key label L H C <<<"$setting"
  for prec in fp32 bf16; do
    for mode in eager profile; do bench_row "$key" "$label" "$L" "$H" "$C" rope "$prec" "$mode"; done
  done
done
# The profile runs above (a CUDA event at each phase boundary of the step): the median ms per
# timed step of each phase, and the device's own count of used memory at the end.
{
  echo
  echo "Per phase: median ms per step from CUDA events (rest = embeddings, LayerNorms, the linear"
  echo "layers, GELU, residuals, RoPE, the gradient norm); device MiB = used as the driver counts it."
  echo
  echo "| run | LM head + loss | attention | rest | AdamW | sum | device MiB |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
  "$PY" - "$WORK" "$WARM" <<'EOF'
import glob, json, os, re, statistics, sys
work, warm = sys.argv[1], int(sys.argv[2])
for d in sorted(glob.glob(work + "/run_*/"), key=os.path.getmtime):
    d = d.rstrip("/")
    try:
        train = [r for r in map(json.loads, open(d + "/log.jsonl")) if r.get("type") == "train"][warm:]
    except (OSError, ValueError):
        continue
    ph = [r["phase_ms"] for r in train if "phase_ms" in r]
    if not ph:
        continue
    med = [statistics.median(p[k] for p in ph) for k in ("head_loss", "attention", "rest", "adamw")]
    used = "-"
    for l in open(d + ".out"):
        m = re.search(r"device used at the end: ([0-9.]+) MiB", l)
        used = m.group(1) if m else used
    print("| %s | %s | %.1f | %s |" % (os.path.basename(d)[4:], " | ".join("%.2f" % x for x in med), sum(med), used))
EOF
} >>"$OUT/bench.md"
fi

# ---------------------------------------------------------------- 5. PyTorch (optional)
section "PyTorch"
if skipping torch; then
  part torch skip "--skip torch"
elif [ $TORCH = 0 ]; then
  part torch skip "$([ $EMU = 1 ] && echo emulated || echo 'no torch with CUDA') (optional)"
else
  {
    echo "PyTorch $("$PY" -c 'import torch; print(torch.__version__)') at the paper's setting (scripts/torch_reference.py, TF32):"
    echo
    echo "| mode | pos | ms/step | tokens/s | peak MiB |"
    echo "| --- | --- | ---: | ---: | ---: |"
  } >"$OUT/torch.md"
  for mode in eager compile; do
    for pos in learned rope crope; do
      # optional: only while time is left, torch.compile only with 2 minutes to spare
      if [ "$(left)" -lt $([ $mode = compile ] && echo 120 || echo 40) ]; then
        echo "| $mode | $pos | skipped (time budget) | | |" >>"$OUT/torch.md"
        continue
      fi
      line=$(timeout -k 5 "$(cap 100)" "$PY" scripts/torch_reference.py --pos $pos \
        $([ $mode = compile ] && echo --compile) --steps 20 --warmup 5 2>"$WORK/torch.err" | tail -n 1)
      row=$("$PY" -c 'import json, sys
r = json.loads(sys.argv[1])
print("%.1f | %.0f | %.0f" % (r["ms_per_step"], r["tokens_per_s"], r["peak_mem_mib"]))' "$line" 2>/dev/null) ||
        row="failed: $(tail -n 1 "$WORK/torch.err") | |"
      echo "| $mode | $pos | $row |" | tee -a "$OUT/torch.md"
    done
  done
  part torch pass
fi

# ---------------------------------------------------------------- 5b. classifier sweep (tiles, chunks)
# Tuning figures after the goal figures (benchmark, PyTorch): when the budget runs short, these
# and the lab are what it cuts.
section "classifier sweep"
if skipping chunks; then part chunks skip "--skip chunks"; else
{
  echo
  echo "Classifier sweep: --classifier_tile (vocabulary columns per tile over all B*T rows, two passes) and"
  echo "--classifier_chunk (rows of B*T per LM head GEMM + loss + backward GEMMs):"
  echo
  bench_header
} >>"$OUT/bench.md"
# The benchmark rows use the trainer's choice (row chunks of 4096 on the GPU); these, the paper
# setting, rope, other heads: bf16 first (the goal's precision), vocabulary tiles first (a tile of
# 1024 columns of bf16 logits, 32 MB, can stay in the L2 cache from its GEMM to its kernels, at the
# price of the forward GEMM twice and more graph nodes), then row chunks down to those whose logits stay in the L2
# cache (512 rows of bf16 logits are 51 MB; each chunk adds a pass over wte's gradient), then
# fp32. One chunk of all B*T rows is the unfused path (the whole batch's logits at once).
IFS=: read -r key label L H C <<<"${SETTINGS[0]}"
for prec in bf16 fp32; do
  # (bf16 tiles of TILES_MAIN ran with the benchmark)
  if [ $EMU = 1 ]; then heads=$([ $prec = bf16 ] && echo "chunk16" || echo "tile128 chunk16 chunk$((B * T))")
  elif [ $prec = bf16 ]; then heads="tile512 tile2048 chunk256 chunk512 chunk1024 chunk2048 chunk8192 chunk$((B * T))"
  else heads="tile1024 tile4096 chunk1024 chunk2048 chunk8192 chunk$((B * T))"; fi
  for head in $heads; do
    kind=${head%%[0-9]*}  # tile or chunk
    bench_row "$key" "$label, classifier_$kind ${head#"$kind"}" "$L" "$H" "$C" rope "$prec" graph "$head"
  done
done
fi

# ---------------------------------------------------------------- 5c. kernel lab
# Every program of test/lab/ (attention, classifier, layernorm, adamw): each version checked
# against the CPU, then timed at the paper's shapes (C=128: H=4 D=32, L=4) and GPT-2 124M's
# (C=768: H=12 D=64, L=12), B=16 T=1024 (N=16384 rows), V=50257; TFLOP/s or GB/s per version,
# so the first GPU run tells which version to keep. Each run's lines go into lab.md as they
# come. Reference point: FlashAttention-2 runs the causal forward at about 230 TFLOP/s on an
# H100 (D=64, T=1024, bf16).
section "kernel lab"
if skipping lab; then part lab skip "--skip lab"; else
LAB_RUNS=(
  "attention paper --B 16 --T 1024 --H 4 --D 32"
  "attention 124M --B 16 --T 1024 --H 12 --D 64"
  "classifier paper --N 16384 --C 128 --V 50257"
  "classifier paper-tile512 --N 16384 --C 128 --V 50257 --tile 512 --version 5"
  "classifier paper-tile4096 --N 16384 --C 128 --V 50257 --tile 4096 --version 5"
  "classifier 124M --N 16384 --C 768 --V 50257"
  "layernorm paper --N 16384 --C 128"
  "layernorm 124M --N 16384 --C 768"
  "adamw paper --L 4 --C 128 --V 50257 --maxT 1024"
  "adamw 124M --L 12 --C 768 --V 50257 --maxT 1024"
)
{
  echo "Kernel lab (test/lab/*.cu; median of 20 runs after 3 warm-ups; attention FLOPs count the causal half):"
  echo
} >"$OUT/lab.md"
if [ $EMU = 1 ]; then lab_make="BUILD=$BASE EMU_BUILD=$BUILD lab-emu"
else lab_make="BUILD=$BUILD NVCC=$NVCC $(printf '%s\n' "${LAB_RUNS[@]}" | cut -d' ' -f1 | sort -u | sed "s|^|$BUILD/lab/|")"; fi
# shellcheck disable=SC2086
if env ${CC_FLAGS:+"NVCCFLAGS=$CC_FLAGS"} timeout -k 5 "$(cap 150)" make -j"$(nproc)" $lab_make >>"$OUT/build.log" 2>&1; then
  for run in "${LAB_RUNS[@]}"; do
    read -r prog label args <<<"$run"
    t=$(cap 60)
    if [ "$t" -lt 10 ]; then part "lab_${prog}_$label" fail "not run: the time budget ran out"; continue; fi
    echo "    $prog, $label:" >>"$OUT/lab.md"
    # shellcheck disable=SC2086
    timeout -k 5 "$t" "$BUILD/lab/$prog" $args 2>&1 | sed -u 's/^/    /' | tee -a "$OUT/lab.md"
    rc=${PIPESTATUS[0]}
    if [ "$rc" = 0 ]; then part "lab_${prog}_$label" pass
    elif [ "$rc" = 124 ]; then part "lab_${prog}_$label" fail "timed out after $t s"
    else part "lab_${prog}_$label" fail "exit $rc"; fi
  done
else
  part lab fail "make lab failed (see build.log)"
fi
fi

# ---------------------------------------------------------------- 6. the paper grid (--paper-grid)
if [ $GRID = 1 ]; then
  section "paper grid"
  if [ $EMU = 1 ]; then
    part paper_grid skip "emulated: the paper's runs need a GPU (test/test_paper_grid.sh runs the script on the CPU)"
  elif [ "$(left)" -lt 60 ]; then
    part paper_grid skip "under a minute left"
  else
    # Science only from kernels that pass on this GPU: the grid first reruns the GPU tests of its
    # precision (seconds; a run with --skip tests has none of its own). A bf16 failure falls back
    # to fp32; an fp32 grid runs TF32 (GEMMs and the tensor-core flash kernels), and a TF32
    # failure falls back to plain fp32 (NVIDIA_TF32_OVERRIDE=0: the exact kernels).
    # grid gate: begin
    # gate_tests NAME: the tests whose name contains NAME, in every GPU test program that has
    # some; prints the failures (or that none passed) and fails if there are any
    gate_tests() {
      local bad="" passed=0 t o rc
      for t in $TEST_BINS; do
        o=$(timeout -k 5 60 "$t" "$1" 2>&1)
        rc=$?
        grep -q '^error: no test name contains' <<<"$o" && continue
        [ $rc = 0 ] || bad+=" $(basename "$t") (exit status $rc)"
        bad+=$(grep '^FAIL ' <<<"$o" | cut -d: -f1 | sed 's/^FAIL / /' | tr -d '\n')
        passed=$((passed + $(grep -c '^PASS ' <<<"$o")))
      done
      [ $passed -gt 0 ] || bad+=" (no $1 test passed)"
      echo "$bad"
      [ -z "$bad" ]
    }
    GRID_TF32=1
    if [ "$GRID_PREC" = bf16 ] && ! bad=$(gate_tests bf16); then
      echo "paper grid: bf16 tests failed on this GPU:$bad; the grid runs in fp32"
      GRID_PREC=fp32
    fi
    if [ "$GRID_PREC" = fp32 ] && ! bad=$(gate_tests tf32); then
      echo "paper grid: TF32 tests failed on this GPU:$bad; the grid runs in plain fp32 (NVIDIA_TF32_OVERRIDE=0)"
      GRID_TF32=0
    fi
    # grid gate: end
    grid_env=()
    [ $GRID_TF32 = 0 ] && grid_env=(NVIDIA_TF32_OVERRIDE=0)
    if env "${grid_env[@]}" bash scripts/paper_grid.sh --out "$OUT/paper_grid" --budget $(($(left) - 15)) -- \
      --device cuda --precision "$GRID_PREC"; then
      part paper_grid pass
    else
      part paper_grid fail "a run failed or no dataset has its shards (see above)"
    fi
  fi
fi
