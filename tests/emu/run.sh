#!/usr/bin/env bash
# The address checker of tests/emu on one config of the GEMM (bench/matmul_pointers.tile,
# examples/matmul_bf16.tile with pointer loads: its cp.async and ldmatrix addresses and
# wgmma descriptors; the emulator has no TMA, whose copies tests/gpu/test_tma_gpu.py
# checks on the H200):
#   run.sh TILEC BM,BN,BK,warps,stages M N K
# Builds the kernel's LLVM IR (div16 when M, N and K are multiples of 16, div8 when
# they are multiples of 8, as the runtime does), rewrites it for the host, runs every block and thread, and fails on
# any access outside its buffer or misaligned. With TMA=1, also WS=1 (a producer
# warpgroup: 128 more threads), PERSISTENT=1 (3 programs walk the tiles) and CLUSTER=n
# (each program on n CTAs, B multicast; the harness runs each CTA), PINGPONG=1 (two
# consumer warpgroups of alternate tiles, taking turns at the main loop).
set -euo pipefail
# ARCH (default sm_80: mma.sync, ldmatrix) or sm_90a (wgmma: its descriptors checked)
tilec=$1; IFS=, read -r BM BN BK W S <<< "$2"; M=$3; N=$4; K=$5
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd)
llc=${LLC:-$(command -v llc-19 || echo /usr/lib/llvm-19/bin/llc)}
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
spec=none; [ $((M % 8)) -eq 0 ] && [ $((N % 8)) -eq 0 ] && [ $((K % 8)) -eq 0 ] && spec=div8
[ $((M % 16)) -eq 0 ] && [ $((N % 16)) -eq 0 ] && [ $((K % 16)) -eq 0 ] && spec=div16
# TMA=1: examples/matmul_bf16.tile (block loads) in its div16 (div8) variant, copied by TMA
kernel=$root/bench/matmul_pointers.tile; maps=""; tma=0
if [ "${TMA:-0}" = 1 ]; then kernel=$root/examples/matmul_bf16.tile; maps="$BM $BN $BK"; tma=1; fi
# without TMA=1 the pointer form stays pointer loads (the knob ptrblock = 0: otherwise
# passes/ptrblock.c makes its loads block copies, which TMA=1 checks through matmul_bf16)
knobs=(); [ $tma = 1 ] || knobs=(--knob ptrblock=0)
ws=${WS:-0}; pers=${PERSISTENT:-0}; cl=${CLUSTER:-1}; pp=${PINGPONG:-0}
"$tilec" "$kernel" --arch "${ARCH:-sm_80}" -DBM=$BM -DBN=$BN -DBK=$BK -Dwarps=$W -Dstages=$S -Dws=$ws -Dpersistent=$pers \
    -Dcluster=$cl -Dpingpong=$pp --spec=$spec "${knobs[@]}" --emit=llvm -o "$t/k.ll"
[ $tma = 0 ] || grep -q "cp.async.bulk.tensor" "$t/k.ll" || { echo "run.sh: the kernel does not copy by TMA"; exit 1; }
python3 "$here/llvm_to_host.py" "$t/k.ll" "$t/host.ll"
"$llc" -O1 -mtriple=x86_64-pc-linux-gnu -relocation-model=pic -filetype=obj "$t/host.ll" -o "$t/k.o"
cc -O1 -pthread -Wno-psabi -DTMA=$tma "$here/harness.c" "$t/k.o" -o "$t/run"
grid=$(( ((M + BM - 1) / BM) * ((N + BN - 1) / BN) ))
[ "$pers" = 1 ] && [ "$grid" -gt 3 ] && grid=3      # persistent: 3 programs, each walking several tiles
threads=$((W * 32)); [ "$pp" = 1 ] && threads=$((threads * 2))   # pingpong: two consumer warpgroups
[ "$ws" = 1 ] && threads=$((threads + 128))
# shared memory: every buffer the kernel allocates plus the largest scratch, bounded
# above by what a block may have on sm_90a
CLUSTER=$cl "$t/run" "$M" "$N" "$K" "$threads" "$grid" 232448 $maps
