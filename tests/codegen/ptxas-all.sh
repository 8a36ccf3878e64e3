#!/usr/bin/env bash
# Compiles every kernel of the given .tile files (examples/, tests/lit/), and the kernels
# their graphs lower to (--emit=graph-kernels), to PTX for
# sm_90a and sm_80 and checks each PTX with ptxas (ptxas-check.sh: also a wgmma that
# ptxas had to serialize fails). Files whose kernels the front end rejects (error
# tests) or that hold no kernel are skipped, and so are files with a line
# `// ptxas-all: none` (kernels the GPU passes must refuse, whose own RUN lines check
# the others with ptxas); a codegen failure or a ptxas rejection fails the script.
# Usage: ptxas-all.sh TILEC [--shard I/N] FILE...   (PTXAS: the assembler, default from
# CUDA). The files checked are a shard and, with TILE_TEST_SAMPLE set, a sample chosen
# by TILE_TEST_SEED (tests/sample.py, which names them by their path in the checkout).
set -u
tilec=$1
shift
shard=()
if [ "${1:-}" = --shard ]; then shard=(--shard "$2"); shift 2; fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
ptxas=${PTXAS:-$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)}
if [ ! -x "$ptxas" ]; then echo "ptxas not found: skipped"; exit 77; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 checked=0
rel=()
for f in "$@"; do rel+=("${f#"$root"/}"); done
mapfile -t files < <(python3 "$here/../sample.py" "${shard[@]}" "${rel[@]}")
n=0
# check FILE LABEL: every kernel of FILE, both targets.
check() {
  local f=$1 label=$2
  for arch in sm_90a sm_80; do
    if ! "$tilec" "$f" --emit=ptx --arch=$arch -o "$tmp/k.ptx" 2>"$tmp/err"; then
      echo "FAIL codegen $arch: $label"; sed 's/^/  /' "$tmp/err" | head -5; fail=1; continue
    fi
    if ! "$here/ptxas-check.sh" "$ptxas" $arch "$tmp/k.ptx" "$tmp/k.cubin" >"$tmp/err"; then
      echo "FAIL ptxas $arch: $label"; sed 's/^/  /' "$tmp/err" | head -6; fail=1; continue
    fi
    checked=$((checked + 1))
  done
}
for f in "${files[@]}"; do
  [[ $f = /* ]] || f=$root/$f
  n=$((n + 1))
  [ $((n % 25)) = 0 ] && echo "ptxas-all: $n of ${#files[@]} files"      # progress
  "$tilec" "$f" --emit=ir >/dev/null 2>&1 || continue          # not a valid program
  grep -q '^// ptxas-all: none' "$f" && continue
  # The Tile kernels that the file's graphs lower to (passes/graph_lower.c).
  if "$tilec" "$f" --emit=graph-kernels -o "$tmp/g.tile" 2>/dev/null && grep -q '^kernel' "$tmp/g.tile"; then
    check "$tmp/g.tile" "$f (its graphs' kernels)"
  fi
  grep -q '^kernel' <("$tilec" "$f" --emit=ir 2>/dev/null) || continue
  check "$f" "$f"
done
echo "ptxas accepted $checked PTX files"
exit $fail
