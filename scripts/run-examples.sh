#!/usr/bin/env bash
# The main job: installs what is missing, builds tile (Release), compiles every example
# in examples/ and runs it - on the GPU where there is one, else in the CPU
# interpreter - checking each result against a reference and printing a table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release
# libtileRT opens the code generator (libtileCG.so) on its first compile.
export TILE_CODEGEN_LIBRARY=${TILE_CODEGEN_LIBRARY:-$PWD/build-release/runtime/libtileCG.so}
device=cpu
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then device=gpu; fi
exec build-release/tests/tile-examples --device "$device" examples
