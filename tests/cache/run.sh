#!/usr/bin/env bash
# Many processes on one cache directory (DESIGN.md section 4), through the cache API
# (cache-stress) and `tilec cache`:
#  1. 8 processes get 12 keys 30 times each, concurrently: all payloads check, and each
#     key was built exactly once;
#  2. 8 more are started under a small size bound and 4 of them are killed with SIGKILL
#     mid-run: the survivors finish,
#     `tilec cache verify` finds no bad entry, and prune leaves no temp file behind;
#  3. a corrupted entry is reported by verify, then rebuilt by the next run;
#  4. a group-writable directory is refused; clear empties the cache.
# Usage: run.sh CACHE_STRESS TILEC
set -euo pipefail
STRESS=$1
TILEC=$2
WORK=$(mktemp -d /tmp/tile-cache-mp-XXXXXX)
trap 'chmod -R u+w "$WORK"; rm -rf "$WORK"' EXIT
DIR=$WORK/cache
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. concurrent misses build once
pids=()
for i in $(seq 8); do "$STRESS" "$DIR" 12 30 "$WORK/builds" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p" || fail "a stress process failed (status $?)"; done
[ "$(sort "$WORK/builds" | uniq -d | wc -l)" -eq 0 ] || fail "a key was built twice: $(sort "$WORK/builds" | uniq -d)"
[ "$(wc -l < "$WORK/builds")" -eq 12 ] || fail "expected 12 builds, got $(wc -l < "$WORK/builds")"
"$TILEC" cache stats --dir "$DIR" | grep -q "^cubin *12 entries" || fail "stats does not count 12 cubins"
[ "$("$TILEC" cache ls --dir "$DIR" | wc -l)" -eq 12 ] || fail "ls does not list 12 entries"
echo "ok 1 - 8 processes, 12 keys, each built once"

# 2. kill -9 in the middle of runs, with a bound small enough that entries are evicted
#    while others read them
"$TILEC" cache clear --dir "$DIR" > /dev/null
export TILE_CACHE_MAX_BYTES=1400000
victims=() survivors=()
for i in $(seq 4); do "$STRESS" "$DIR" 40 1000000 "$WORK/builds2" & victims+=($!); done
for i in $(seq 4); do "$STRESS" "$DIR" 40 60 "$WORK/builds2" & survivors+=($!); done
sleep 0.3
for p in "${victims[@]}"; do kill -9 "$p" || fail "a victim ended before it was killed"; done
for p in "${survivors[@]}"; do wait "$p" || fail "a surviving stress process failed"; done
for p in "${victims[@]}"; do wait "$p" 2>/dev/null || true; done
unset TILE_CACHE_MAX_BYTES
"$TILEC" cache verify --dir "$DIR" | tail -1 | grep -q ", 0 bad$" || fail "verify found bad entries after kill -9"
"$TILEC" cache prune --dir "$DIR" > /dev/null
[ -z "$(ls "$DIR/tmp")" ] || fail "temp files left after prune: $(ls "$DIR/tmp")"
echo "ok 2 - kill -9 of 4 of 8 processes, with eviction, leaves only whole entries"

# 3. corruption is reported, then rebuilt
entry=$(ls "$DIR"/*.cubin | head -1)
printf 'garbage' | dd of="$entry" bs=1 seek=100 conv=notrunc status=none
if "$TILEC" cache verify --dir "$DIR" > "$WORK/verify.txt"; then fail "verify passed a corrupted entry"; fi
grep -q "bad: $entry: checksum mismatch" "$WORK/verify.txt" || fail "verify did not name the entry: $(cat "$WORK/verify.txt")"
"$STRESS" "$DIR" 40 400 "$WORK/builds3" || fail "a stress run over a corrupted entry failed"
"$TILEC" cache verify --dir "$DIR" > /dev/null || fail "the corrupted entry was not rebuilt"
echo "ok 3 - a corrupted entry is reported and rebuilt"

# 4. unsafe directories are refused; clear empties
chmod g+w "$DIR"
if "$TILEC" cache ls --dir "$DIR" 2> "$WORK/err.txt"; then fail "a group-writable cache was accepted"; fi
grep -q "writable by group or others" "$WORK/err.txt" || fail "no clear message: $(cat "$WORK/err.txt")"
chmod g-w "$DIR"
"$TILEC" cache clear --dir "$DIR" > /dev/null
[ "$("$TILEC" cache ls --dir "$DIR" | wc -l)" -eq 0 ] || fail "clear left entries"
echo "ok 4 - group-writable refused, clear empties"
echo "4 passed, 0 failed"
