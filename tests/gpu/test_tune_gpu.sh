#!/usr/bin/env bash
# max-autotune on the GPU (docs/TUNING.md): tunes examples/matmul_bf16.tile at one shape
# in a fresh cache, prints every config's time (and its compile and benchmark time), the
# winner and its speed against the default config, then checks that a second process
# in default mode takes the winner from the cache without benchmarking.
#   tests/gpu/test_tune_gpu.sh [BUILD_DIR]      (default build-gpu, the GPU bundle)
# TUNE_SIZE (2048), TUNE_BK (64) and TUNE_STAGES (3) choose the shape and pin two keys,
# which leaves 16 configs; TILE_TUNE_BUDGET_MS (50 here) bounds each config's runs.
# Exit status 77 where there is no GPU.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
prog=$build/test_tune_gpu
[ -x "$prog" ] || prog=$build/tests/gpu/test_tune_gpu
export TILE_CACHE_DIR=$(mktemp -d /tmp/tile-tune-gpu.XXXXXX)
export TILE_TUNE_BUDGET_MS=${TILE_TUNE_BUDGET_MS:-50}
trap 'rm -rf "$TILE_CACHE_DIR"' EXIT
log=$TILE_CACHE_DIR/tune.log
start=$(date +%s%N)
"$prog" tune "$root/examples" 2> "$log"; rc=$?
secs=$(( ($(date +%s%N) - start) / 1000000 ))
cat "$log"
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || { echo "FAIL: the tuning process exited with $rc"; exit 1; }
echo "tuning process: ${secs} ms wall (target: under 60 s)"
grep -q "tuned now" "$log" || { echo "FAIL: the log does not say the config was tuned now"; exit 1; }
"$prog" reuse "$root/examples" 2> "$log"; rc=$?
cat "$log"
[ $rc -eq 0 ] || { echo "FAIL: the second process exited with $rc"; exit 1; }
grep -q "from the cache" "$log" || { echo "FAIL: the second process did not take the winner from the cache"; exit 1; }
[ "$secs" -lt 60000 ] || { echo "FAIL: tuning took ${secs} ms, more than 60 s"; exit 1; }
echo "ok: tuned once, reused by a second process without benchmarking"
