#!/usr/bin/env bash
# The reducer, on a bug injected into -O2 (every `maximum` computes `minimum`): the
# run must fail, reduce the first failing seed to a few lines that still use maximum,
# save it, and the saved file must replay as a failure with the bug and pass without.
# Usage: reducer-test.sh TILE_DIFFTEST
set -u
bin=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() { echo "reducer-test: $*"; cat "$out/log"; exit 1; }
"$bin" --cpu --inject-bug maximum --seeds 1..40 --max-reduce 1 --ptxas-every 0 --out "$out/reg" > "$out/log" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "expected exit status 1 (a mismatch), got $rc"
file=$(ls "$out"/reg/o2-mismatch-seed*.tile 2>/dev/null | head -n 1)
[ -n "$file" ] || fail "no regression file was written"
cat "$file"
lines=$(grep -cv '^ *//' "$file")
[ "$lines" -le 8 ] || fail "the reduced program has $lines lines (at most 8 expected)"
# (clamp(x, lo, hi) is minimum(maximum(x, lo), hi) in the IR)
grep -q 'maximum\|max(\|clamp(' "$file" || fail "the reduced program lost the op the bug is in"
"$bin" --cpu --replay "$out/reg" --inject-bug maximum > "$out/log" 2>&1 && fail "the replay with the bug passed"
"$bin" --cpu --replay "$out/reg" > "$out/log" 2>&1 || fail "the replay without the bug failed"
echo "reducer-test: ok ($lines lines)"
