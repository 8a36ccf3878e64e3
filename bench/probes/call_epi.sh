#!/usr/bin/env bash
# Epilogue subtiling (passes/epichunk.c) on a GPU: k29's dX GEMM at 128 x 256 chunked
# against its whole epilogue, 128 x 128, cuBLAS and torch.compile; the chunked kernels'
# values on the GPU against the interpreter; the step's per-kernel time at T 1024 and
# 4096. From the repository root on the device machine (carry build-gpu):
#   bash bench/probes/call_epi.sh
export TILE_LIB=$PWD/build-gpu/runtime/libtileRT.so PYTHONPATH=$PWD/python TILE_CACHE_DIR=$(mktemp -d)
nvidia-smi -L > $OUT/card.txt
timeout 150 python3 bench/probes/k29_probe.py > $OUT/k29.txt 2>&1
TILE_EPICHUNK=0 timeout 150 python3 bench/probes/k29_probe.py > $OUT/k29_whole.txt 2>&1
T=4096 timeout 150 python3 bench/probes/k29_probe.py > $OUT/k29_4096.txt 2>&1
# values: the chunked epilogue (TMA stores in sequence, then pointer stores at odd sizes)
for s in "272 464 128" "130 200 72"; do
  set -- $s
  A="--kernel swiglu_dx --arg M=$1 --arg N=$2 --arg K=$3 --arg a=rand:$(($1*$3)):1 --arg w=rand:$(($3*$2)):2 --arg g=rand:$(($1*$2)):3 --arg u=rand:$(($1*$2)):4 --arg dg=zeros:$(($1*$2)) --arg du=zeros:$(($1*$2)) --print dg --print du"
  build-gpu/tilec run tests/lit/passes/epichunk.tile --device cpu $A > /tmp/epi_cpu.txt 2>&1
  build-gpu/tilec run tests/lit/passes/epichunk.tile --device gpu $A > /tmp/epi_gpu.txt 2>&1
  python3 -c "
a=[float(x) for x in open('/tmp/epi_cpu.txt').read().split()]; b=[float(x) for x in open('/tmp/epi_gpu.txt').read().split()]
m=max(abs(x) for x in a); d=max([abs(x-y) for x,y in zip(a,b)] or [1e9]); n=sum(x!=y for x,y in zip(a,b))
print('swiglu_dx $s: n', len(a), len(b), 'unequal', n, 'max diff / max', d/m, 'OK' if len(a)==len(b) and d/m < 1e-2 else 'FAIL')"
done > $OUT/values.txt 2>&1
build-gpu/tilec run tests/lit/graph/lower_epichunk.tile --compare-fused --device gpu --graph dx --arg T=272 --arg dy=rand:17408:1 --arg wd=rand:32768:2 --arg g=rand:139264:3 --arg u=rand:139264:4 >> $OUT/values.txt 2>&1; echo "graph dx rc=$?" >> $OUT/values.txt
P="python3 bench/graph_step_profile.py --lib build-gpu/runtime/libtileRT.so --top 40"
timeout 120 $P --tokens 4096 > $OUT/prof_tile_4096.txt 2>&1
timeout 120 $P --tokens 1024 > $OUT/prof_tile_1024.txt 2>&1
