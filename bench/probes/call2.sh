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
