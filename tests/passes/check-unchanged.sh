#!/usr/bin/env bash
# The GPU pipeline verifies the IR only after passes that report a change
# (passes/pipeline.c), so that claim must hold: every kernel of the given .tile files
# (examples/, tests/lit/) goes through the cleanup and GPU pipelines with
# --check-unchanged, which prints the function before and after each pass and aborts
# when a pass said "no change" but the text differs. For sm_90a and sm_80, with
# --spec=none and div16, and in the checked mode (--check-bounds). Files the front end
# rejects are skipped, as are files with `// ptxas-all: none` (kernels the GPU passes
# refuse). Usage: check-unchanged.sh TILEC FILE...
set -u
tilec=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 checked=0
# check FILE LABEL: every kernel of FILE, each way.
check() {
  local f=$1 label=$2
  for args in "--arch=sm_90a" "--arch=sm_80" "--arch=sm_90a --spec=div16" "--arch=sm_90a --check-bounds"; do
    # shellcheck disable=SC2086  # $args is a list of flags
    if ! "$tilec" "$f" --emit=ir-gpu --check-unchanged $args -o /dev/null 2>"$tmp/err"; then
      echo "FAIL $args: $label"; grep -m3 'internal error\|error:' "$tmp/err" | sed 's/^/  /'; fail=1; continue
    fi
    checked=$((checked + 1))
  done
}
for f in "$@"; do
  "$tilec" "$f" --emit=ir >"$tmp/ir" 2>/dev/null || continue   # not a valid program
  grep -q '^// ptxas-all: none' "$f" && continue
  grep -q '^kernel' "$tmp/ir" && check "$f" "$f"
  # The Tile kernels that the file's graphs lower to (passes/graph_lower.c).
  if "$tilec" "$f" --emit=graph-kernels -o "$tmp/g.tile" 2>/dev/null && grep -q '^kernel' "$tmp/g.tile"; then
    check "$tmp/g.tile" "$f (its graphs' kernels)"
  fi
done
echo "check-unchanged: $checked compiles, every pass that said 'no change' left the IR as it was"
exit $fail
