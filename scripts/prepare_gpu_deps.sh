#!/usr/bin/env bash
# Puts the one header-only dependency, nlohmann/json, into .gpu_deps/include (ignored by git),
# for a machine without Debian's package (a GPU machine with no root or no apt): the Makefile and
# scripts/gpu_check.sh add that folder to the include path. Run it on that machine, or where the
# header is and copy .gpu_deps/ along. The header comes from the first of these that works:
#   1. $SYSTEM_INCLUDE/nlohmann (default /usr/include: nlohmann-json3-dev is installed)
#   2. that package downloaded and unpacked, not installed (apt-get download, dpkg-deb -x: no root)
#   3. json.hpp of the release JSON_VERSION below (one header holding the library), with curl or
#      wget, checked against JSON_SHA256
# OpenBLAS is not needed there: without cblas.h the CPU reference backend uses its plain-loop GEMM.
#   scripts/prepare_gpu_deps.sh [DIR]   (DIR default .gpu_deps; the header goes to DIR/include)
set -u
JSON_VERSION=3.11.3
JSON_URL=https://github.com/nlohmann/json/releases/download/v$JSON_VERSION/json.hpp
JSON_SHA256=9bea4c8066ef4a1c206b2be5a36302f8926f7fdc6087af5d20b417d0cf103ea6
dest=${1:-$(dirname "$0")/../.gpu_deps}
mkdir -p "$dest" && dest=$(cd "$dest" && pwd) || exit 1
sys=${SYSTEM_INCLUDE:-/usr/include}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
why=()  # why each source failed, for the one error line

# take DIR WHERE: DIR's nlohmann/ (from WHERE) becomes dest/include/nlohmann
take() {
  rm -rf "$dest/include" && mkdir -p "$dest/include" && cp -r "$1/nlohmann" "$dest/include/" || exit 1
  echo "wrote $dest/include/nlohmann (from $2); copy $dest along with the repository to the GPU machine"
  exit 0
}

if [ -f "$sys/nlohmann/json.hpp" ]; then take "$sys" "$sys/nlohmann"; fi
why+=("not in $sys/nlohmann")

if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
  why+=("no apt-get or dpkg-deb")
elif ! (cd "$tmp" && timeout 120 apt-get download nlohmann-json3-dev) >"$tmp/apt.log" 2>&1; then
  why+=("apt-get download nlohmann-json3-dev failed: $(grep -m1 -E '^(E|W):' "$tmp/apt.log" || tail -n 1 "$tmp/apt.log")")
elif ! dpkg-deb -x "$tmp"/nlohmann-json3-dev_*.deb "$tmp/deb" 2>"$tmp/dpkg.log" ||
  [ ! -f "$tmp/deb/usr/include/nlohmann/json.hpp" ]; then
  why+=("the downloaded nlohmann-json3-dev has no usr/include/nlohmann/json.hpp ($(head -n 1 "$tmp/dpkg.log"))")
else
  take "$tmp/deb/usr/include" "Debian's nlohmann-json3-dev, unpacked"
fi

mkdir -p "$tmp/gh/nlohmann"
got="$tmp/gh/nlohmann/json.hpp"
if command -v curl >/dev/null; then fetch=(curl -fsSL --max-time 120 -o "$got" "$JSON_URL")
elif command -v wget >/dev/null; then fetch=(wget -q -T 120 -O "$got" "$JSON_URL")
else fetch=(); fi
if [ ${#fetch[@]} = 0 ]; then
  why+=("no curl or wget to download $JSON_URL")
elif ! "${fetch[@]}" 2>"$tmp/fetch.log"; then
  why+=("the download of $JSON_URL failed ($(head -n 1 "$tmp/fetch.log" | cut -c1-120))")
elif [ "$(sha256sum "$got" | cut -d' ' -f1)" != "$JSON_SHA256" ]; then
  why+=("the downloaded json.hpp's sha256 is not v$JSON_VERSION's $JSON_SHA256")
else
  take "$tmp/gh" "json.hpp of nlohmann/json v$JSON_VERSION, sha256 checked"
fi

rmdir "$dest" 2>/dev/null  # nothing written: no empty folder left
msg=$(printf '%s; ' "${why[@]}")
echo "error: no nlohmann/json header for $dest/include: ${msg%; } (install nlohmann-json3-dev, or run this where the network is and copy $dest along)" >&2
exit 1
