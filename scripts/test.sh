#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds a Debug build with
# AddressSanitizer and UndefinedBehaviorSanitizer (warnings are errors), and runs every
# test under ctest: cmocka unit tests, FileCheck tests of IR, passes and diagnostics,
# the interpreter tests, and the examples against their C references.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# The optimized build too: some warnings only appear at -O3, and they are errors.
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release
# The sanitizer build uses clang: its UBSan checks more (null + 0, for one) than gcc's.
cmake -S . -B build-test -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DTILE_SANITIZE=ON >/dev/null
cmake --build build-test
# The GPU machine's bundle (static LLVM, its own program list: cmake/Bundle.cmake) builds
# too, so a new source file cannot break it unseen.
bash scripts/gpu-bundle.sh >/dev/null
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
cd build-test
ctest --output-on-failure -j2 "$@"
