#!/usr/bin/env bash
# Where the step's time goes against torch.compile's: per-kernel CUDA time of both at
# T 1024 and T 4096 (bench/graph_step_profile.py, --peer for torch.compile), then the
# loss step's block shapes. From the repository root on the device machine (carry
# build-gpu): bash bench/probes/call2.sh
export TILE_LIB=$PWD/build-gpu/runtime/libtileRT.so PYTHONPATH=$PWD/python TILE_CACHE_DIR=$(mktemp -d)
nvidia-smi -L > $OUT/card.txt
P="python3 bench/graph_step_profile.py --lib build-gpu/runtime/libtileRT.so --top 40"
timeout 120 $P --tokens 4096 > $OUT/prof_tile_4096.txt 2>&1
timeout 150 $P --tokens 4096 --peer > $OUT/prof_tc_4096.txt 2>&1
timeout 120 $P --tokens 1024 --peer > $OUT/prof_tc_1024.txt 2>&1
timeout 90 python3 bench/probes/loss_probe.py > $OUT/loss.txt 2>&1
# attention backward's dK/dV split regime (T <= 2048 at Llama's 8 KV heads) against the unsplit form, and on the GPU against the interpreter
timeout 90 $P --tokens 1024 > $OUT/prof_tile_1024.txt 2>&1
timeout 90 $P --tokens 1024 --bwd-split-rows 0 > $OUT/prof_tile_1024_nosplit.txt 2>&1
( build-gpu/tilec run tests/lit/graph/attention-bwd-bf16.tile --compare-fused --device gpu --graph llama_attn --arg T=300 --arg q=rand:153600:21 --arg k=rand:76800:22 --arg vp=rand:76800:23 --arg t=rand:153600:24; echo "llama_attn rc=$?"
  build-gpu/tilec run tests/lit/graph/attention-bwd-bf16.tile --compare-fused --device gpu --graph gqa_rows40 --arg T=150 --arg q=rand:9600:25 --arg k=rand:4800:26 --arg v=rand:4800:27 --arg t=rand:9600:28; echo "gqa_rows40 rc=$?" ) > $OUT/dkdv_split.txt 2>&1
