# cuBLAS loaded on first use (cuda/matmul.cu): a program built with the CUDA backend starts without
# it, and the first GEMM loads it, or says in one error: line that it cannot.
# - The nvcc build (build/): train and sample do not link it, and --help, --list-pos, sample
#   --help and a 2-step --device cpu run load no libcublas (LD_DEBUG's list of the files the loader
#   opens; the C library must be in it, so the list is read right); the
#   names the loader asks for are exported by the toolkit's cuBLAS, where it is installed.
#   SKIPPED without the nvcc build.
# - The emulated build (build_emu/), whose cuBLAS stand-in is a library loaded by the same code:
#   --list-pos and a --device cpu run load none; a --device cuda run loads it once, by dlopen, and
#   trains; copied away from its stand-in onto a machine without cuBLAS (the dynamic loader told
#   to ignore its cache, where the toolkit's cuBLAS may be), a missing library, an empty file in its
#   place, and a library without the entry points each end the run with one error: line naming it.
#   What only a GPU shows: that the toolkit's cuBLAS, once loaded, runs the GEMMs as before (the
#   calls are the same; test_cuda* check their results against the CPU under the emulation).
source test/testlib.sh
TRAIN=${TRAIN:-${BUILD:-build}/train}
SAMPLE=${SAMPLE:-${BUILD:-build}/sample}
EMU_TRAIN=${EMU_TRAIN:-${EMU_BUILD:-${BUILD:-build}_emu}/train}
PYTHON=${PYTHON:-python3}
scratch

pattern_shards "$tmp" 1 0.2 32 4000 tr:0:3000 va:3000:
tiny=(--train_data "$tmp/tr_000000.bin" --val_data "$tmp/va_000000.bin" --n_layer 1 --n_head 2 --n_embd 16
  --vocab_size 32 --max_seq_len 16 --seq_len 16 --batch_size 2 --steps 2 --eval_every 0 --checkpoint_every 0)

# opened NAME CMD...: runs CMD with the dynamic loader's list of the files it opens; $out holds
# CMD's output and $libs that list, one "file=NAME [...]; needed by|dynamically loaded by ..." a line
opened() {
  local name=$1; shift
  rm -f "$tmp"/ld.*
  out=$(LD_DEBUG=files LD_DEBUG_OUTPUT="$tmp/ld" "$@" 2>&1) || { fail "$name" "exit $?: $(tail -c 300 <<<"$out")"; return 1; }
  libs=$(cat "$tmp"/ld.* 2>/dev/null | grep -o 'file=[^ ]* .*\(needed\|loaded\) by.*' | sort -u)
}
# no_cublas NAME CMD...: CMD opens no libcublas (and the C library: the list was read right)
no_cublas() {
  local name=$1; shift
  opened "$name" "$@" || return
  if ! grep -q 'file=libc\.so' <<<"$libs"; then fail "$name" "the C library not among the files opened: $(head -c 300 <<<"$libs")"
  elif grep -q 'libcublas' <<<"$libs"; then fail "$name" "$(grep libcublas <<<"$libs" | head -2)"
  else pass "$name"; fi
}

# ---- the nvcc build ----
if [ -x "$TRAIN" ] && readelf -d "$TRAIN" | grep -q 'NEEDED.*libcudart'; then
  for bin in "$TRAIN" "$SAMPLE"; do
    if readelf -d "$bin" | grep -q 'NEEDED.*libcublas'; then fail "startup_links_no_cublas_${bin##*/}" "$bin links it"
    else pass "startup_links_no_cublas_${bin##*/}"; fi
  done
  no_cublas startup_train_help "$TRAIN" --help
  no_cublas startup_train_list_pos "$TRAIN" --list-pos
  no_cublas startup_sample_help "$SAMPLE" --help
  no_cublas startup_train_device_cpu "$TRAIN" "${tiny[@]}" --device cpu --run_dir "$tmp/cpu"
  # the names the backend asks dlsym for (its string literals) against what the toolkit's cuBLAS
  # exports, in the folder of the program's runpath
  names=$(strings "$TRAIN" | grep -x 'cublas[A-Z][A-Za-z_0-9]*' | sort -u)
  lib=$(readelf -d "$TRAIN" | sed -n 's/.*R.*PATH.*\[\(.*\)\]/\1/p' | tr ':' '\n' | while read -r d; do ls "$d"/libcublas.so.[0-9]* 2>/dev/null; done | head -1)
  if [ -z "$lib" ]; then skip startup_cublas_exports "no libcublas.so.N in the runpath of $TRAIN"
  elif ! grep -qx cublasGemmEx <<<"$names"; then fail startup_cublas_exports "no cublasGemmEx among the names in $TRAIN: $names"
  else
    missing=$(comm -23 <(echo "$names") <(nm -D --defined-only "$lib" | awk '{sub(/@.*/, "", $3); print $3}' | sort -u))
    if [ -n "$missing" ]; then fail startup_cublas_exports "$lib lacks: $missing"; else pass startup_cublas_exports; fi
  fi
