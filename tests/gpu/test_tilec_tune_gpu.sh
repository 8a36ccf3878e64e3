#!/usr/bin/env bash
# tilec tune on the GPU (docs/TUNING.md "tilec tune"): tunes examples/tune/matmul_bf16.json
# (matmul_bf16 at three shapes, BK and stages pinned: 16 configs a key) into a fresh
# cache with a report, then checks what a night's run must do:
#   - every key gets a winner and the report names it, with an SVG per key;
#   - a second run measures nothing (every key "done in an earlier run");
#   - a run killed after 5 configs (TILE_TUNE_EXIT_AFTER, as kill -9) resumes without
#     measuring a config twice (each config once in the journal);
#   - a process in default mode then runs the tuned winner from the cache.
#   tests/gpu/test_tilec_tune_gpu.sh [BUILD_DIR] [MANIFEST]   (default build-gpu)
# TILEC_TUNE_REPORT_TO=DIR keeps a copy of the first run's report there.
# TILE_TUNE_BUDGET_MS (30 here) bounds each config's runs; --budget 15 minutes the whole.
# Exit status 77 where there is no GPU.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
manifest=${2:-$root/examples/tune/matmul_bf16.json}
tilec=$build/tilec
[ -x "$tilec" ] || tilec=$build/tools/tilec
nvidia-smi -L > /dev/null 2>&1 || { echo "no GPU"; exit 77; }
work=$(mktemp -d /tmp/tile-tilec-tune-gpu.XXXXXX)
trap 'rm -rf "$work"' EXIT
export TILE_CACHE_DIR=$work/cache TILE_TUNE_BUDGET_MS=${TILE_TUNE_BUDGET_MS:-30}
fail() { echo "FAIL: $*"; exit 1; }

start=$(date +%s)
"$tilec" tune "$manifest" --journal "$work/j1" --report "$work/report" --budget 15 | tee "$work/run1.txt"
rc=${PIPESTATUS[0]}
echo "first run: $(( $(date +%s) - start )) s, exit $rc"
[ "$rc" -eq 0 ] || fail "tilec tune exited with $rc"
# The suite keeps the night's report (report.md and the SVGs) beside its logs.
[ -n "${TILEC_TUNE_REPORT_TO:-}" ] && mkdir -p "$TILEC_TUNE_REPORT_TO" && cp -r "$work/report/." "$TILEC_TUNE_REPORT_TO"
keys=$("$tilec" tune "$manifest" --dry-run | tail -1 | awk '{print $2}')
[ "$(grep -c ': winner ' "$work/run1.txt")" -eq "$keys" ] || fail "not every one of the $keys keys has a winner"
cat "$work/report/report.md"
[ "$(ls "$work/report"/*.svg | wc -l)" -eq "$keys" ] || fail "not one SVG per key"
grep -q '\*\*winner\*\*' "$work/report/report.md" || fail "the report names no winner"

"$tilec" tune "$manifest" --journal "$work/j1" > "$work/run2.txt" || fail "the second run failed"
[ "$(grep -c 'done in an earlier run' "$work/run2.txt")" -eq "$keys" ] || fail "the second run measured again"

rm -rf "$TILE_CACHE_DIR"
TILE_TUNE_EXIT_AFTER=5 "$tilec" tune "$manifest" --journal "$work/j2" > /dev/null; rc=$?
[ "$rc" -eq 137 ] || fail "the simulated kill exited with $rc, not 137"
"$tilec" tune "$manifest" --journal "$work/j2" > "$work/run3.txt" || fail "the resumed run failed"
grep -q 'configs measured in an earlier run' "$work/run3.txt" || fail "the resumed run did not reuse the journal"
dups=$(grep '^cand ' "$work/j2" | cut -d' ' -f2,3 | sort | uniq -d | wc -l)
[ "$dups" -eq 0 ] || fail "$dups configs measured twice"

# default mode takes the winner: tilec run of the first key through the grid clause
env TILE_LOG_RECOMPILES=1 "$tilec" run "$root/examples/matmul_bf16.tile" --kernel matmul_bf16 --device gpu \
    -D BK=64 -D stages=3 --arg c=zeros:1048576 --arg a=rand:1048576 --arg b=rand:1048576 \
    --arg M=1024 --arg N=1024 --arg K=1024 --arg stride_am=1024 --arg stride_bk=1024 --arg stride_cm=1024 \
    > /dev/null 2> "$work/run4.txt"
cat "$work/run4.txt"
grep -q 'from the cache' "$work/run4.txt" || fail "default mode did not take the tuned winner from the cache"
echo "ok: $keys keys tuned, reported, resumed without measuring twice, and reused"
