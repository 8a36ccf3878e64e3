#!/bin/sh
# The compiler's identity (cmake/SourceHash.cmake, tile_compiler_id) follows its
# sources: the same files give the same identity, a change to any one of them (its
# text, or its name) another, and so does another LLVM version. Cache keys name it, so
# a build that differs only in one source file never shares a cache entry.
# Usage: compiler-id.sh <source dir> <the build's tilec>
set -eu
src=$1
tilec=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/codegen" "$tmp/passes"
printf 'int a;\n' >"$tmp/codegen/cg.c"
printf 'int b;\n' >"$tmp/passes/p.c"
id() {  # the identity of the tree in $tmp with LLVM version $1
    cmake -DOUT="$tmp/id.h" -DROOT="$tmp" -DLLVM_VERSION="$1" \
          "-DFILES=$tmp/codegen/cg.c;$tmp/passes/p.c" -P "$src/cmake/SourceHash.cmake"
    sed -n 's/.*TILE_COMPILER_ID "\(.*\)"/\1/p' "$tmp/id.h"
}
base=$(id 19.1.7)
case $base in src-*-llvm-19.1.7) ;; *) echo "FAIL: identity '$base' is not src-HASH-llvm-19.1.7"; exit 1 ;; esac
[ "$(id 19.1.7)" = "$base" ] || { echo "FAIL: the same sources gave another identity"; exit 1; }
printf 'int a; /* one codegen change */\n' >"$tmp/codegen/cg.c"
changed=$(id 19.1.7)
[ "$changed" != "$base" ] || { echo "FAIL: a change in codegen/ kept the identity $base"; exit 1; }
printf 'int a;\n' >"$tmp/codegen/cg.c"
[ "$(id 19.1.7)" = "$base" ] || { echo "FAIL: the original sources did not give back $base"; exit 1; }
[ "$(id 19.1.8)" != "$base" ] || { echo "FAIL: another LLVM kept the identity"; exit 1; }
# the build's own tools report the identity they were built with
"$tilec" --version | grep -q "compiler src-[0-9a-f]\{32\}-llvm-" \
    || { echo "FAIL: tilec --version does not name its compiler identity"; exit 1; }
echo "ok: $base; a changed source: $changed"
