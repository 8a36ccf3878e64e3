#!/usr/bin/env bash
# The f64 math of the GPU code, checked on the host: compiles the LLVM IR that codegen
# emits for tests/codegen/f64_model/kernels.tile for x86-64 (to_host.py) and runs it
# against glibc (check.c). Skips (77) without llc-19 or a C compiler.
# Usage: f64_model.sh TILEC
set -euo pipefail
tilec=$1
here=$(cd "$(dirname "$0")/f64_model" && pwd)
llc=${LLC:-$(command -v llc-19 || command -v /usr/lib/llvm-19/bin/llc || true)}
cc=${CC:-$(command -v cc || command -v gcc || command -v clang || true)}
if [ -z "$llc" ] || [ -z "$cc" ]; then echo "llc-19 or cc not found: skipped"; exit 77; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$tilec" "$here/kernels.tile" --emit=llvm -O2 | python3 "$here/to_host.py" > "$tmp/k.ll"
"$llc" -O1 -filetype=obj -relocation-model=pic "$tmp/k.ll" -o "$tmp/k.o"
"$cc" -O1 -std=c11 "$here/check.c" "$tmp/k.o" -lm -o "$tmp/check"
"$tmp/check"
