#!/usr/bin/env bash
# The one call to make on a GPU machine: every figure in one run of at most 9 minutes, build
# included (--budget, default 540 s), nothing lost when it is cut short (each result is written as
# it comes, the report on any exit), and a second run that does only what the first did not
# (--skip-done DIR). The parts run in the order of what matters most, each sized from its cost:
#   prerequisites   one line each (make, g++, nvcc, cuBLAS, NCCL, nlohmann/json, python3, a GPU,
#                   its driver, CUDA's first calls, compute-sanitizer, PyTorch), each probe
#                   capped; never apt (such a machine may have no network). A missing or unfit
#                   one (a driver too old for the toolkit, a GPU below sm_80, a header not found,
#                   a GPU CUDA cannot open: fabric manager down, a cuda-compat libcuda that does
#                   not fit the driver, MIG without an instance, CUDA_VISIBLE_DEVICES naming no
#                   GPU) is an `error:` line that says what to do, and the check stops before building
#   build           the trainer and the GPU test programs, for this GPU's architecture only
#   tests           every build/test/test_cuda*, bf16 and tf32 included      -> OUT/test_cuda.log
#   paper           the CRoPE paper's setting (V=50257 C=128 L=4 H=4 B=16 T=1024), rope and crope,
#                   bf16 and fp32 (TF32), the step as one CUDA graph          -> OUT/bench.md
#   gpt2            GPT-2 124M (C=768 L=12 H=12), rope and crope, bf16, graph -> OUT/bench.md
#   profile         per-phase times (CUDA events): paper rope bf16 and fp32, 124M rope bf16
#                                                                             -> OUT/phases.md
#   head            the LM head sweep at the paper setting: the fused head (the default), row
#                   chunks whose bf16 logits fit the 50 MB L2 (256, 512 rows), the logits head's
#                   default 4096, all rows, vocabulary tiles; the head's ms, TFLOP/s and GB/s,
#                   and the fastest                                           -> OUT/head.md
#   sanitizer       compute-sanitizer memcheck and racecheck, small shapes    -> OUT/memcheck.log, ...
#   dist            the NCCL path on 1 rank (and 2/4/8 with that many GPUs), when the build
#                   has NCCL                                                  -> OUT/dist.log
#   rest            the other benchmark rows: learned, alibi, 124M fp32, the eager step -> OUT/bench.md
#   torch           PyTorch at the paper's setting (optional)                 -> OUT/torch.md
#   lab             every version of every test/lab/ program (optional)       -> OUT/lab.md
#   grid            --paper-grid: as many of the paper's nine runs as the time left allows
#                   (optional; its precision's GPU tests first, falling back to fp32, then to
#                   plain fp32 without TF32, when they fail)                  -> OUT/paper_grid/
#   report          the parts, every table, the goals                          -> OUT/report.md
# Every part prints PASS / FAIL / SKIPPED gpu_check_<part> (a benchmark row, a lab program: one
# each); the exit status is 0 only if every required part passed. No GPU is a failure. A failed
# training run keeps its output in OUT/failed/<run>/.
# --emulated accepts the CPU execution layer (test/cuda_emu, `make emu`) as the device, for a dry
# run of this script at tiny sizes.
set -u

usage() {
  cat <<'EOF'
usage: scripts/gpu_check.sh [--out DIR] [--budget SECONDS] [--emulated] [--paper-grid]
                            [--grid-precision fp32|bf16] [--skip PARTS] [--skip-done DIR]
  --out DIR         results folder (default build_gpu/gpu_check; build_emu/gpu_check with
                    --emulated): gpu_check.log, parts.txt, costs.tsv, test_cuda.log, bench.md,
                    phases.md, head.md, report.md, ...
  --budget SECONDS  the whole check, build included, within this time (default 540); a part
                    starts only while its cost fits in what is left
  --emulated        dry run on the CPU execution layer (no GPU): builds with `make emu`,
                    tiny sizes, timings not meaningful
  --paper-grid      at the end, as many of the paper's nine runs (scripts/paper_grid.sh) as the
                    time left allows, skipping those committed under scripts/results/paper/;
                    each finished run's log in OUT/paper_grid/ (the shards are checked first)
  --grid-precision P  the paper grid's precision: bf16 (default: the precision of the
                    30-second goal, so more runs fit) or fp32 (TF32 GEMMs and attention)
  --skip PARTS      comma-separated parts not to run, each reported SKIPPED: tests, paper,
                    gpt2, profile, head, sanitizer, dist, rest, torch, lab
  --skip-done DIR   DIR: the --out of an earlier run on this machine. What passed there is not
                    run again (reported SKIPPED, its rows copied from DIR), and the parts are
                    sized from the costs DIR measured
  -h, --help        this text
Environment: DATA (where prepared shards are looked for, default data), GPU_CHECK_COSTS
("PART:SECONDS ...": costs to plan with instead of the estimates), GPU_CHECK_PROBE_S (the
seconds each probe of the machine may take, default 20: nvidia-smi, nvcc, the compiler; CUDA's
first calls twice that, PyTorch 3 times that), GPU_CHECK_EMU_TESTS (with --emulated: the
test_cuda checks to run), CUDA_HOME, NVCC, CXX, MPICC, NCCL_HOME (as the Makefile reads them).
EOF
}

