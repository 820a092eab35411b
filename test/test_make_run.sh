# make run builds what it runs (make cpu): the trainer and the sampler into build_cpu/, never the
# CUDA backend when its config (configs/synthetic.json) does not ask for --device cuda, even where
# nvcc is found; plain make still builds the CUDA backend there; make help lists the targets. Dry
# runs (make -n) into a scratch build folder, with a stand-in nvcc path: nothing is compiled.
source test/testlib.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nvcc=$tmp/cuda/bin/nvcc   # never run: make -n only prints the commands

out=$(make -n --no-print-directory run BUILD="$tmp/b" NVCC="$nvcc" 2>&1)
if grep -q -- "-c src/train.cpp -o $tmp/b_cpu/src/train.o" <<<"$out" && grep -q "TRAIN=$tmp/b_cpu/train SAMPLE=$tmp/b_cpu/sample" <<<"$out" &&
  ! grep -q "$nvcc" <<<"$out" && ! grep -q "HAVE_CUDA" <<<"$out" && ! grep -q "test/test_" <<<"$out"; then
  pass make_run_no_nvcc
else fail make_run_no_nvcc "$(grep -m3 -e "$nvcc" -e HAVE_CUDA -e test/test_ <<<"$out" || tail -c 300 <<<"$out")"; fi
grep -q '"device": "cpu"' configs/synthetic.json && pass synthetic_config_on_cpu ||
  fail synthetic_config_on_cpu "configs/synthetic.json does not say device cpu"

# without nvcc too: the same folder, so make run, make cpu and the CPU recipe share one name
out=$(make -n --no-print-directory run BUILD="$tmp/b" NVCC= 2>&1)
if grep -q -- "-c src/sample.cpp -o $tmp/b_cpu/src/sample.o" <<<"$out" && grep -q "TRAIN=$tmp/b_cpu/train" <<<"$out"; then
  pass make_run_without_nvcc_uses_build_cpu
else fail make_run_without_nvcc_uses_build_cpu "$(tail -c 300 <<<"$out")"; fi
# the trainer built by make cpu knows the backend was left out on purpose (CUDA_LEFT_OUT), one
# built where no nvcc was found does not; of the build folder it shares only the library objects
out=$(make -n --no-print-directory cpu BUILD="$tmp/b" NVCC="$nvcc" 2>&1)
if grep -q -- "-DCUDA_LEFT_OUT.* -c src/train.cpp -o $tmp/b_cpu/src/train.o" <<<"$out" && ! grep -q "$nvcc" <<<"$out" &&
  ! grep -q HAVE_CUDA <<<"$out" && ! grep -- "-o $tmp/b/" <<<"$out" | grep -qv -- "-c src/[a-z_0-9]*\.cpp -o $tmp/b/src/" &&
  ! grep -q -- "-c src/train.cpp -o $tmp/b/" <<<"$out"; then pass make_cpu_left_out_on_purpose
else fail make_cpu_left_out_on_purpose "$(grep -m2 -e src/train.cpp -e "$nvcc" -e HAVE_CUDA <<<"$out" || tail -c 300 <<<"$out")"; fi
# which is sound while no file of src/ but the mains and src/backend.h (the backend choice, which
# only the mains include) names the backend's macros
named=$(grep -l 'HAVE_CUDA\|CUDA_LEFT_OUT' src/*.cpp src/*.h src/*/* 2>/dev/null |
  grep -v '^src/\(train\|sample\)\.cpp$\|^src/backend\.h$')
includers=$(grep -l '#include "backend\.h"' src/*.cpp src/*.h src/*/* 2>/dev/null | grep -v '^src/\(train\|sample\)\.cpp$')
if [ -z "$named$includers" ]; then pass library_objects_backend_free
else fail library_objects_backend_free "the library objects are shared by both builds, but $named names HAVE_CUDA or CUDA_LEFT_OUT, or $includers includes src/backend.h"; fi

out=$(make -n --no-print-directory all BUILD="$tmp/b" NVCC="$nvcc" 2>&1)
# (make all also makes build_cpu/, whose objects alone say CUDA_LEFT_OUT)
if grep -q "^$nvcc .* -c cuda/.*\.cu -o $tmp/b/cuda/" <<<"$out" && ! grep -- "-o $tmp/b/" <<<"$out" | grep -q CUDA_LEFT_OUT &&
  grep -q -- "-DCUDA_LEFT_OUT.* -o $tmp/b_cpu/src/train.o" <<<"$out"; then
  pass make_all_builds_cuda_with_nvcc
else fail make_all_builds_cuda_with_nvcc "no nvcc command, or CUDA_LEFT_OUT, in: $(head -c 300 <<<"$out")"; fi

out=$(make --no-print-directory help 2>&1)
if grep -q "^  make run  " <<<"$out" && grep -q "^  make cpu  " <<<"$out" && grep -q "^  make help  " <<<"$out" && grep -q "^  make test  " <<<"$out" &&
  ! grep -q "^#" <<<"$out"; then pass make_help
else fail make_help "$(head -c 300 <<<"$out")"; fi

finish
