#!/usr/bin/env bash
# The test suite that CI runs (.ci/run): installs what is missing, builds a Debug build
# with AddressSanitizer and UndefinedBehaviorSanitizer (warnings are errors), and runs
# every test under ctest: cmocka unit tests, FileCheck tests of IR, passes and
# diagnostics, the interpreter tests, and the examples against their C references.
#
# The three long suites (the emulated GPU code of the lit runs and the benchmarks'
# configs, and ptxas on every kernel) run a sample of about 1 case in 4, chosen by a
# seed that this script prints and that differs from run to run, so CI covers a new
# slice each time and any failure repeats with its seed (tests/sample.py):
#
#   scripts/test.sh                         sampled, a new seed
#   TILE_TEST_SEED=1234 scripts/test.sh     sampled, that seed (a failing run again)
#   scripts/test.sh --full                  every case of every suite
#
# Other arguments go to ctest (scripts/test.sh -R lit/cli).
set -euo pipefail
cd "$(dirname "$0")/.."
full=0
if [ "${1:-}" = --full ]; then full=1; shift; fi
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
if [ $full = 1 ]; then
  unset TILE_TEST_SAMPLE
  echo "test.sh: every case of every suite (--full)"
else
  export TILE_TEST_SAMPLE=${TILE_TEST_SAMPLE:-4}
  export TILE_TEST_SEED=${TILE_TEST_SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
  echo "test.sh: the long suites run 1 case in $TILE_TEST_SAMPLE, chosen by seed $TILE_TEST_SEED" \
       "(TILE_TEST_SEED=$TILE_TEST_SEED scripts/test.sh repeats it; scripts/test.sh --full runs every case)"
fi
cd build-test
start=$SECONDS
status=0
ctest --output-on-failure -j2 "$@" || status=$?
echo "test.sh: ctest took $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s" \
     "${TILE_TEST_SEED:+(seed $TILE_TEST_SEED)}"
exit $status