die() { echo "error: $*" >&2; exit 2; }
OUT="" BUDGET=540 EMU=0 GRID=0 GRID_PREC=bf16 SKIP="," DONE=""
PARTS=",tests,paper,gpt2,profile,head,sanitizer,dist,rest,torch,lab,"
while [ $# -gt 0 ]; do
  case $1 in
    --out) [ $# -ge 2 ] || die "--out needs a folder"; OUT=$2; shift 2 ;;
    --out=*) OUT=${1#--out=}; shift ;;
    --budget) [ $# -ge 2 ] || die "--budget needs a number of seconds"; BUDGET=$2; shift 2 ;;
    --budget=*) BUDGET=${1#--budget=}; shift ;;
    --emulated) EMU=1; shift ;;
    --paper-grid) GRID=1; shift ;;
    --grid-precision) [ $# -ge 2 ] || die "--grid-precision needs fp32 or bf16"; GRID_PREC=$2; shift 2 ;;
    --grid-precision=*) GRID_PREC=${1#--grid-precision=}; shift ;;
    --skip) [ $# -ge 2 ] || die "--skip needs a list of parts"; SKIP+="$2,"; shift 2 ;;
    --skip=*) SKIP+="${1#--skip=},"; shift ;;
    --skip-done) [ $# -ge 2 ] || die "--skip-done needs the folder of an earlier run"; DONE=$2; shift 2 ;;
    --skip-done=*) DONE=${1#--skip-done=}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
for p in ${SKIP//,/ }; do
  [[ $PARTS == *",$p,"* ]] || die "--skip: no part '$p' (parts: ${PARTS:1:-1})"
done
skipping() { [[ $SKIP == *",$1,"* ]]; }
[[ $GRID_PREC == fp32 || $GRID_PREC == bf16 ]] || die "--grid-precision must be fp32 or bf16, got '$GRID_PREC'"
[[ $BUDGET =~ ^[0-9]+$ ]] && [ "$BUDGET" -gt 0 ] || die "--budget must be a positive number of seconds, got '$BUDGET'"
PROBE_S=${GPU_CHECK_PROBE_S:-20}
[[ $PROBE_S =~ ^[0-9]+$ ]] && [ "$PROBE_S" -gt 0 ] || die "GPU_CHECK_PROBE_S must be a positive number of seconds, got '$PROBE_S'"
if [ -n "$DONE" ]; then
  [ -f "$DONE/parts.txt" ] || die "--skip-done: no parts.txt in '$DONE' (the --out folder of an earlier run)"
  DONE=$(cd "$DONE" && pwd)
fi
# Output folders: build_gpu/ on a GPU; emulated, the Makefile's emu folder (BUILD_emu, or EMU_BUILD
# as make test sets it). Both follow BUILD when it is set.
if [ $EMU = 1 ]; then BASE=${BUILD:-build}; BUILD=${EMU_BUILD:-${BASE}_emu}; else BUILD=${BUILD:-build_gpu}; fi
[ -n "$OUT" ] || OUT="$(cd "$(dirname "$0")/.." && pwd)/$BUILD/gpu_check"
mkdir -p "$OUT" || die "cannot create the results folder '$OUT'"
OUT=$(cd "$OUT" && pwd)
[ "$OUT" != "$DONE" ] || die "--skip-done: give the new run another --out than '$DONE'"
cd "$(dirname "$0")/.." || exit 1
rm -rf "$OUT"/{gpu_check.log,parts.txt,costs.tsv,build.log,test_cuda.log,memcheck.log,racecheck.log,dist.log} \
  "$OUT"/{bench.md,phases.md,head.md,torch.md,lab.md,report.md,rows,failed}
mkdir -p "$OUT/rows"
# Everything printed goes to gpu_check.log, which a follower copies to the console: a signal to the
# whole process group (a timeout's, a GPU slot's end) that kills the follower leaves the script
# writing to its file, on to its report.
: >"$OUT/gpu_check.log"
tail -n +1 -s 0.2 -f --pid=$$ "$OUT/gpu_check.log" 2>/dev/null &
exec >>"$OUT/gpu_check.log" 2>&1

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
# done_before NAME: NAME passed in the --skip-done run (then it is reported SKIPPED, not run)
done_before() { [ -n "$DONE" ] && grep -qx "PASS gpu_check_$1" "$DONE/parts.txt"; }

# Results come as table rows: row FILE NAME LINE appends LINE to OUT/FILE (its header first, from
# the header_FILE function, when the file is new) and keeps it in OUT/rows/NAME, so that a later
# --skip-done run copies it (carry NAME) instead of measuring it again.
row() {
  local file=$1 name=$2 line=$3
  [ -s "$OUT/$file" ] || "header_${file%.md}" >"$OUT/$file"
  echo "$line" >>"$OUT/$file"
  printf '%s\t%s\n' "$file" "$line" >>"$OUT/rows/$name"
}
# carry NAME: NAME's rows from the --skip-done run, and its SKIPPED line; false if it did not pass there
carry() {
  done_before "$1" || return 1
  local file line
  if [ -f "$DONE/rows/$1" ]; then
    while IFS=$'\t' read -r file line; do row "$file" "$1" "$line"; done <"$DONE/rows/$1"
  fi
  part "$1" skip "done in $DONE"
}

MODE="GPU"
[ $EMU = 1 ] && MODE="EMULATED (CPU execution layer test/cuda_emu, no GPU; timings not meaningful)"
DEVICE="unknown"
TEST_SUMMARY="not run"

# The speed goals, from the rows of bench.md, head.md and torch.md that exist: the paper setting
# at 5.5M tokens/s (10k steps in 30 s; with the trainer's default LM head, and with the head
# sweep's fastest) and GPT-2 124M at 550K tokens/s, both bf16 with the graph; the paper setting's
# fp32 (TF32) graph step against PyTorch's (TF32) eager (3x) and torch.compile (1.5x).
goals() {
  "${PY:-python3}" - "$OUT/bench.md" "$OUT/torch.md" "$OUT/head.md" "$EMU" <<'EOF'
import sys
def rows(path, ncols):
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return []
    out = []
    for l in lines:
        c = [x.strip() for x in l.strip().strip("|").split("|")]
        if len(c) == ncols and c[0] not in ("setting", "mode", "LM head") and not c[0].startswith("---"):
            out.append(c)
    return out
def tps(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return None
bench, torch, head = rows(sys.argv[1], 11), rows(sys.argv[2], 5), rows(sys.argv[3], 9)
if sys.argv[4] == "1":  # emulated: nothing here measures a GPU
    bench = torch = head = []
def ours(prefix, pos, prec):
    return next((tps(r[5]) for r in bench if r[0].startswith(prefix) and r[1:4] == [pos, prec, "graph"]), None)
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
swept = [(tps(r[3]), r[0]) for r in head if r[1] == "bf16" and tps(r[3])]
got, best = max(swept) if swept else (None, "")
line("paper setting, rope, bf16, fastest LM head of the sweep" + (f" ({best})" if best else ""), 5.5e6, got, num)
line("GPT-2 124M, rope, bf16", 550e3, ours("GPT-2", "rope", "bf16"), num)
for mode, target in (("eager", 3.0), ("compile", 1.5)):
    for pos in ("learned", "rope", "crope"):
        t = next((tps(r[3]) for r in torch if r[0] == mode and r[1] == pos), None)
        o = ours("paper", pos, "fp32")
        line(f"paper setting, {pos}, fp32: ours / PyTorch {mode}", target, o / t if o and t else None, ratio)
EOF
}

# The report is written on any exit, so a run cut short (SIGTERM) still leaves it; and before each
# part (report PART), so that even a run killed outright leaves the parts before.
report() {
  {
    echo "# GPU check: $MODE"
    echo
    echo "- device: $DEVICE"
    echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (+ uncommitted changes)')"
    echo "- GPU tests: $TEST_SUMMARY"
    echo "- time: $((SECONDS - T0)) s of a $BUDGET s budget"
    [ -n "$DONE" ] && echo "- what passed in $DONE was not run again (its rows are copied)"
    echo
    echo "Parts:"
    echo
    sed 's/^/    /' "$OUT/parts.txt" 2>/dev/null
    if [ -s "$OUT/costs.tsv" ]; then
      echo
      echo "Measured cost of each part, seconds (for the PLAN table of scripts/gpu_check.sh):"
      echo
      sed 's/^/    /' "$OUT/costs.tsv"
    fi
    for f in bench phases head torch; do [ -s "$OUT/$f.md" ] && { echo; cat "$OUT/$f.md"; }; done
    if [ -s "$OUT/bench.md" ] || [ -s "$OUT/head.md" ]; then echo; goals; fi
    if [ -s "$OUT/lab.md" ]; then echo; cat "$OUT/lab.md"; fi
    echo
    if [ -n "${1:-}" ]; then echo "Result: not finished (this report is of the parts before $1)."
    elif [ $STATUS = 0 ]; then echo "Result: every required part passed."
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
# Killed (SIGTERM, SIGINT): said, and the report written on the way out.
interrupted() {
  [ "$BASHPID" = $$ ] || exit 1  # a subshell (a pipeline's loop): the script itself reports
  echo "gpu_check: interrupted"
  STATUS=1
  exit 1
}
trap interrupted TERM INT

# ---------------------------------------------------------------- prerequisites
# One line each; a missing or unfit one is an `error: NAME: ...` line that says how to get it, and
# the check stops there, before building (the build would stop later saying less). Every probe of
# the machine ends within GPU_CHECK_PROBE_S seconds (default 20): a wedged GPU or driver must not
# hang the check before its report exists.
section "prerequisites"
WORK=$(mktemp -d /tmp/gpu_check.XXXXXX)
missing=()
need() {  # need NAME MESSAGE: a required prerequisite is missing or unfit
  echo "error: $1: $2"
  missing+=("$1")
}
# probe SECONDS CMD...: CMD's stdout and status (its stderr in WORK/probe.err), or status 124 once
# SECONDS have passed without its end. Not `timeout`, which waits for the process it kills: one
# stuck in the driver does not die.
# It looks every 10 ms: read's timeout on a pipe nobody writes to (NAP), no process a look.
exec {NAP}<> <(:)
probe() {
  local s=$1 pid i rc
  shift
  "$@" >"$WORK/probe.out" 2>"$WORK/probe.err" &
  pid=$!
  for ((i = 0; i < s * 100; i++)); do
    kill -0 $pid 2>/dev/null || break
    read -rt 0.01 -u $NAP _
  done
  if kill -0 $pid 2>/dev/null; then kill -KILL $pid 2>/dev/null; return 124; fi
  wait $pid
  rc=$?
  cat "$WORK/probe.out"
  return $rc
}
# our_kernels: the names of the kernels in cuda/, |-separated (each ends in _kernel, on its
# __global__ line or the next)
our_kernels() { grep -h -A1 '^__global__' cuda/*.cu cuda/*.cuh | grep -o '[a-z_0-9]*_kernel *(' | tr -d ' (' | sort -u | paste -sd'|'; }
# The C++ compiler as make runs it: CXX split into words (CXX="ccache g++" is two)
read -ra CXX_CMD <<<"${CXX:-g++}"
# has_header HEADER [FLAG...]: the C++ compiler finds HEADER
has_header() {
  printf '#include <%s>\n' "$1" >"$WORK/probe.cpp"
  probe "$PROBE_S" "${CXX_CMD[@]}" "${@:2}" -E "$WORK/probe.cpp" -o /dev/null >/dev/null
}
for tool in make $(printf '%s\n' "${CXX_CMD[@]}" | grep -v '^-') timeout stdbuf; do
  if command -v $tool >/dev/null; then echo "$tool: $(command -v $tool)"; else need $tool "not on PATH"; fi
done
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NCCL_WHY="emulated"  # why the build has no NCCL, if it has none
CUDA_VERSION="" home=""
if [ $EMU = 1 ]; then
  echo "nvcc, cuBLAS: not needed (emulated: test/cuda_emu/nvcc-emu and its cuBLAS stand-in)"
else
  NVCC=${NVCC:-$(command -v "$CUDA_HOME/bin/nvcc" || command -v nvcc || true)}
  if [ -z "$NVCC" ]; then
    need nvcc "not in \$CUDA_HOME/bin ($CUDA_HOME) nor on PATH: install NVIDIA's CUDA toolkit, or set CUDA_HOME"
  else
    CUDA_VERSION=$(probe "$PROBE_S" "$NVCC" --version | grep -o 'release [0-9.]*' | cut -d' ' -f2)
    echo "nvcc: $NVCC (CUDA ${CUDA_VERSION:-version unknown})"
    home=$(dirname "$(dirname "$NVCC")")  # the Makefile's CUDA_HOME
    if [ -f "$home/include/cublas_v2.h" ] && ls "$home"/lib64/libcublas.so* >/dev/null 2>&1; then
      echo "cuBLAS: $home/lib64"
    else
      need cuBLAS "no cublas_v2.h and libcublas.so under $home: they come with NVIDIA's CUDA toolkit (the libcublas-dev-* package of its apt repository)"
    fi
    # NCCL: the Makefile builds it in when `$MPICC -show` names MPI's flags and nccl.h is in
    # $NCCL_HOME/include, /usr/include or the toolkit's include folder (the first found)
    nccl_h=$(ls ${NCCL_HOME:+"$NCCL_HOME/include/nccl.h"} /usr/include/nccl.h "$home/include/nccl.h" 2>/dev/null | head -n 1)
    read -ra mpicc <<<"${MPICC:-mpicc}"  # split into words, as make does
    if [ "$(probe "$PROBE_S" "${mpicc[@]}" -show | wc -w)" -lt 2 ]; then
      NCCL_WHY="no ${MPICC:-mpicc}: the build has no MPI (libopenmpi-dev), so no NCCL"
    elif [ -z "$nccl_h" ]; then
      NCCL_WHY="no nccl.h in ${NCCL_HOME:+\$NCCL_HOME/include, }/usr/include or $home/include (NVIDIA's libnccl-dev, or set NCCL_HOME)"
    else
      NCCL_WHY=""
      printf 'int main() { return 0; }\n' >"$WORK/probe.cpp"
      if probe "$PROBE_S" "${CXX_CMD[@]}" "$WORK/probe.cpp" -o "$WORK/probe" -L"$home/lib64" ${NCCL_HOME:+-L"$NCCL_HOME/lib"} \
        -lnccl >/dev/null; then
        echo "NCCL: $nccl_h, with MPI (the data-parallel part runs under mpirun)"
      else
        need NCCL "$nccl_h is there, so the build links -lnccl, but no libnccl.so links from $home/lib64${NCCL_HOME:+, $NCCL_HOME/lib} or the system's folders: install NCCL's library (libnccl2 and libnccl-dev) beside its header"
      fi
    fi
    [ -n "$NCCL_WHY" ] && echo "NCCL: not built in ($NCCL_WHY); the data-parallel part will be SKIPPED"
  fi
fi
# nlohmann/json: the system's package, else .gpu_deps/include (scripts/prepare_gpu_deps.sh), which
# the Makefile adds to the include path when it is there
if has_header nlohmann/json.hpp; then
  echo "nlohmann/json: the system's package"
elif [ -d .gpu_deps/include ] && has_header nlohmann/json.hpp -I"$PWD/.gpu_deps/include"; then
  echo "nlohmann/json: from .gpu_deps/include (this machine has no such package)"
else
  need nlohmann/json "no <nlohmann/json.hpp> (Debian's nlohmann-json3-dev) here nor in .gpu_deps/include: run scripts/prepare_gpu_deps.sh (it fetches the header without root)"
fi
PY=${PYTHON:-$(command -v python3 || true)}
if [ -n "$PY" ]; then echo "python3: $PY"; else need python3 "not on PATH: it writes the benchmark's token shards and reads its logs"; fi
CC_FLAGS=""
# The oldest driver that runs the CUDA runtime of each major version (NVIDIA's table for minor
# version compatibility): 11.x R450, 12.x R525, 13.x R580. The check builds machine code for the
# GPU found, so no PTX needs a driver as new as the toolkit.
min_driver() { case $1 in 11) echo 450 ;; 12) echo 525 ;; 13) echo 580 ;; esac; }
if [ $EMU = 1 ]; then
  DEVICE="emulated (CPU execution layer, test/cuda_emu)"
  echo "GPU: none used (emulated)"
elif ! command -v nvidia-smi >/dev/null; then
  need GPU "nvidia-smi not found (the NVIDIA driver); for a dry run without a GPU: --emulated"
else
  # smi FIELDS: nvidia-smi's line per GPU of FIELDS (its options are two arguments)
  smi() { probe "$PROBE_S" nvidia-smi --query-gpu="$1" --format=csv,noheader; }
  # compute_cap needs a driver from 2022 on; an older one still names the GPU
  gpu=$(smi name,memory.total,driver_version,compute_cap)
  rc=$?
  [ $rc = 0 ] || [ $rc = 124 ] || { gpu=$(smi name,memory.total,driver_version); rc=$?; }
  ngpu=$(grep -c . <<<"$gpu") gpu=$(head -n 1 <<<"$gpu")
  if [ $rc = 124 ]; then
    need GPU "nvidia-smi did not answer within $PROBE_S s: the GPU or its driver is wedged (dmesg says more; nvidia-smi -r or a reboot)"
  elif [ $rc != 0 ] || [ -z "$gpu" ]; then
    said=$(cat "$WORK/probe.out" "$WORK/probe.err" | grep -m1 .)  # its own words, e.g. NVML's version mismatch
    need GPU "nvidia-smi finds no GPU${said:+ (it says: $said)}; for a dry run without one: --emulated"
  else
    DEVICE=$gpu
    echo "GPU: $gpu"
    IFS=, read -r name _ drv cc <<<"$gpu"
    name=$(xargs <<<"$name") drv=$(xargs <<<"$drv") cc=$(tr -d ' .' <<<"$cc")  # 9.0 -> 90
    min=$(min_driver "${CUDA_VERSION%%.*}")
    # advice only: cuda-compat's libcuda (LD_LIBRARY_PATH, or registered with ldconfig, as in NGC
    # containers) runs CUDA on an older driver, and the CUDA probe below is what tells
    if [ -n "$min" ] && [[ ${drv%%.*} =~ ^[0-9]+$ ]] && [ "${drv%%.*}" -lt "$min" ]; then
      echo "driver: $drv, older than the R$min that CUDA $CUDA_VERSION needs by itself: it runs only with cuda-compat's libcuda (the CUDA probe tells)"
    fi
    if [[ $cc =~ ^[0-9]+$ ]] && [ "$cc" -lt 80 ]; then
      need GPU "the GPU is sm_$cc ($name); the trainer needs sm_80 or newer (its kernels use TF32 and bf16 tensor-core instructions)"
    elif [[ $cc =~ ^[0-9]+$ ]] && [ -n "${NVCC:-}" ]; then
      # machine code for this GPU only: a third of the default build's device compilation
      if probe "$PROBE_S" "$NVCC" --list-gpu-arch | grep -qx "compute_$cc"; then
        CC_FLAGS="-O3 -gencode arch=compute_$cc,code=sm_$cc"
      else
        echo "nvcc has no sm_$cc: the build takes the Makefile's architectures (and their PTX, which the driver compiles for this GPU)"
      fi
    fi
  fi
fi
# CUDA's first calls, as the trainer makes them (cuda/memory.cu), before the build: a GPU that
# nvidia-smi lists but CUDA cannot open (fabric manager down, a libcuda that does not fit the
# driver, MIG without an instance, CUDA_VISIBLE_DEVICES naming no GPU) stops the check in seconds.
# The probe is a small C++ program built with CXX against the toolkit's runtime, linked as the
# Makefile links the trainer: a second or two, where nvcc takes longer and the toolkit's own
# device query (__nvcc_device_query) is an undocumented part of nvcc.
# ld_libcuda: the first folder on LD_LIBRARY_PATH with a libcuda.so.1 (cuda-compat's), which the
# runtime loads before the driver's own
ld_libcuda() {
  local d
  IFS=: read -ra ds <<<"${LD_LIBRARY_PATH:-}"
  for d in "${ds[@]}"; do [ -n "$d" ] && [ -e "$d/libcuda.so.1" ] && { echo "$d"; return 0; }; done
  return 1
}
# cuda_advice CODE: what to do when CUDA's first call fails with CODE
cuda_advice() {
  local d
  case $1 in
    802) echo "on an NVSwitch machine (HGX, DGX) NVIDIA's fabric manager must run before CUDA can use the GPUs: sudo systemctl start nvidia-fabricmanager (at the driver's version, $drv; systemctl status nvidia-fabricmanager says why it stopped)" ;;
    803)
      if d=$(ld_libcuda) && [ -n "$min" ] && [[ ${drv%%.*} =~ ^[0-9]+$ ]] && [ "${drv%%.*}" -ge "$min" ]; then
        echo "the libcuda.so.1 of $d (cuda-compat's, first on LD_LIBRARY_PATH) does not fit the driver $drv, which runs CUDA $CUDA_VERSION by itself: take $d off LD_LIBRARY_PATH"
      elif [ -n "$d" ]; then
        echo "the libcuda.so.1 of $d (cuda-compat's, first on LD_LIBRARY_PATH) does not fit the driver $drv: cuda-compat's must be newer than the driver (that of CUDA $CUDA_VERSION, in $home/compat)"
      else
        echo "the NVIDIA kernel module and the driver's library differ (a driver upgrade without a reboot?): reboot"
      fi ;;
    100)  # MIG first: a scheduler may set CUDA_VISIBLE_DEVICES by itself
      if smi mig.mode.current | grep -q Enabled; then
        echo "MIG mode is on and CUDA finds no MIG instance$([ -n "${CUDA_VISIBLE_DEVICES+set}" ] &&
          echo " in CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' (nvidia-smi -L lists their UUIDs)"): create one (sudo nvidia-smi mig -cgi PROFILE -C; nvidia-smi mig -lgip lists the profiles), or turn MIG off (sudo nvidia-smi -mig 0, then a GPU reset)"
      elif [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
        echo "CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' names none of the GPUs (nvidia-smi lists $ngpu: their indices from 0, or their UUIDs, nvidia-smi -L): name one, or unset it"
      else
        echo "nvidia-smi lists $ngpu but CUDA finds none: see whether this user may open /dev/nvidia* (in a container: whether the GPU is passed in)"
      fi ;;
    35) echo "the driver $drv is older than CUDA $CUDA_VERSION's runtime needs${min:+ (R$min)}, and no cuda-compat libcuda is loaded: update the driver, or install NVIDIA's forward-compatibility package cuda-compat (datacenter GPUs) and put its folder first on LD_LIBRARY_PATH$(
      for c in "$home"/compat{,/lib}; do [ -e "$c/libcuda.so.1" ] && echo " (here: $c)" && break; done)" ;;
    46) echo "the GPU is busy or in a prohibited compute mode (nvidia-smi -q -d COMPUTE)" ;;
    *) echo "see what nvidia-smi and dmesg say" ;;
  esac
}
if [ ${#missing[@]} = 0 ] && [ $EMU = 0 ]; then
  cat >"$WORK/cuda_probe.cpp" <<'EOF'
#include <cuda_runtime_api.h>
#include <cstdio>
// One line: "ok DEVICES SM NAME" or "fail CALL CODE NAME: TEXT".
static int failed(const char* call, cudaError_t e) {
    std::printf("fail %s %d %s: %s\n", call, int(e), cudaGetErrorName(e), cudaGetErrorString(e));
    return 1;
}
int main() {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e) return failed("cudaGetDeviceCount", e);
    cudaDeviceProp p;
    if ((e = cudaGetDeviceProperties(&p, 0))) return failed("cudaGetDeviceProperties", e);
    if ((e = cudaSetDevice(0))) return failed("cudaSetDevice", e);
    if ((e = cudaFree(nullptr))) return failed("cudaFree", e);  // creates the context
    std::printf("ok %d %d%d %s\n", n, p.major, p.minor, p.name);
    return 0;
}
EOF
  probe "$PROBE_S" "${CXX_CMD[@]}" "$WORK/cuda_probe.cpp" -o "$WORK/cuda_probe" -I"$home/include" -L"$home/lib64" \
    -Wl,-rpath,"$home/lib64" -lcudart >/dev/null
  rc=$?
  if [ $rc != 0 ]; then
    need "CUDA runtime" "no program builds with ${CXX_CMD[*]} against $home's runtime (cuda_runtime_api.h, libcudart.so): $(
      [ $rc = 124 ] && echo "not within $PROBE_S s" ||
        { grep -m1 -E 'error|cannot find' "$WORK/probe.err" || grep -m1 . "$WORK/probe.err"; } | sed 's/^.*error: //')"
  else
    # twice the time: without the persistence daemon the driver starts every GPU at the first call
    cuda=$(probe $((PROBE_S * 2)) "$WORK/cuda_probe")
    rc=$?
    if [ $rc = 124 ]; then
      need GPU "CUDA's first call did not return within $((PROBE_S * 2)) s: the GPU or its driver is wedged (dmesg says more; nvidia-smi -r or a reboot)"
    elif [[ $cuda =~ ^ok\ ([0-9]+)\ ([0-9]+)\ (.*)$ ]]; then
      echo "CUDA: ${BASH_REMATCH[1]} device(s); device 0: ${BASH_REMATCH[3]} (sm_${BASH_REMATCH[2]})"
    elif [[ $cuda =~ ^fail\ ([a-zA-Z]+)\ ([0-9]+)\ ([a-zA-Z]+):\ (.*)$ ]]; then
      need GPU "CUDA's ${BASH_REMATCH[1]} fails with ${BASH_REMATCH[3]} (${BASH_REMATCH[2]}: ${BASH_REMATCH[4]}): $(cuda_advice "${BASH_REMATCH[2]}")"
    else
      need GPU "the CUDA probe stopped with status $rc: $(cat "$WORK/probe.out" "$WORK/probe.err" | grep -m1 . || echo 'no message')"
    fi
  fi
fi
if [ ${#missing[@]} -gt 0 ]; then
  part prerequisites fail "$(IFS=,; echo "${missing[*]}" | sed 's/,/, /g') (the error: lines above; nothing was built)"
  exit 1
fi
# the optional ones
SANITIZER="" SAN_FILTER=()
if [ $EMU = 1 ]; then
  echo "compute-sanitizer: not used (emulated)"
else
  SANITIZER=$(command -v "$CUDA_HOME/bin/compute-sanitizer" || command -v compute-sanitizer || true)
  [ -z "$SANITIZER" ] && SANITIZER=$(command -v "$(dirname "$NVCC")/compute-sanitizer" || true)
  echo "compute-sanitizer: ${SANITIZER:-not found (memcheck and racecheck will be SKIPPED)}"
  # racecheck instruments only the kernels of cuda/ (--kernel-name regex=, compute-sanitizer 2023.3
  # on), not cuBLAS's or cub's: their shared-memory hazards are not this project's to fix, and
  # they would take most of its time
  if [ -n "$SANITIZER" ] && probe "$PROBE_S" "$SANITIZER" --help | grep -q -- '--kernel-name '; then
    SAN_FILTER=(--kernel-name "regex=.*($(our_kernels)).*")
    echo "racecheck: the kernels of cuda/ only ($(our_kernels | tr '|' '\n' | wc -l) names)"
  elif [ -n "$SANITIZER" ]; then
    echo "racecheck: every kernel (this compute-sanitizer has no --kernel-name filter)"
  fi
fi
TORCH=0
if [ $EMU = 0 ] && [ -n "$PY" ] &&
  TORCH_VERSION=$(probe $((PROBE_S * 3)) "$PY" -c 'import torch; assert torch.cuda.is_available(); print(torch.__version__)'); then
  TORCH=1
  echo "PyTorch: $TORCH_VERSION with CUDA (optional)"
else
  echo "PyTorch: not used ($([ $EMU = 1 ] && echo emulated || echo "no torch with CUDA, or not within $((PROBE_S * 3)) s"); optional)"
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


# ---------------------------------------------------------------- the plan
# Each part's cost in seconds, in the order the parts run: ESTIMATES until a GPU measures them
# (an H200, 16 cores; no GPU has run this script yet). Every run writes what each part took to
# OUT/costs.tsv and to the report: put a GPU run's figures here. A run with --skip-done DIR plans
# with DIR's measured costs instead. Emulated: this machine's dry run at tiny sizes.
# The required parts (build to rest) sum to 455 s of the 540: 85 s are left for the probes
# (seconds; PyTorch's import up to 60), the report (10) and a part that runs long (each may take
# twice its cost plus 20 s, the later ones then cut); torch, lab and grid take what is left.
#   build 120    make -j16 for one architecture: its longest file, cuda/attention.cu (the flash
#                kernels at every head size in fp32, TF32 and bf16), took 27 s of a core (nvcc
#                13.0, sm_90, on this project's 2-core CI machine; loss.cu 5, matmul.cu 7); src/, the
#                other kernels and the test programs (g++ -O3) build beside it, the links after
#   tests 60     6 programs: each ~2 s to start CUDA and cuBLAS, then its CPU twins at test sizes (the
#                plan's guess; the part may run up to the programs' own limits, TEST_WORK below)
#   A training run: ~3 s to start (CUDA, cuBLAS, the model, the graph's capture), 25 steps and two
#   evaluations of 20 batches; at the paper setting a step is ~0.6 TFLOP (the LM head's 6 N C Vp),
#   a few ms: ~5 s a run; at 124M ~13 TFLOP, ~50 ms at 250 TFLOP/s in bf16: ~8 s a run.
#   paper 25     4 runs at the paper setting
#   gpt2 20      2 runs at 124M
#   profile 20   3 runs, eager (2 paper, 1 at 124M)
#   head 70      14 runs at the paper setting (the default head's 4 are the paper and profile parts')
#   sanitizer 60 6 programs under compute-sanitizer (memcheck, then racecheck on cuda/'s kernels
#                only), 5-10 s each: the tool's start, the modules it instruments, small shapes
#   dist 20      test/test_dist.sh --device: a plain run, then one rank under mpirun
#   rest 60      9 runs: 3 at 124M in fp32 (TF32: ~2.5x the bf16 step, ~12 s each), 2 more at 124M,
#                4 at the paper setting
#   torch 70     PyTorch's import, then 6 runs (eager, then torch.compile, which compiles ~20 s each)
#   lab 60       make of 4 lab programs (~30 s), then 10 runs of a few seconds
if [ $EMU = 1 ]; then
  PLAN="build:60 tests:10 paper:15 gpt2:10 profile:12 head:30 sanitizer:1 dist:1 rest:35 torch:1 lab:40 grid:1"
else
  PLAN="build:120 tests:60 paper:25 gpt2:20 profile:20 head:70 sanitizer:60 dist:20 rest:60 torch:70 lab:60 grid:60"
fi
PLAN+=" ${GPU_CHECK_COSTS:-}"  # PART:SECONDS ... in the environment: a plan to try (the tests' too)
OPTIONAL=" torch lab grid "  # cut by the budget: SKIPPED; any other part cut: FAIL
# cost PART: its seconds, measured in the --skip-done run or else the estimate above
cost() {
  local c=""
  [ -n "$DONE" ] && c=$(awk -F'\t' -v p="$1" '$1 == p { c = $2 } END { print c }' "$DONE/costs.tsv" 2>/dev/null)
  [ -n "$c" ] || c=$(tr ' ' '\n' <<<"$PLAN" | sed -n "s/^$1://p" | tail -n 1)
  echo "${c:-30}"
}
cost_source() {
  if [ -n "$DONE" ] && awk -F'\t' -v p="$1" '$1 == p { f = 1 } END { exit !f }' "$DONE/costs.tsv" 2>/dev/null; then
    echo "measured in $DONE"
  elif tr ' ' '\n' <<<"${GPU_CHECK_COSTS:-}" | grep -q "^$1:"; then
    echo "GPU_CHECK_COSTS"
  else
    echo "estimate"
  fi
}
# run_part NAME FUNCTION: runs the part if it is not skipped and its cost fits in the time left
# (10 s kept for the report); it may then take twice its cost plus 20 s (pcap bounds each command
# of it), and what it took goes to costs.tsv, "complete" when none of its lines failed. A part that
# completed in the --skip-done run always runs (its rows are copied, in no time).
run_part() {
  local name=$1 fn=$2 c start fails
  report "$name"
  section "$name"
  if skipping "$name"; then part "$name" skip "--skip $name"; return; fi
  c=$(cost "$name")
  if [ "$(left)" -lt $((c + 10)) ] && ! awk -F'\t' -v p="$name" '$1 == p && $3 == "complete" { f = 1 } END { exit !f }' \
    "${DONE:-/nonexistent}/costs.tsv" 2>/dev/null; then
    local why="not run: needs ~$c s ($(cost_source "$name")), $(left) s of the $BUDGET s budget left"
    if [[ $OPTIONAL == *" $name "* ]]; then part "$name" skip "$why"; else part "$name" fail "$why (time budget)"; fi
    return
  fi
  echo "(~$c s, $(cost_source "$name"))"
  PART_END=$((SECONDS + 2 * c + 20))
  start=$SECONDS fails=$(grep -c '^FAIL ' "$OUT/parts.txt" 2>/dev/null)
  "$fn"
  printf '%s\t%s\t%s\n' "$name" $((SECONDS - start)) \
    "$([ "$(grep -c '^FAIL ' "$OUT/parts.txt" 2>/dev/null)" = "$fails" ] && echo complete || echo partial)" >>"$OUT/costs.tsv"
}
# pcap N: a timeout of at most N seconds within the running part's allowance and the budget
pcap() {
  local p=$((PART_END - SECONDS)) c
  c=$(cap "$1")
  echo $((p < c ? (p > 1 ? p : 1) : c))
}
section "plan"
total=0
for p in $PLAN; do
  n=${p%%:*}
  [ "$n" = grid ] && [ $GRID = 0 ] && continue
  c=$(cost "$n") total=$((total + c))
  printf '  %-10s %4s s  (%s)\n' "$n" "$c" "$(cost_source "$n")"
done
echo "  total      $total s of a $BUDGET s budget (each part starts only while its cost fits)"


# ---------------------------------------------------------------- build
# The Makefile's $(BUILD)/deps.mk runs scripts/install_deps.sh (apt); this machine may have
# no network, so mark the step done and build with what is here. Always run: make does only what
# an earlier run left undone.
part_build() {
  local d
  for d in "$BUILD" "${BASE:-$BUILD}"; do mkdir -p "$d" && touch "$d/deps.mk"; done
  if [ $EMU = 1 ]; then
    timeout -k 5 "$(pcap 300)" make -j"$(nproc)" BUILD="$BASE" EMU_BUILD="$BUILD" emu >"$OUT/build.log" 2>&1
  else
    local targets
    targets="$BUILD/train $(ls test/test_cuda*.cpp | sed "s|^test/\(.*\)\.cpp$|$BUILD/test/\1|")"
    # shellcheck disable=SC2086
    env ${CC_FLAGS:+"NVCCFLAGS=$CC_FLAGS"} timeout -k 5 "$(pcap 300)" make -j"$(nproc)" BUILD="$BUILD" NVCC="$NVCC" \
      $targets >"$OUT/build.log" 2>&1
  fi
  local rc=$?
  if [ $rc -ne 0 ] || [ ! -x "$BUILD/train" ] || [ ! -x "$BUILD/test/test_cuda" ]; then
    tail -n 15 "$OUT/build.log"
    local why="make exited with $rc$([ $rc = 124 ] && echo ' (time budget)')"
    [ $rc = 0 ] && why="$BUILD/train or $BUILD/test/test_cuda missing after make"
    part build fail "$why (see build.log)"
    exit 1
  fi
  part build pass
}
run_part build part_build
[ -x "$BUILD/train" ] || exit 1  # --skip-done cannot skip the build: it is what every part runs
TEST_BINS=$(ls "$BUILD"/test/test_cuda* 2>/dev/null | grep -v '\.[od]$')

# ---------------------------------------------------------------- GPU tests
# Emulated, the dry run takes a quick subset (make test runs them all under the emulation);
# GPU_CHECK_EMU_TESTS names others ("" : all of test_cuda's).
EMU_SUBSET="cuda_layernorm_forward cuda_softmax_crossentropy_loss cuda_model_rope_loss"
EMU_SUBSET=${GPU_CHECK_EMU_TESTS-$EMU_SUBSET}
[ $EMU = 1 ] && TEST_BINS="$BUILD/test/test_cuda"
# Each program's time limit: 20 s for CUDA's and cuBLAS's start and the module's load (none
# emulated), plus twice its work: the CPU seconds of its whole run under the CPU emulation (every
# kernel run on the CPU beside the CPU twins; scripts/results/gpu.md has the figures and how they
# were taken), which bounds the host work a GPU run of it still does (the CPU twins, the
# launches). A program not listed: 60 s of work; GPU_CHECK_COSTS may name programs too
# (PROGRAM:SECONDS of work).
TEST_WORK="test_cuda:76 test_cuda_bf16:22 test_cuda_flash:87 test_cuda_generate:64 test_cuda_graph:238 test_cuda_step:39"
test_limit() {
  local w l
  w=$(tr ' ' '\n' <<<"$TEST_WORK ${GPU_CHECK_COSTS:-}" | sed -n "s/^$1://p" | tail -n 1)
  l=$(($([ $EMU = 1 ] && echo 0 || echo 20) + 2 * ${w:-60}))
  echo $((l > 0 ? l : 1))
}
part_tests() {
  if carry tests; then
    carry tests_bf16
    TEST_SUMMARY="done in $DONE"
    return
  fi
  local t rc name limit all=0 start
  for t in $TEST_BINS; do all=$((all + $(test_limit "$(basename "$t")"))); done
  PART_END=$((SECONDS + all))  # the programs' limits, not the plan's cost, bound this part
  for t in $TEST_BINS; do
    name=$(basename "$t") limit=$(pcap "$(test_limit "$name")") start=$SECONDS
    echo "== $t (limit $limit s)" >>"$OUT/test_cuda.log"
    # shellcheck disable=SC2086
    timeout -k 5 "$limit" "$t" $([ $EMU = 1 ] && echo $EMU_SUBSET) 2>&1 | tee -a "$OUT/test_cuda.log"
    rc=${PIPESTATUS[0]}
    echo "$name: $((SECONDS - start)) s of its $limit s" | tee -a "$OUT/test_cuda.log"
    [ $rc -ne 0 ] && echo "FAIL $name: exited with status $rc$([ $rc = 124 ] &&
      echo " (ran out of its $limit s$([ "$limit" -lt "$(test_limit "$name")" ] && echo ", cut by the check's budget"))")" |
      tee -a "$OUT/test_cuda.log"
  done
  local np nf ns bp bfail tp tfail
  np=$(grep -c '^PASS ' "$OUT/test_cuda.log") nf=$(grep -c '^FAIL ' "$OUT/test_cuda.log")
  ns=$(grep -c '^SKIPPED ' "$OUT/test_cuda.log")
  bp=$(grep -c '^PASS .*bf16' "$OUT/test_cuda.log") bfail=$(grep -c '^FAIL .*bf16' "$OUT/test_cuda.log")
  tp=$(grep -c '^PASS .*tf32' "$OUT/test_cuda.log") tfail=$(grep -c '^FAIL .*tf32' "$OUT/test_cuda.log")
  TEST_SUMMARY="$np passed, $nf failed, $ns skipped; bf16: $bp passed, $bfail failed; tf32: $tp passed, $tfail failed"
  TEST_SUMMARY+=$([ $EMU = 1 ] && echo ' (emulated subset)')
  echo "$TEST_SUMMARY"
  if [ "$nf" -gt 0 ] || [ "$ns" -gt 0 ] || [ "$np" -eq 0 ]; then
    part tests fail "$TEST_SUMMARY$(grep -o '^FAIL [a-z_0-9]*: exited .*ran out of its.*' "$OUT/test_cuda.log" |
      sed 's/^FAIL \([a-z_0-9]*\): exited with status 124 (\(.*\))$/; \1 \2/' | tr -d '\n')$([ "$ns" -gt 0 ] &&
      echo " (a skipped GPU test means no usable GPU: $(grep -m1 '^SKIPPED ' "$OUT/test_cuda.log" | cut -d: -f2-))")"
  else
    part tests pass
  fi
  if [ $EMU = 1 ]; then part tests_bf16 skip "the emulated subset has no bf16 test (make test runs them)"
  elif [ "$bfail" -gt 0 ] || [ "$bp" -eq 0 ]; then part tests_bf16 fail "bf16: $bp passed, $bfail failed"
  else part tests_bf16 pass; fi
}
run_part tests part_tests

# ---------------------------------------------------------------- the benchmark's runs
if [ $EMU = 1 ]; then  # tiny sizes: the emulation runs every CUDA thread in turn
  B=2 T=32 V=512 WARM=1 STEPS=3 EVAL=1 LR=1e-2  # enough for the loss to fall (train_run checks it)
  PAPER="paper:emulated tiny (C=32 L=1 H=2):1:2:32" GPT2="gpt2:emulated tiny (C=64 L=2 H=2):2:2:64"
else
  B=16 T=1024 V=50257 WARM=5 STEPS=20 EVAL=20 LR=1e-3
  PAPER="paper:paper (C=128 L=4 H=4):4:4:128" GPT2="gpt2:GPT-2 124M (C=768 L=12 H=12):12:12:768"
fi
VP=$(((V + 127) / 128 * 128))  # the padded vocabulary (the trainer pads to 128)
DEFAULT_CHUNK=$(sed -n 's/.*static constexpr int classifier_chunk = \([0-9]*\);.*/\1/p' cuda/backend_cuda.h)
# The tokens: a prepared shard (data/prepare_data.py: GPT-2 tokens of real text, whose most
# frequent token is 4-5 % of the positions) when there is one whose ids fit V and that holds
# every step and the evaluation; else a Zipf-like draw (p(rank k) ~ 1/(k + 1), the ranks a fixed
# shuffle of the ids: the top id is ~5 % at V = 50257). Said in bench.md's header.
DATA=${DATA:-data}
SHARD="$WORK/bench_train_000000.bin"
TOKENS=$("$PY" - "$SHARD" $(((WARM + STEPS + EVAL + 2) * B * (T + 1))) "$V" "$DATA"/{wikitext2,pg19,ptb}/*_train_*.bin <<'EOF'
import glob, random, struct, sys
from array import array
path, n, V, candidates = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
for c in candidates:
    if "*" in c:
        continue
    try:
        with open(c, "rb") as f:
            head = struct.unpack("<256i", f.read(1024))
            toks = array("H")
            toks.frombytes(f.read())
    except (OSError, struct.error, ValueError):
        continue
    if sys.byteorder != "little":
        toks.byteswap()
    if head[0] == 20240520 and head[2] == len(toks) >= n and max(toks) < V:
        print(f"a prepared shard of real text, {c}")
        sys.exit(0)
rng = random.Random(1234)
ids = list(range(V))
rng.shuffle(ids)
weights = [1.0 / (k + 2) for k in range(V)]  # rank k = 0, 1, ...: 1/(k + 1) of 1-based ranks, + 1
toks = array("H", rng.choices(ids, weights=weights, k=n))
if sys.byteorder != "little":
    toks.byteswap()
with open(path, "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)) + toks.tobytes())
print(f"Zipf-like (no prepared shard under {sys.argv[4].split('/')[0]}/ with enough tokens below V = {V}): p(rank k) ~ 1/(k + 1)")
EOF
) || { part bench_data fail "could not write the token shard"; exit 1; }
case $TOKENS in "a prepared shard of real text, "*) SHARD=${TOKENS#a prepared shard of real text, } ;; esac
echo "benchmark tokens: $TOKENS"

header_bench() {
  echo "Benchmark: $BUILD/train, B=$B, T=$T, V=$V; tokens: $TOKENS; median of $STEPS steps after $WARM warm-up steps;"
  echo "evaluation: ms per batch of $B x $T (forward only), from the $EVAL-batch evaluation at the end."
  echo "fp32 = TF32 GEMMs and flash attention (the trainer's default); bf16 = bf16 activations and GEMMs, fp32 accumulation and master weights."
  echo "10k steps: ms/step x 10,000; + eval adds the paper config's evaluation (20 batches every 20 steps)."
  [ $EMU = 1 ] && echo "EMULATED: the CPU execution layer at tiny sizes; timings are not meaningful."
  echo
  echo "step: graph = the whole step replayed as one CUDA graph (the trainer's default); eager = --cuda_graph 0;"
  echo "profile = --profile 1 (eager, a CUDA event at each phase boundary: phases.md)."
  echo
  echo "| setting | pos | precision | step | ms/step | tokens/s | peak MiB | eval ms/batch | 10k steps | 10k steps + eval | loss (last) |"
  echo "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
}
header_phases() {
  echo "Per phase: median ms per step from CUDA events (--profile 1; rest = embeddings, LayerNorms, the linear"
  echo "layers, GELU, residuals, RoPE, the gradient norm); device MiB = used as the driver counts it."
  echo
  echo "| run | LM head + loss | attention | rest | AdamW | sum | device MiB |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
}

# train_run ID L H C POS PREC MODE [HEAD]: one training run (MODE graph: the default step; eager:
# --cuda_graph 0; profile: --profile 1, eager; HEAD chunkN: --classifier_chunk N, tileN:
# --classifier_tile N, logits: --classifier logits, none: the trainer's choice). Sets RUN (ms/step, tokens/s, peak MiB, eval
# ms/batch, 10k steps, with eval, last loss, then with profile the median phase ms: head_loss,
# attention, rest, adamw, and the device's MiB at the end; |-separated) or, failing, RUN_WHY.
# A run with the same ID earlier in this check is not run again.
train_run() {
  local id=$1 L=$2 H=$3 C=$4 pos=$5 prec=$6 mode=$7 head=${8:-} dir="$WORK/run_$1" flags=() t
  RUN="" RUN_WHY=""
  if [ -s "$dir.stats" ]; then RUN=$(cat "$dir.stats"); return 0; fi
  case $mode in eager) flags=(--cuda_graph 0) ;; profile) flags=(--profile 1) ;; esac
  case $head in
    chunk*) flags+=(--classifier_chunk "${head#chunk}") ;;
    tile*) flags+=(--classifier_tile "${head#tile}") ;;
    logits) flags+=(--classifier logits) ;;
  esac
  t=$(pcap 90)
  if [ "$t" -lt $((EMU == 1 ? 5 : 20)) ]; then RUN_WHY="not run: the time budget ran out"; return 1; fi
  echo "-- $id"
  # line-buffered output, each line stamped on arrival: the final evaluation's time is the gap
  # between the last step's line and the last val line (eval_every = the step count: one
  # evaluation before the first step, which also warms the evaluation up, one after the last)
  timeout -k 5 "$t" stdbuf -oL "$BUILD/train" --device cuda --pos "$pos" --n_layer "$L" --n_head "$H" \
    --n_embd "$C" --vocab_size "$V" --max_seq_len "$T" --batch_size "$B" --seq_len "$T" \
    --steps $((WARM + STEPS)) --lr "$LR" --schedule constant --eval_every $((WARM + STEPS)) --eval_batches "$EVAL" \
    --checkpoint_every 0 --sample_every 0 --precision "$prec" --train_data "$SHARD" --val_data "$SHARD" \
    "${flags[@]}" --run_dir "$dir" 2>&1 | while IFS= read -r l; do echo "$EPOCHREALTIME $l"; done >"$dir.out"
  local rc=${PIPESTATUS[0]}
  RUN=$("$PY" - "$dir" "$WARM" "$EVAL" "$B" "$T" "$V" 2>"$dir.fell" <<'EOF'
import json, math, re, statistics, sys
d, warm, nev, B, T, V = sys.argv[1], *map(int, sys.argv[2:])
lines = [l.rstrip("\n").split(" ", 1) for l in open(d + ".out")]
steps = []
try:
    steps = [r for r in map(json.loads, open(d + "/log.jsonl")) if r.get("type") == "train"]
except (OSError, ValueError):
    pass
train = steps[warm:]
if not train:
    sys.exit(1)
# any finite loss is not enough: a broken path learns nothing (the tokens are far from uniform)
first, last = steps[0]["loss"], train[-1]["loss"]
if not (last < math.log(V) and last < first):
    print(f"the loss did not fall: {first:.4f} at the first step, {last:.4f} at the last (ln V = {math.log(V):.4f})",
          file=sys.stderr)
    sys.exit(1)
ms = statistics.median(r["step_ms"] for r in train)
peak = next((m.group(1) for _, l in lines for m in [re.match(r"peak device memory: ([0-9.]+) MiB", l)] if m), "-")
last_step = [float(t) for t, l in lines if l.startswith("step ")]
val = [float(t) for t, l in lines if l.startswith("val |")]
ev = (val[-1] - last_step[-1]) * 1000 / nev if val and last_step and val[-1] > last_step[-1] else None
def hours(ms_step):
    s = ms_step * 10000 / 1000
    return f"{s / 3600:.2f} h" if s >= 3600 else f"{s / 60:.1f} min"
cells = [f"{ms:.1f}", f"{B * T / ms * 1000:,.0f}", peak, f"{ev:.1f}" if ev else "-", hours(ms),
         hours(ms + ev) if ev else "-", f"{train[-1]['loss']:.4f}"]
ph = [r["phase_ms"] for r in train if "phase_ms" in r]
if ph:
    cells += ["%.3f" % statistics.median(p[k] for p in ph) for k in ("head_loss", "attention", "rest", "adamw")]
    used = "-"
    for _, l in lines:
        m = re.search(r"device used at the end: ([0-9.]+) MiB", l)
        used = m.group(1) if m else used
    cells.append(used)
print("|".join(cells))
EOF
  )
  if [ $rc -ne 0 ] || [ -z "$RUN" ]; then
    RUN_WHY=$(sed 's/^[0-9.]* //' "$dir.out" | grep -m1 'error' || sed 's/^[0-9.]* //' "$dir.out" | tail -n 1)
    RUN_WHY="exit $rc: ${RUN_WHY}"
    [ $rc = 0 ] && [ -s "$dir.fell" ] && RUN_WHY=$(head -n 1 "$dir.fell")
    [ $rc = 124 ] && RUN_WHY="exit 124: timed out after $t s"
    # its output stays (the work folder goes at the end): train.out, each line stamped with the
    # time it came, and the trainer's log.jsonl
    mkdir -p "$OUT/failed/$id" && cp "$dir.out" "$OUT/failed/$id/train.out" &&
      { [ ! -f "$dir/log.jsonl" ] || cp "$dir/log.jsonl" "$OUT/failed/$id/"; } &&
      RUN_WHY+=" (output in failed/$id/)"
    RUN=""
    return 1
  fi
  echo "$RUN" >"$dir.stats"
  echo "   $RUN"
}

# bench_row SETTING POS PREC MODE: a run of SETTING (key:label:L:H:C) with the trainer's LM head;
# its row in bench.md, with MODE profile its phases in phases.md too (part bench_KEY_POS_PREC_MODE)
bench_row() {
  local key label L H C pos=$2 prec=$3 mode=$4
  IFS=: read -r key label L H C <<<"$1"
  local id="${key}_${pos}_${prec}_${mode}" name="bench_${key}_${pos}_${prec}_${mode}"
  carry "$name" && return
  if ! train_run "$id" "$L" "$H" "$C" "$pos" "$prec" "$mode"; then
    row bench.md "$name" "| $label | $pos | $prec | $mode | ${RUN_WHY%%:*} | | | | | | |"
    part "$name" fail "$RUN_WHY"
    return
  fi
  local r
  IFS='|' read -ra r <<<"$RUN"
  row bench.md "$name" "| $label | $pos | $prec | $mode | ${r[0]} | ${r[1]} | ${r[2]} | ${r[3]} | ${r[4]} | ${r[5]} | ${r[6]} |"
  if [ "$mode" = profile ]; then
    local sum
    sum=$(awk -v a="${r[7]}" -v b="${r[8]}" -v c="${r[9]}" -v d="${r[10]}" 'BEGIN { printf "%.2f", a + b + c + d }')
    row phases.md "$name" "| $id | ${r[7]} | ${r[8]} | ${r[9]} | ${r[10]} | $sum | ${r[11]} |"
  fi
  part "$name" pass
}

# ---------------------------------------------------------------- paper, 124M, profile
part_paper() {
  local prec pos
  for prec in bf16 fp32; do
    for pos in rope crope; do bench_row "$PAPER" $pos $prec graph; done
  done
}
run_part paper part_paper
part_gpt2() {
  local pos
  for pos in rope crope; do bench_row "$GPT2" $pos bf16 graph; done
}
run_part gpt2 part_gpt2
part_profile() {
  bench_row "$PAPER" rope bf16 profile
  bench_row "$PAPER" rope fp32 profile
  bench_row "$GPT2" rope bf16 profile
}
run_part profile part_profile

# ---------------------------------------------------------------- the LM head sweep
# At the paper setting, rope: each head configuration's step (graph) and, from a profiled run, the
# head's own time (its phase: the LM head GEMMs and the loss). bf16 first (the goal's precision):
# the fused head (the default: no logits in memory, five products on tensor cores), the logits
# head's default chunk, row chunks of 256 and 512 rows, whose bf16 logits (26 and 51 MB) can stay in the H200's 50 MB
# L2 cache from the GEMM through the loss to the backward GEMMs (each chunk adds a pass over wte
# and its gradient), the default chunk, all rows at once (the unfused path), vocabulary tiles (a
# tile of 1024 columns of all rows' bf16 logits is 32 MB; the forward GEMM runs twice); then fp32.
# Named by its runs: default (fused), logits (the chunk default), chunkN, tileN.
# The default configuration's runs are the paper and profile parts' own.
header_head() {
  echo "LM head sweep at the paper setting (rope, B*T = $((B * T)) rows, Vp = $VP): the step (graph) with each"
  echo "head, and the head's own time from a profiled run (the LM head + loss phase; eager, CUDA events)."
  echo "TFLOP/s: 6 N C Vp per step (tiles 8: the forward GEMM twice; fused 10: five products). GB/s: the"
  echo "logits' bytes moved (N Vp elements, 6 passes with row chunks: GEMM write, loss reads and write, two"
  echo "backward GEMM reads; 7 with tiles; none fused) plus wte's per chunk (3 reads, its fp32 gradient read"
  echo "and written; fused: the rows and wte 3 times, d x once), over the head's ms: past the HBM's 4.8 TB/s"
  echo "the logits stayed in the L2 cache."
  [ $EMU = 1 ] && echo "EMULATED: timings are not meaningful."
  echo
  echo "| LM head | precision | step ms (graph) | tokens/s | head ms | head TFLOP/s | head GB/s | loss (last) | note |"
  echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
}
# head_row PREC HEAD: the paper setting with HEAD (default, logits, chunkN or tileN), graph and profile
head_row() {
  local prec=$1 head=$2 key label L H C
  IFS=: read -r key label L H C <<<"$PAPER"
  local name="head_${prec}_$head" arg=$head what note=""
  [ "$head" = default ] && arg="" note="the default (--classifier auto)"
  [ "$head" = logits ] && note="the logits head's default (cuda/backend_cuda.h)"
  case $head in
    default) what="fused" ;;
    logits) what="chunk $DEFAULT_CHUNK" ;;
    chunk*) what="chunk ${head#chunk}" ;;
    tile*) what="tile ${head#tile}" ;;
  esac
  [ "${head#chunk}" = $((B * T)) ] && note="all rows at once"
  carry "$name" && return
  local tag=$([ "$head" = default ] || echo "_$head") g p
  if ! train_run "${key}_rope_${prec}_graph$tag" "$L" "$H" "$C" rope "$prec" graph "$arg"; then
    row head.md "$name" "| $what | $prec | ${RUN_WHY%%:*} | | | | | | $note |"
    part "$name" fail "$RUN_WHY"
    return
  fi
  IFS='|' read -ra g <<<"$RUN"
  if ! train_run "${key}_rope_${prec}_profile$tag" "$L" "$H" "$C" rope "$prec" profile "$arg"; then
    row head.md "$name" "| $what | $prec | ${g[0]} | ${g[1]} | ${RUN_WHY%%:*} | | | ${g[6]} | $note |"
    part "$name" fail "profile run: $RUN_WHY"
    return
  fi
  IFS='|' read -ra p <<<"$RUN"
  local rates
  rates=$(awk -v ms="${p[7]}" -v N=$((B * T)) -v C="$C" -v Vp=$VP -v e=$([ "$prec" = bf16 ] && echo 2 || echo 4) \
    -v head="$head" -v chunk="$DEFAULT_CHUNK" 'BEGIN {
      tile = head ~ /^tile/
      if (head ~ /^chunk/) chunk = substr(head, 6) + 0
      chunks = tile ? 1 : int((N + chunk - 1) / chunk)
      flop = (tile ? 8 : 6) * N * C * Vp
      bytes = (tile ? 7 : 6) * N * Vp * e + chunks * Vp * C * (3 * e + 8)
      if (head == "default") { flop = 10 * N * C * Vp; bytes = 3 * (N + Vp) * C * e + N * C * e + Vp * C * 8 }
      if (ms > 0) printf "%.1f %.0f", flop / ms / 1e9, bytes / ms / 1e6; else printf "- -" }')
  row head.md "$name" "| $what | $prec | ${g[0]} | ${g[1]} | ${p[7]} | ${rates% *} | ${rates#* } | ${g[6]} | $note |"
  part "$name" pass
}
# The fastest measured head of each precision, and how to make it the default.
fastest_head() {
  "$PY" - "$OUT/head.md" "$EMU" <<'EOF'
import sys
rows = [[x.strip() for x in l.strip().strip("|").split("|")] for l in open(sys.argv[1]) if l.startswith("| ")]
rows = [r for r in rows if len(r) == 9 and r[0] != "LM head" and not r[0].startswith("---")]
def tps(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return None
print()
if sys.argv[2] == "1":
    print("Fastest head: none (emulated timings are not meaningful; the default stays).")
    sys.exit(0)
for prec in ("bf16", "fp32"):
    got = [(tps(r[3]), r[0], r[8]) for r in rows if r[1] == prec and tps(r[3])]
    if not got:
        continue
    best, what, note = max(got)
    default = next((t for t, w, n in got if n.startswith("the default")), None)
    vs = f"; the default: {default:,.0f}" if default else ""
    if note.startswith("the default"):
        print(f"Fastest {prec} head: {what}, the default ({best:,.0f} tokens/s).")
    elif what.startswith("chunk"):
        print(f"Fastest {prec} head: {what} ({best:,.0f} tokens/s{vs}). To make it the default: --classifier "
              f"logits (auto's choice in src/train.cpp) and `static constexpr int classifier_chunk = "
              f"{what.split()[1]};` in cuda/backend_cuda.h (CudaBackend).")
    else:
        print(f"Fastest {prec} head: {what} ({best:,.0f} tokens/s{vs}). To make it the default: "
              f"--classifier_tile {what.split()[1]} (configs/paper.json, or a device default beside "
              f"classifier_chunk in cuda/backend_cuda.h that src/activations.h reads).")
EOF
}
part_head() {
  local heads_bf16 heads_fp32 h
  if [ $EMU = 1 ]; then heads_bf16="default logits chunk16 tile128" heads_fp32="default logits tile128"
  else heads_bf16="default logits chunk256 chunk512 chunk$((B * T)) tile1024 tile4096" heads_fp32="default logits tile1024"; fi
  for h in $heads_bf16; do head_row bf16 "$h"; done
  for h in $heads_fp32; do head_row fp32 "$h"; done
  [ -s "$OUT/head.md" ] && fastest_head | tee -a "$OUT/head.md"
}
run_part head part_head

# ---------------------------------------------------------------- compute-sanitizer
# Kernel tests on small shapes only: the sanitizer slows a kernel 10-100x, so no model test.
SAN_SUBSET="cuda_encoder_backward cuda_layernorm cuda_rope cuda_crope cuda_attention_forward cuda_attention_backward
  cuda_gelu cuda_softmax_crossentropy cuda_adamw_update cuda_sum_squares cuda_bf16_layernorm cuda_bf16_matmul"
SAN_FLASH="cuda_flash_forward_backward cuda_flash_head_sizes"  # test_cuda_flash: every head size, small shapes
# Not under racecheck (shared-memory hazards): the tests of the cuBLAS paths, whose own kernels (the
# causal softmax) keep nothing in shared memory; racecheck would instrument only cuBLAS there
SAN_NO_RACE="cuda_attention_forward cuda_attention_backward cuda_bf16_matmul"
part_sanitizer() {
  local tool prog names rc filter
  for tool in memcheck racecheck; do
    if [ $EMU = 1 ]; then part "sanitizer_$tool" skip "emulated (the emulation has its own checks)"; continue; fi
    if [ -z "$SANITIZER" ]; then part "sanitizer_$tool" skip "compute-sanitizer not found"; continue; fi
    carry "sanitizer_$tool" && continue
    if [ "$(pcap 60)" -lt 10 ]; then part "sanitizer_$tool" fail "not run: the time budget ran out"; continue; fi
    # the listed tests of test_cuda and test_cuda_bf16, then the flash kernels (shared-memory
    # tiles; fp32, and the tf32 and bf16 tensor-core ones) at every head size
    : >"$OUT/$tool.log"
    rc=0 filter=()
    [ $tool = racecheck ] && filter=("${SAN_FILTER[@]}")
    for prog in test_cuda test_cuda_bf16 test_cuda_flash; do
      case $prog in
        test_cuda_flash) names=$SAN_FLASH ;;
        test_cuda_bf16) names=$(tr ' ' '\n' <<<"$SAN_SUBSET" | grep '^cuda_bf16_') ;;
        *) names=$(tr ' ' '\n' <<<"$SAN_SUBSET" | grep '^cuda_' | grep -v '^cuda_bf16_') ;;
      esac
      [ $tool = racecheck ] && names=$(grep -vxF -f <(tr ' ' '\n' <<<"$SAN_NO_RACE") <<<"$names")
      # shellcheck disable=SC2086
      timeout -k 5 "$(pcap 40)" "$SANITIZER" --tool $tool "${filter[@]}" --error-exitcode 99 --print-limit 20 \
        "$BUILD/test/$prog" $names >>"$OUT/$tool.log" 2>&1
      rc=$?
      [ $rc = 0 ] || break
    done
    grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^FAIL ' "$OUT/$tool.log" | head -n 5
    if [ $rc = 0 ]; then part "sanitizer_$tool" pass
    elif [ $rc = 124 ]; then part "sanitizer_$tool" fail "timed out in $prog (see $tool.log)"
    else part "sanitizer_$tool" fail "exit $rc in $prog (see $tool.log)"; fi
  done
}
run_part sanitizer part_sanitizer

# ---------------------------------------------------------------- data parallel (NCCL)
# test/test_dist.sh --device: one rank under mpirun runs every NCCL call (all-reduce, ZeRO-1's
# reduce-scatter and all-gather) and must log the plain run's losses bit for bit; with several
# GPUs, 2, 4 or 8 ranks agree with it to rounding.
# nccl_linked BIN: BIN links NCCL (the Makefile builds it in only with MPI and nccl.h; otherwise
# the trainer has no NCCL path to check)
nccl_linked() { ldd "$1" 2>/dev/null | grep -q 'libnccl\.so'; }
part_dist() {
  if [ $EMU = 1 ]; then part nccl skip "emulated: make test runs test/test_dist.sh (NCCL emulated over MPI)"; return; fi
  if ! nccl_linked "$BUILD/train"; then
    part nccl skip "$BUILD/train is built without NCCL (${NCCL_WHY:-make did not link it; see build.log})"
    return
  fi
  if ! command -v mpirun >/dev/null; then part nccl skip "mpirun not found (openmpi-bin, libopenmpi-dev; then rebuild)"; return; fi
  carry nccl && return
  TRAIN="$BUILD/train" PYTHON="$PY" timeout -k 5 "$(pcap 120)" bash test/test_dist.sh --device >"$OUT/dist.log" 2>&1
  local dp df
  dp=$(grep -c '^PASS ' "$OUT/dist.log") df=$(grep -c '^FAIL ' "$OUT/dist.log")
  if [ "$df" -gt 0 ] || [ "$dp" -eq 0 ]; then part nccl fail "$dp passed, $df failed (see dist.log)"
  else part nccl pass; fi
}
run_part dist part_dist

# ---------------------------------------------------------------- the other benchmark rows
# learned positions, ALiBi (its bias inside the attention kernels), 124M in fp32 and with learned
# positions, and what the graph gains (the same step launched op by op)
part_rest() {
  local prec pos
  for prec in bf16 fp32; do bench_row "$PAPER" learned $prec graph; done
  bench_row "$PAPER" alibi bf16 graph
  bench_row "$GPT2" learned bf16 graph
  for pos in learned rope crope; do bench_row "$GPT2" $pos fp32 graph; done
  for prec in bf16 fp32; do bench_row "$PAPER" rope $prec eager; done
  bench_row "$GPT2" rope bf16 eager
}
run_part rest part_rest

# ---------------------------------------------------------------- PyTorch (optional)
header_torch() {
  echo "PyTorch $TORCH_VERSION at the paper's setting (scripts/torch_reference.py, TF32):"
  echo
  echo "| mode | pos | ms/step | tokens/s | peak MiB |"
  echo "| --- | --- | ---: | ---: | ---: |"
}
part_torch() {
  if [ $TORCH = 0 ]; then part torch skip "$([ $EMU = 1 ] && echo emulated || echo 'no torch with CUDA') (optional)"; return; fi
  carry torch && return
  local mode pos line r
  for mode in eager compile; do
    for pos in learned rope crope; do
      # torch.compile only while 2 minutes are left
      if [ "$(left)" -lt $([ $mode = compile ] && echo 120 || echo 40) ]; then
        row torch.md torch "| $mode | $pos | skipped (time budget) | | |"
        continue
      fi
      line=$(timeout -k 5 "$(pcap 100)" "$PY" scripts/torch_reference.py --pos $pos \
        $([ $mode = compile ] && echo --compile) --steps 20 --warmup 5 2>"$WORK/torch.err" | tail -n 1)
      r=$("$PY" -c 'import json, sys
r = json.loads(sys.argv[1])
print("%.1f | %.0f | %.0f" % (r["ms_per_step"], r["tokens_per_s"], r["peak_mem_mib"]))' "$line" 2>/dev/null) ||
        r="failed: $(tail -n 1 "$WORK/torch.err") | |"
      row torch.md torch "| $mode | $pos | $r |"
      echo "| $mode | $pos | $r |"
    done
  done
  part torch pass
}
run_part torch part_torch

# ---------------------------------------------------------------- kernel lab (optional)
# Every program of test/lab/ (attention, classifier, layernorm, adamw): each version checked
# against the CPU, then timed at the paper's shapes (C=128: H=4 D=32, L=4) and GPT-2 124M's
# (C=768: H=12 D=64, L=12), B=16 T=1024 (N=16384 rows), V=50257; TFLOP/s or GB/s per version,
# so the first GPU run tells which version to keep. Reference point: FlashAttention-2 runs the
# causal forward at about 230 TFLOP/s on an H100 (D=64, T=1024, bf16).
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
header_lab() {
  echo "Kernel lab (test/lab/*.cu; median of 20 runs after 3 warm-ups; attention FLOPs count the causal half):"
  echo
}
part_lab() {
  local lab_make run prog label args t rc
  if [ $EMU = 1 ]; then lab_make="BUILD=$BASE EMU_BUILD=$BUILD lab-emu"
  else lab_make="BUILD=$BUILD NVCC=$NVCC $(printf '%s\n' "${LAB_RUNS[@]}" | cut -d' ' -f1 | sort -u | sed "s|^|$BUILD/lab/|")"; fi
  # shellcheck disable=SC2086
  if ! env ${CC_FLAGS:+"NVCCFLAGS=$CC_FLAGS"} timeout -k 5 "$(pcap 150)" make -j"$(nproc)" $lab_make >>"$OUT/build.log" 2>&1; then
    part lab fail "make lab failed (see build.log)"
    return
  fi
  for run in "${LAB_RUNS[@]}"; do
    read -r prog label args <<<"$run"
    carry "lab_${prog}_$label" && continue
    t=$(pcap 60)
    if [ "$t" -lt 10 ]; then part "lab_${prog}_$label" fail "not run: the time budget ran out"; continue; fi
    row lab.md "lab_${prog}_$label" "    $prog, $label:"
    # shellcheck disable=SC2086
    timeout -k 5 "$t" "$BUILD/lab/$prog" $args >"$WORK/lab.out" 2>&1
    rc=$?
    while IFS= read -r line; do row lab.md "lab_${prog}_$label" "    $line"; done <"$WORK/lab.out"
    sed 's/^/    /' "$WORK/lab.out"
    if [ "$rc" = 0 ]; then part "lab_${prog}_$label" pass
    elif [ "$rc" = 124 ]; then part "lab_${prog}_$label" fail "timed out after $t s"
    else part "lab_${prog}_$label" fail "exit $rc"; fi
  done
}
run_part lab part_lab

# ---------------------------------------------------------------- the paper grid (--paper-grid)
part_grid() {
  if [ $EMU = 1 ]; then
    part paper_grid skip "emulated: the paper's runs need a GPU (test/test_paper_grid.sh runs the script on the CPU)"
    return
  fi
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
}
[ $GRID = 1 ] && run_part grid part_grid
exit 0
