#!/usr/bin/env bash
# Assembles one PTX file with ptxas -v and fails on what must never reach a user:
# ptxas rejecting it, or telling that it serialized a wgmma pipeline (docs/CODEGEN.md,
# ../shared/TENSOR-CORES.md 4): C7514 (a wgmma serialized: its accumulator touched in
# flight), C7517 (a warpgroup.wait injected: an accumulator read before its wait),
# C7519 (a warpgroup.arrive injected: no fence, or a register written after it), C7515
# (serialized: a non-wgmma instruction defines an accumulator register between a
# wgmma's start and its wait; tma_fuzz seeds 1352 and 2632 before cg_wgmma_hold).
# Usage: ptxas-check.sh PTXAS ARCH FILE.ptx OUT.cubin   (exit 0 clean, 1 otherwise;
# the reason on stdout)
set -u
ptxas=$1 arch=$2 ptx=$3 cubin=$4
log=$("$ptxas" -arch="$arch" -v "$ptx" -o "$cubin" 2>&1)
rc=$?
if [ $rc -ne 0 ]; then
  echo "ptxas rejected it:"; printf '%s\n' "$log" | head -5 | sed 's/^/  /'; exit 1
fi
bad=$(printf '%s\n' "$log" | grep -E '\((C7514|C7515|C7517|C7519)\)')
if [ -n "$bad" ]; then
  echo "ptxas serialized a wgmma pipeline:"; printf '%s\n' "$bad" | head -5 | sed 's/^/  /'; exit 1
fi
exit 0
