#!/usr/bin/env bash
# The next device call's second part (about 6 minutes): where the step's time goes
# against torch.compile's, per kernel, at T 1024 and 4096 (bench/graph_step_profile.py;
# --peer profiles torch.compile), and the dK/dV split against the unsplit form at T 1024.
# From the repository root on the device machine (carry build-gpu): bash bench/probes/call2.sh
export TILE_LIB=$PWD/build-gpu/runtime/libtileRT.so PYTHONPATH=$PWD/python TILE_CACHE_DIR=$(mktemp -d)
nvidia-smi -L > $OUT/card.txt
P="python3 bench/graph_step_profile.py --lib build-gpu/runtime/libtileRT.so --top 40"
timeout 100 $P --tokens 1024 > $OUT/prof_tile_1024.txt 2>&1
timeout 80 $P --tokens 1024 --bwd-split-rows 0 > $OUT/prof_tile_1024_nosplit.txt 2>&1
timeout 100 $P --tokens 4096 > $OUT/prof_tile_4096.txt 2>&1
timeout 120 $P --tokens 1024 --peer > $OUT/prof_tc_1024.txt 2>&1
timeout 140 $P --tokens 4096 --peer > $OUT/prof_tc_4096.txt 2>&1
