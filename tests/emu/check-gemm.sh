#!/usr/bin/env bash
# ctest codegen/gemm-addresses: the pipelined bf16 GEMM's every cp.async, ldmatrix,
# store and shared access, for tile configs and shapes (masked edges, the unspecialized
# variant) run on the host (tests/emu); `sm_90a-tma` rows run examples/matmul_bf16.tile's
# TMA ring (every box's map, destination and block, every mbarrier, and which operand
# each wgmma row holds) and its TMA stores of C (C's map, the staging half's alignment,
# the box's coordinates, every staged byte written by the threads before the store
# reads it, every element of C stored exactly once). The last column sets WS,
# PERSISTENT, CLUSTER and PINGPONG (run.sh): a producer warpgroup, programs walking
# tiles, clusters of two CTAs whose B comes by multicast (their shares must fill every
# row each CTA's wgmma reads, and land in no chunk of A), two consumer warpgroups taking
# turns (every named barrier left complete at the block's end, none hung: the harness
# fails a block that does not finish in 120 s). Exit 77 without LLVM's llc or a C compiler.
#   check-gemm.sh TILEC
set -u
tilec=$1; here=$(cd "$(dirname "$0")" && pwd)
command -v cc >/dev/null && { command -v llc-19 >/dev/null || [ -x /usr/lib/llvm-19/bin/llc ]; } || exit 77
status=0
# arch   config            M    N    K   (sm_90a: wgmma, its descriptors' reads checked)  [keys]
while read -r arch cfg M N K keys; do
  tma=0; [ "$arch" = sm_90a-tma ] && arch=sm_90a tma=1
  out=$(env ${keys//,/ } ARCH=$arch TMA=$tma bash "$here/run.sh" "$tilec" "$cfg" "$M" "$N" "$K" 2>&1); rc=$?
  [ $tma = 1 ] && arch=sm_90a-tma
  echo "$arch $cfg ${M}x${N}x${K} ${keys}: $(echo "$out" | tr '\n' ' ')"
  [ $rc -eq 0 ] || status=1
done <<'CONFIGS'
sm_80  128,128,32,4,4 256 256 256
sm_80  64,64,64,4,3   256 256 256
sm_80  64,128,64,8,3  256 256 256
sm_80  256,128,64,8,3 512 256 256
sm_80  64,64,32,4,2   200 136 100
sm_80  128,128,64,8,3 300 200 520
sm_90a 128,128,64,8,3 256 256 256
sm_90a 128,256,64,8,4 256 512 256
sm_90a 128,128,32,4,4 300 200 520
sm_90a 128,64,16,4,4  256 128 100
sm_90a 256,128,64,8,5 512 256 320
sm_80  64,64,32,4,2   40 56 72
sm_90a 128,128,32,4,4 136 200 88
sm_90a-tma 128,256,64,8,4 256 512 256
sm_90a-tma 128,128,32,4,4 384 256 320
sm_90a-tma 64,128,16,4,3  192 256 160
sm_90a-tma 128,64,64,4,2  256 192 256
sm_90a-tma 128,128,32,4,4 136 200 88
sm_90a-tma 64,128,16,4,3  40 200 72
sm_90a-tma 128,128,64,8,4 264 200 88 WS=1,PERSISTENT=1
sm_90a-tma 256,128,64,8,4 512 256 256
sm_90a-tma 128,256,64,8,4 512 768 320 WS=1,PERSISTENT=1
sm_90a-tma 256,256,64,8,4 512 512 256 CLUSTER=2
sm_90a-tma 256,128,64,8,4 768 256 192 WS=1,PERSISTENT=1,CLUSTER=2
sm_90a-tma 256,64,64,8,3  512 256 256 CLUSTER=2
sm_90a-tma 128,128,64,4,4 512 640 256 WS=1,PERSISTENT=1,PINGPONG=1
sm_90a-tma 256,128,64,4,4 768 640 256 WS=1,PERSISTENT=1,PINGPONG=1,CLUSTER=2
CONFIGS
exit $status
