#!/usr/bin/env bash
# Installs the Debian packages the build, the tests and the scripts need,
# only those missing. The CUDA toolkit is not a Debian package here: the
# Makefile builds the CUDA backend when it finds nvcc (/usr/local/cuda).
# strace: test_retention.sh kills the trainer at each call that changes its run folder.
# clang, libclang-rt-dev: libFuzzer and the sanitizers of the readers' fuzz targets (make fuzz;
# make test replays their inputs); python3-hypothesis: the Python readers' property tests.
#   --with-torch  also python3-torch, the PyTorch reference test_torch_reference
#                 compares the trainer with (CI passes it; without it that test is SKIPPED)
set -e
pkgs="g++ make libopenblas-openmp-dev libsleef-dev nlohmann-json3-dev libicu-dev libopenmpi-dev openmpi-bin python3 python3-numpy python3-regex python3-matplotlib python3-scipy strace clang libclang-rt-dev python3-hypothesis"
for a in "$@"; do
  case "$a" in
    --with-torch) pkgs="$pkgs python3-torch" ;;
    *) echo "error: unknown option '$a' (usage: scripts/install_deps.sh [--with-torch])" >&2; exit 1 ;;
  esac
done
missing=""
for p in $pkgs; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing Debian packages:$missing"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing
