#!/usr/bin/env bash
# The checks of the thirteenth session's merged work on a GPU, then gpu-suite.sh step42.
# From the repository root on the device machine (carry build-gpu): bash bench/probes/call.sh
export TILE_LIB=$PWD/build-gpu/runtime/libtileRT.so PYTHONPATH=$PWD/python
nvidia-smi -L > $OUT/card.txt
# TMA stores in both branches of an if (one staging area), on the GPU against the interpreter
A="--knob schedule=0 -D ws=1 -D persistent=1 --kernel branches --arg c=zeros:98304 --arg c32=zeros:98304 --arg a=rand:49152:1 --arg b=rand:49152:2 --arg M=384 --arg N=256 --arg K=128 --print c --print c32"
build-gpu/tilec run tests/lit/passes/tma_store.tile --device cpu $A > /tmp/br_cpu.txt 2>&1
build-gpu/tilec run tests/lit/passes/tma_store.tile --device gpu $A > /tmp/br_gpu.txt 2>&1
python3 -c "
a=[float(x) for x in open('/tmp/br_cpu.txt').read().split()]; b=[float(x) for x in open('/tmp/br_gpu.txt').read().split()]
m=max(abs(x) for x in a); d=max(abs(x-y) for x,y in zip(a,b)); print('branches: n', len(a), len(b), 'max diff / max', d/m, 'OK' if len(a)==len(b) and d/m < 1e-2 else 'FAIL')" > $OUT/branches.txt 2>&1
( build-gpu/tilec run tests/lit/graph/permute.tile --compare-fused --device gpu --graph attn_out16 --arg T=37 --arg q=rand:4736:1 --arg k=rand:4736:2 --arg v=rand:4736:3 --arg w=rand:8192:4 --arg t=rand:2368:5; echo "attn_out16 rc=$?"
  build-gpu/tilec run tests/lit/graph/permute.tile --compare-fused --device gpu --graph rope_out --arg T=7 --arg d=rand:84 --arg c=rand:14:2 --arg s=rand:14:3; echo "rope_out rc=$?" ) > $OUT/permute.txt 2>&1
OUT=$OUT STEP_TIMEOUT=220 bash scripts/gpu-suite.sh step42 > $OUT/step42.txt 2>&1
timeout 120 python3 tests/gpu/test_python_gpu.py -k LmHeadSplit > $OUT/lmhead_split.txt 2>&1; echo "rc=$?" >> $OUT/lmhead_split.txt

