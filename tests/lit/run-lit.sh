#!/usr/bin/env bash
# A small lit: runs the `// RUN:` lines of one test file, each with pipefail, and
# fails on the first line that fails. Substitutions:
#   %s file   %t a temporary path (one per file, as in lit)   %S the file's directory
#   %tilec %tile-opt the built tools   %mockcuda the mock CUDA driver library
#   FileCheck not split-file (LLVM 19's)
# Usage: run-lit.sh FILE  (with TILEC, TILE_OPT, MOCK_CUDA and LLVM_BIN in the environment)
set -u
: "${TILEC:?set TILEC to the tilec binary}" "${TILE_OPT:?set TILE_OPT to the tile-opt binary}"
file=$1
llvm=${LLVM_BIN:-/usr/lib/llvm-19/bin}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
while IFS= read -r line; do
  cmd=${line#*RUN:}
  n=$((n + 1))
  cmd=${cmd//%tilec/$TILEC}
  cmd=${cmd//%tile-opt/$TILE_OPT}
  cmd=${cmd//%mockcuda/${MOCK_CUDA:-}}
  cmd=${cmd//%s/$file}
  cmd=${cmd//%S/$(dirname "$file")}
  cmd=${cmd//%t/$tmp/t}
  echo "RUN: $cmd"
  PATH="$llvm:$PATH" bash -o pipefail -c "$cmd" || { echo "FAILED: RUN line $n of $file"; exit 1; }
done < <(grep -E '^[[:space:]]*(//|#)[[:space:]]*RUN:' "$file")
[ "$n" -gt 0 ] || { echo "no RUN lines in $file"; exit 1; }
