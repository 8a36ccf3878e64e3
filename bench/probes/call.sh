#!/usr/bin/env bash
# The next device call's first part (about 6 minutes): what the thirteenth and fourteenth
# sessions built without a GPU, checked on one against the interpreter, and the single
# kernel probes. From the repository root on the device machine (carry build-gpu):
#   bash bench/probes/call.sh       then call2.sh, then scripts/gpu-suite.sh step42
export TILE_LIB=$PWD/build-gpu/runtime/libtileRT.so PYTHONPATH=$PWD/python TILE_CACHE_DIR=$(mktemp -d)
nvidia-smi -L > $OUT/card.txt
cmp_txt() {  # cmp_txt NAME CPU GPU: element-wise, within 1e-2 of the largest value
  python3 -c "
import sys
a=[float(x) for x in open('$2').read().split()]; b=[float(x) for x in open('$3').read().split()]
m=max(abs(x) for x in a) or 1; d=max([abs(x-y) for x,y in zip(a,b)] or [1e9])
print('$1: n', len(a), len(b), 'max diff / max', d/m, 'OK' if len(a)==len(b) and d/m < 1e-2 else 'FAIL')"
}
{
# TMA stores in both branches of an if (one staging area)
A="--knob schedule=0 -D ws=1 -D persistent=1 --kernel branches --arg c=zeros:98304 --arg c32=zeros:98304 --arg a=rand:49152:1 --arg b=rand:49152:2 --arg M=384 --arg N=256 --arg K=128 --print c --print c32"
build-gpu/tilec run tests/lit/passes/tma_store.tile --device cpu $A > /tmp/c.txt 2>&1
build-gpu/tilec run tests/lit/passes/tma_store.tile --device gpu $A > /tmp/g.txt 2>&1
cmp_txt branches /tmp/c.txt /tmp/g.txt
# epilogue subtiling (passes/epichunk.c): TMA stores in sequence, then pointer stores at odd sizes
for s in "272 464 128" "130 200 72"; do
  set -- $s
  A="--kernel swiglu_dx --arg M=$1 --arg N=$2 --arg K=$3 --arg a=rand:$(($1*$3)):1 --arg w=rand:$(($3*$2)):2 --arg g=rand:$(($1*$2)):3 --arg u=rand:$(($1*$2)):4 --arg dg=zeros:$(($1*$2)) --arg du=zeros:$(($1*$2)) --print dg --print du"
  build-gpu/tilec run tests/lit/passes/epichunk.tile --device cpu $A > /tmp/c.txt 2>&1
  build-gpu/tilec run tests/lit/passes/epichunk.tile --device gpu $A > /tmp/g.txt 2>&1
  cmp_txt "swiglu_dx $s" /tmp/c.txt /tmp/g.txt
done
G="build-gpu/tilec run --compare-fused --device gpu"
$G tests/lit/graph/lower_epichunk.tile --graph dx --arg T=272 --arg dy=rand:17408:1 --arg wd=rand:32768:2 --arg g=rand:139264:3 --arg u=rand:139264:4; echo "lower_epichunk dx rc=$?"
$G tests/lit/graph/permute.tile --graph attn_out16 --arg T=37 --arg q=rand:4736:1 --arg k=rand:4736:2 --arg v=rand:4736:3 --arg w=rand:8192:4 --arg t=rand:2368:5; echo "permute attn_out16 rc=$?"
$G tests/lit/graph/permute.tile --graph rope_out --arg T=7 --arg d=rand:84 --arg c=rand:14:2 --arg s=rand:14:3; echo "permute rope_out rc=$?"
# attention backward's dK/dV split over the query heads, and unsplit past the graph's rows
$G tests/lit/graph/attention-bwd-bf16.tile --graph llama_attn --arg T=300 --arg q=rand:153600:21 --arg k=rand:76800:22 --arg vp=rand:76800:23 --arg t=rand:153600:24; echo "llama_attn rc=$?"
$G tests/lit/graph/attention-bwd-bf16.tile --graph gqa_rows40 --arg T=150 --arg q=rand:9600:25 --arg k=rand:4800:26 --arg v=rand:4800:27 --arg t=rand:9600:28; echo "gqa_rows40 rc=$?"
# the norms' column sums in two steps
$G tests/lit/graph/columns.tile --graph normbwd --arg T=300 --arg x=rand:9600 --arg w0=rand:1024:2 --arg g=rand:32:3 --arg w1=rand:1024:4 --arg w2=rand:1024:5; echo "columns normbwd rc=$?"
} > $OUT/checks.txt 2>&1
timeout 100 python3 tests/gpu/test_python_gpu.py -k LmHeadSplit > $OUT/lmhead_split.txt 2>&1; echo "rc=$?" >> $OUT/lmhead_split.txt
timeout 120 python3 bench/probes/k29_probe.py > $OUT/k29.txt 2>&1
TILE_EPICHUNK=0 timeout 100 python3 bench/probes/k29_probe.py > $OUT/k29_whole.txt 2>&1
timeout 90 python3 bench/probes/loss_probe.py > $OUT/loss.txt 2>&1
