"""Runs one tile GEMM a few times for a profiler to catch (ncu), and writes its SASS:

    ncu --section SpeedOfLight --section WarpStateStats --section Occupancy \
        --section MemoryWorkloadAnalysis -k regex:matmul -c 1 \
        python3 bench/gemm_probe.py [BM,BN,BK,warps,stages[,ws,persistent,cluster,pingpong]] [SIZE] [cublas]

(cublas: then torch.matmul twice, for ncu to catch cuBLAS's kernel of the same shape)
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemm  # noqa: E402
import tilert  # noqa: E402


def main():
    cfg = tuple(int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "128,128,32,4,4").split(","))
    S = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
    rt = tilert.Runtime(os.environ.get("TILE_LIB", "libtileRT.so"))
    a = torch.randn(S, S, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(S, S, device="cuda", dtype=torch.bfloat16)
    _, run = gemm.tile_gemm_bf16(rt, cfg, a, b)
    for _ in range(3):
        run()
    if len(sys.argv) > 3 and sys.argv[3] == "cublas":
        for _ in range(2):
            a @ b
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
