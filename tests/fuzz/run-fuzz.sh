#!/usr/bin/env bash
# Builds a libFuzzer harness in build-fuzz (clang) - fuzz_parser (the parser alone,
# fast) or fuzz_compile (parser, lowering, verifier, passes, interpreter) - and fuzzes
# it for SECONDS (default 60). Inputs that crash, leak or hang are copied into
# tests/fuzz/regressions/, which test_parser replays; the fuzzer is restarted after
# each finding until the time is up.
#   usage: tests/fuzz/run-fuzz.sh [SECONDS] [fuzz_parser|fuzz_compile]
set -euo pipefail
secs=${1:-60}
target=${2:-fuzz_parser}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$root/build-fuzz

cmake -S "$root" -B "$build" -DTILE_FUZZ=ON -DCMAKE_C_COMPILER=clang \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target "$target" -j2

corpus=$build/corpus-$target
artifacts=$build/artifacts-$target
mkdir -p "$corpus" "$artifacts" "$here/regressions"
end=$(( $(date +%s) + secs ))
while :; do
  left=$(( end - $(date +%s) ))
  [ "$left" -gt 0 ] || break
  "$build/tests/fuzz/$target" -max_total_time="$left" -max_len=4096 -timeout=5 \
      -rss_limit_mb=2048 -dict="$here/tile.dict" -artifact_prefix="$artifacts/" \
      -print_final_stats=1 "$corpus" "$here/corpus" "$root/examples" && status=0 || status=$?
  found=0
  for f in "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-* "$artifacts"/oom-*; do
    [ -e "$f" ] || continue
    cp "$f" "$here/regressions/"
    rm "$f"
    found=1
    echo "run-fuzz: saved $(basename "$f") to tests/fuzz/regressions/"
  done
  if [ "$status" -ne 0 ] && [ "$found" -eq 0 ]; then
    echo "run-fuzz: fuzzer failed (status $status) without an artifact" >&2
    exit "$status"
  fi
  [ "$status" -eq 0 ] && break
done
n=$(find "$here/regressions" -type f ! -name '.*' | wc -l)
echo "run-fuzz: done; $n input(s) in tests/fuzz/regressions/"
