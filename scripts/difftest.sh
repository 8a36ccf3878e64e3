#!/usr/bin/env bash
# The differential tester on the GPU machine in one command, for every GPU session
# (through the device tool, from the repository root, with build-gpu carried: see
# scripts/gpu-bundle.sh). Replays every saved regression on the GPU, then runs random
# programs (interpreter -O0 and -O2 against the GPU) on 12 workers for SECONDS
# (default 270), starting at a fresh seed each time unless DIFFTEST_SEED is set.
# Failures are reduced and saved under $OUT/difftest; copy them to
# tests/difftest/regressions once the bug is understood (docs/DIFFTEST.md).
#   scripts/difftest.sh [SECONDS]
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
OUT=${OUT:-/tmp/tile-gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$root/build-gpu/runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TILE_CACHE_DIR=${TILE_CACHE_DIR:-$(mktemp -d /tmp/tile-cache.XXXXXX)}
seed=${DIFFTEST_SEED:-$(( ($(date +%s) % 100000) * 100000 + 1 ))}
status=0
build-gpu/tile-difftest --gpu --replay tests/difftest/regressions
rc=$?
[ $rc -eq 77 ] && exit 77   # no GPU here
[ $rc -eq 0 ] || status=1
build-gpu/tile-difftest --gpu --jobs 12 --time-limit "${1:-270}" --count 1000000 --seed "$seed" \
    --out "$OUT/difftest" || status=1
exit $status
