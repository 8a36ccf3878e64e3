#!/usr/bin/env bash
# Builds the bundle that runs on the GPU machine (it has the driver, CUDA, PyTorch and
# Triton, but no LLVM): build-gpu/ with libtileRT.so (the compiler's front and middle
# and the runtime, small), libtileCG.so beside it (the code generator with LLVM's NVPTX
# backend linked in statically, loaded only on a cache miss) and the GPU suite. Then, through the device
# tool, run from the repository root with `carry: ["build-gpu"]`:
#     bash scripts/gpu-suite.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTILE_BUNDLE=ON >/dev/null
cmake --build build-gpu
size=$(du -sm build-gpu | cut -f1)
echo "gpu-bundle: build-gpu is ${size} MiB (a device call carries at most 64 MiB with the tree)"
