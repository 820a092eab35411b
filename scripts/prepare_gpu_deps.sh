#!/usr/bin/env bash
# Copies the header-only dependency (nlohmann/json) into .gpu_deps/include (ignored
# by git) so that it can travel to a GPU machine that cannot install Debian packages;
# scripts/gpu_check.sh adds it to the include path. OpenBLAS is not needed there:
# without cblas.h the CPU reference backend uses its plain-loop GEMM.
set -e
cd "$(dirname "$0")/.."
src=/usr/include/nlohmann
[ -f $src/json.hpp ] || { echo "error: $src/json.hpp not found (apt-get install nlohmann-json3-dev)" >&2; exit 1; }
rm -rf .gpu_deps && mkdir -p .gpu_deps/include
cp -r $src .gpu_deps/include/
echo "wrote .gpu_deps/include/nlohmann; carry .gpu_deps to the GPU machine"
