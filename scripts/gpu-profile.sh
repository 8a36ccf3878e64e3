#!/usr/bin/env bash
# Profiles on the GPU machine (device tool, carry build-gpu): the kernels that are short
# of their peers, each under ncu with stall sampling, beside the peer's kernel. Writes
# under $OUT, for reading offline: NAME.details.csv (ncu's sections), NAME.source.csv
# (SASS with its stall samples, per instruction) and tile's SASS (attn_probe).
#   scripts/gpu-profile.sh [NAME...]   (default: all; names below)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
OUT=${OUT:-/tmp/tile-profile}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$root/build-gpu/runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TILE_LIB=$root/build-gpu/runtime/libtileRT.so PYTHONUNBUFFERED=1
NCU=(ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis
     --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section SourceCounters)
T0=$(date +%s)
probe() {  # probe NAME KERNEL-REGEX COUNT COMMAND...
  local name=$1 regex=$2 count=$3; shift 3
  local s=$(date +%s)
  TILE_CACHE_DIR=$(mktemp -d /tmp/tile-cache.XXXXXX) OUT=$OUT/$name timeout 150 \
    "${NCU[@]}" -k "regex:$regex" -c "$count" -f -o "$OUT/$name" "$@" > "$OUT/$name.log" 2>&1 < /dev/null
  local rc=$?
  if [ -f "$OUT/$name.ncu-rep" ]; then
    ncu --import "$OUT/$name.ncu-rep" --page details --csv > "$OUT/$name.details.csv" 2>/dev/null
    ncu --import "$OUT/$name.ncu-rep" --page source --print-source sass --csv > "$OUT/$name.source.csv" 2>/dev/null
    rm -f "$OUT/$name.ncu-rep"
  fi
  echo "== $name rc=$rc $(( $(date +%s) - s ))s (at $(( $(date +%s) - T0 ))s)"
  tail -n 3 "$OUT/$name.log"
}
want() { [ $# -eq 0 ] || [[ " $* " == *" $name "* ]]; }
all=("$@")
run() { name=$1; if want "${all[@]+"${all[@]}"}"; then probe "$@"; fi; }
mkdir -p "$OUT"/{attn_ws,attn_rot,cudnn,gemm_ws,gemm_pp,gemm_cl,cublas,ragged_lb,ragged_ptr,ragged_cublas,lnbwd_tile,lnbwd_triton,softmax_tile,softmax_triton,lnfwd_tile,lnfwd_triton}
# attention forward B4 H32 L4096 d128: attn_fwd_tma + ws (the default), its FA3-style
# overlap (rot: softmax under P V, warpgroups taking turns), and SDPA's cuDNN kernel
run attn_ws attn_fwd 1 python3 bench/attn_probe.py tma+ws:128,64,8,3
run attn_rot attn_fwd 1 python3 bench/attn_probe.py tma+ws+rot:128,64,8,3
run cudnn "cudnn|fmha|flash|sm90|fprop" 1 python3 bench/attn_probe.py 128,32,8
# bf16 GEMM 4096^3: the default (ws, persistent), ping-pong, clusters of 2, and cuBLAS
run gemm_ws matmul_bf16 1 python3 bench/gemm_probe.py 128,256,64,8,4,1,1 4096
run gemm_pp matmul_bf16 1 python3 bench/gemm_probe.py 128,128,64,4,4,1,1,1,1 4096
run gemm_cl matmul_bf16 1 python3 bench/gemm_probe.py 256,128,64,8,4,1,1,2 4096
run cublas "gemm|cutlass|xmma|sm90|nvjet" 1 python3 bench/gemm_probe.py 128,256,64,8,4,1,1 4096 cublas
# the ragged GEMM 4096 x 4136 x 4072 (issue 41: 0.66x cuBLAS in both forms): load_block
# at the example's default keys, the pointer form with the schedule's choice, and cuBLAS
run ragged_lb matmul_bf16 1 python3 bench/gemm_probe.py 128,256,64,8,4,1,1 4096x4136x4072
run ragged_ptr matmul_bf16 1 env TILE_LOG_RECOMPILES=1 python3 bench/gemm_probe.py 128,256,64,8,3 4096x4136x4072 pointers
run ragged_cublas "gemm|cutlass|xmma|sm90|nvjet" 1 python3 bench/gemm_probe.py 128,256,64,8,4,1,1 4096x4136x4072 cublas
# Triton's programs where tile's pointer form trails (issue 41): the LayerNorm backward
# (dx with partial sums under locks, then their reduction) and softmax at 4096 columns
run lnbwd_tile layer_norm_bwd 2 python3 bench/tp_probe.py lnbwd 4096 tile
run lnbwd_triton layer_norm_bwd 2 python3 bench/tp_probe.py lnbwd 4096 triton
run softmax_tile softmax 1 python3 bench/tp_probe.py softmax 4096 tile
run softmax_triton softmax 1 python3 bench/tp_probe.py softmax 4096 triton
run lnfwd_tile layer_norm_fwd 1 python3 bench/tp_probe.py lnfwd 4096 tile
run lnfwd_triton layer_norm_fwd 1 python3 bench/tp_probe.py lnfwd 4096 triton