else
  skip startup_nvcc_build "$TRAIN is not a build with the CUDA backend (nvcc)"
fi

# ---- the emulated build ----
needs_built emu_startup "$EMU_TRAIN"
no_cublas emu_startup_list_pos "$EMU_TRAIN" --list-pos
no_cublas emu_startup_device_cpu "$EMU_TRAIN" "${tiny[@]}" --device cpu --run_dir "$tmp/emu_cpu"
if opened emu_first_gemm_loads_cublas "$EMU_TRAIN" "${tiny[@]}" --device cuda --run_dir "$tmp/emu_cuda"; then
  n=$(grep -c 'file=libcublas.* dynamically loaded by' <<<"$libs")
  steps=$(grep -c '"type":"train"' "$tmp/emu_cuda/log.jsonl")
  if [ "$n" -ne 1 ] || grep -q 'file=libcublas.*needed by' <<<"$libs" || [ "$steps" -ne 2 ]; then
    fail emu_first_gemm_loads_cublas "loaded by dlopen $n times, $steps steps logged: $(grep libcublas <<<"$libs")"
  else pass emu_first_gemm_loads_cublas; fi
fi

# The program alone in $tmp/bin, run by the dynamic loader without its cache: no cuBLAS anywhere
# it looks, unless LD_LIBRARY_PATH names one (unset) or the system folders hold one.
ldso=$(readelf -l "$EMU_TRAIN" | sed -n 's/.*interpreter: \([^]]*\)\]/\1/p')
mkdir -p "$tmp/bin/cuda_emu"
cp "$EMU_TRAIN" "$tmp/bin/train"
nocache() { env -u LD_LIBRARY_PATH GOMP_SPINCOUNT=1000 "$ldso" --inhibit-cache "$tmp/bin/train" "${tiny[@]}" --device cuda --run_dir "$tmp/run_$1"; }
# one_error NAME PATTERN: the run without its library exits 1 with one error: line, matching PATTERN
one_error() {
  local out rc
  out=$(nocache "$1" 2>&1); rc=$?
  if [ $rc -ne 1 ] || [ "$(grep -c '^error:' <<<"$out")" -ne 1 ] || ! grep -qE "^error: $2" <<<"$out"; then
    fail "$1" "exit $rc, expected one line matching 'error: $2': $(grep -v '^#' <<<"$out" | tail -c 400)"
  else pass "$1"; fi
}
soname=$(for f in "${EMU_TRAIN%/*}"/cuda_emu/libcublas.so.[0-9]*; do [ -f "$f" ] && echo "${f##*/}"; done)
[ -n "$soname" ] || { fail emu_cublas "no libcublas.so.N in ${EMU_TRAIN%/*}/cuda_emu"; finish; }
install="install it or add its folder to LD_LIBRARY_PATH"
if ls /lib*/libcublas.so* /usr/lib*/libcublas.so* /lib/*/libcublas.so* /usr/lib/*/libcublas.so* >/dev/null 2>&1; then
  skip emu_cublas_missing "a libcublas in the system folders, which the loader reads without its cache"
else
  one_error emu_cublas_missing "cannot load cuBLAS: $soname: cannot open shared object file.*$install"
fi
: >"$tmp/bin/cuda_emu/$soname"
one_error emu_cublas_empty_file "cannot load cuBLAS: .*$soname: file too short.*$install"
libm=$(ldd "$EMU_TRAIN" | awk '$1 ~ /^libm\.so/ {print $3}')
cp "$libm" "$tmp/bin/cuda_emu/$soname"
one_error emu_cublas_no_entry_points "cannot load cuBLAS: $soname has no cublasCreate_v2 \(a broken or other installation\).*$install"
finish
