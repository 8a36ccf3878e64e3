#!/usr/bin/env bash
# ptxas-check.sh on the two hand-written wgmma kernels beside this script: clean.ptx
# must pass, serialized.ptx must fail naming C7517. Usage: check.sh PTXAS_CHECK
set -u
check=$1 here=$(cd "$(dirname "$0")" && pwd)
ptxas=${PTXAS:-$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)}
if [ ! -x "$ptxas" ]; then echo "ptxas not found: skipped"; exit 77; fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$check" "$ptxas" sm_90a "$here/clean.ptx" "$tmp/c.cubin" || { echo "FAIL: clean.ptx was refused"; exit 1; }
out=$("$check" "$ptxas" sm_90a "$here/serialized.ptx" "$tmp/s.cubin") && { echo "FAIL: serialized.ptx passed"; exit 1; }
printf '%s\n' "$out" | grep -q 'C7517' || { echo "FAIL: the refusal does not name C7517:"; printf '%s\n' "$out"; exit 1; }
echo "ok: $out" | head -2
