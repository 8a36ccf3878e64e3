#!/usr/bin/env bash
# Installs everything tile needs on a fresh Debian machine. Idempotent: when every
# package is present it only checks and returns (well under a second).
set -euo pipefail

PKGS=(build-essential g++ cmake ninja-build pkg-config flex bison libcmocka-dev
      llvm-19-dev llvm-19-tools clang python3 libxxhash-dev zlib1g-dev libzstd-dev
      python3-numpy python3-pip libcjson-dev)  # cJSON: tilec tune's manifest; the Python package's tests: numpy arrays, pip install
# (g++ and clang's clang++: tests/header compiles tile_rt.h as C++11 and C++17)
# The remote cache tier: hiredis's header (libtileRT dlopens the library), and the
# redis-server and redis-cli that tests/remote/run.sh runs.
PKGS+=(libhiredis-dev redis-server redis-tools)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
