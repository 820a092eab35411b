#!/usr/bin/env bash
# Register use of every kernel of cuda/*.cu in the real sm_90 build: each file compiled for the
# device only (nvcc -cubin -arch=sm_90 -Xptxas -v, the Makefile's -O3), ptxas's report per kernel
# as one table (registers, stack frame, spill stores and loads; the fullest first). Fails, naming
# the kernels, if any kernel spills or uses more than MAX registers (default 240: 15 under the
# hardware's 255, room for a compiler update). Needs nvcc, not a GPU; with --build, not even that.
#
# usage: scripts/check_spills.sh [--max-regs N] [--out FILE] [--build DIR] [FILE.cu...]
#   FILE.cu...    the files to check (default cuda/*.cu)
#   --max-regs N  the most registers a kernel may use (1..255; default 240)
#   --out FILE    also write the table (Markdown) to FILE
#   --build DIR   compile nothing: read the reports the build made with nvcc (DIR/cuda/NAME.o.ptxas,
#                 its sm_90 part: the same ptxas on the same code as the build runs)
# Environment: NVCC (default /usr/local/cuda/bin/nvcc, else nvcc on PATH), NVCC_DEFINES (extra
# -D flags; default -DHAVE_NCCL where the toolkit has nccl.h, as the Makefile builds).
set -u
cd "$(dirname "$0")/.." || exit 2
die() { echo "error: $*" >&2; exit 2; }

MAX=240 OUT="" FROM="" FILES=()
while [ $# -gt 0 ]; do
  case $1 in
    --max-regs) [ $# -ge 2 ] || die "--max-regs needs a number"; MAX=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a file"; OUT=$2; shift 2 ;;
    --build) [ $# -ge 2 ] || die "--build needs a build folder"; FROM=$2; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown argument '$1' (see --help)" ;;
    *) [ -f "$1" ] || die "no such file: $1"; FILES+=("$1"); shift ;;
  esac
done
[[ $MAX =~ ^[0-9]+$ ]] && [ "$MAX" -ge 1 ] && [ "$MAX" -le 255 ] || die "--max-regs must be 1..255, got '$MAX'"
[ ${#FILES[@]} -gt 0 ] || FILES=(cuda/*.cu)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
logs=()
if [ -n "$FROM" ]; then
  for f in "${FILES[@]}"; do
    log=$FROM/cuda/$(basename "$f" .cu).o.ptxas
    [ -f "$log" ] || die "no ptxas report $log (build $f with nvcc first: make)"
    [ "$log" -nt "$f" ] || die "$log is older than $f (make rebuilds it)"
    logs+=("$log")
  done
else
  NVCC=${NVCC:-$(command -v /usr/local/cuda/bin/nvcc || command -v nvcc || true)}
  [ -n "$NVCC" ] || die "nvcc not found (set NVCC, or install the CUDA toolkit)"
  home=$(dirname "$(dirname "$NVCC")")
  NVCC_DEFINES=${NVCC_DEFINES-$([ -f "$home/include/nccl.h" ] && echo -DHAVE_NCCL)}
  # every file at once, one per core: ptxas's report of each into its own log
  export NVCC NVCC_DEFINES work
  i=0
  for f in "${FILES[@]}"; do echo "$i $f"; i=$((i + 1)); done |
    xargs -P "$(nproc 2>/dev/null || echo 2)" -L 1 sh -c '
      "$NVCC" -O3 -arch=sm_90 -std=c++17 -Isrc -Icuda $NVCC_DEFINES -cubin -Xptxas -v "$2" -o "$work/$1.cubin" \
        >"$work/$1.log" 2>&1 || echo "$2" >>"$work/failed"' sh
  if [ -s "$work/failed" ]; then
    for f in $(cat "$work/failed"); do echo "error: $f does not compile for sm_90:"; done >&2
    cat "$work"/*.log | grep -m 5 -i 'error' >&2
    exit 2
  fi
  logs=("$work"/*.log)
fi

# ptxas -v, per kernel: "Compiling entry function 'NAME' for 'sm_90'", then "N bytes stack frame,
# N bytes spill stores, N bytes spill loads" and "Used N registers"; the build's other archs skipped
python3 - "$MAX" "$OUT" "${logs[@]}" <<'EOF'
import re, subprocess, sys
limit, out, logs = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
rows, cur = {}, None
for path in logs:
    for line in open(path, errors="replace"):
        m = re.search(r"Compiling entry function '([^']+)' for '(\w+)'", line)
        if m:
            cur = m.group(1) if m.group(2) == "sm_90" else None
            if cur:
                rows[cur] = [0, 0, 0, 0]
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            rows[cur][1:] = map(int, m.groups())
        m = re.search(r"Used (\d+) registers", line)
        if m:
            rows[cur][0] = int(m.group(1))
if not rows:
    sys.exit("error: ptxas reported no kernel (no 'Compiling entry function' lines)")
names = list(rows)
demangled = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
short = {}
for n, d in zip(names, demangled):
    d = re.sub(r"gpu::\(anonymous namespace\)::|gpu::", "", d or n)
    short[n] = re.sub(r"^void |\(.*$", "", d)
lines = ["| kernel (sm_90) | registers | stack frame | spill stores | spill loads |", "| --- | ---: | ---: | ---: | ---: |"]
for n in sorted(rows, key=lambda n: (-rows[n][0], short[n])):
    r = rows[n]
    lines.append(f"| {short[n]} | {r[0]} | {r[1]} | {r[2]} | {r[3]} |")
table = "\n".join(lines)
print(table)
if out:
    open(out, "w").write(table + "\n")
bad = [f"{short[n]} spills ({rows[n][2]} bytes stored, {rows[n][3]} loaded)" for n in rows if rows[n][2] or rows[n][3]]
bad += [f"{short[n]} uses {rows[n][0]} registers (over {limit})" for n in rows if rows[n][0] > limit]
print()
if bad:
    print("FAILED: " + "; ".join(bad))
    sys.exit(1)
print(f"{len(rows)} kernels: no spills, at most {max(r[0] for r in rows.values())} registers (limit {limit})")
EOF
