"""Runs one tile GEMM a few times for a profiler to catch (ncu), and writes its SASS:

    ncu --section SpeedOfLight --section WarpStateStats --section Occupancy \
        --section MemoryWorkloadAnalysis -k regex:matmul -c 1 \
        python3 bench/gemm_probe.py [BM,BN,BK,warps,stages[,ws,persistent,cluster,pingpong]] [SIZE|MxNxK] [cublas|pointers]

(pointers: bench/matmul_pointers.tile, the pointer form, instead of examples/matmul_bf16.tile)

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
    shape = [int(v) for v in (sys.argv[2] if len(sys.argv) > 2 else "4096").split("x")]
    M, N, K = shape if len(shape) == 3 else shape * 3
    rt = tilert.Runtime(os.environ.get("TILE_LIB", "libtileRT.so"))
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    pointers = len(sys.argv) > 3 and sys.argv[3] == "pointers"
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "matmul_pointers.tile") if pointers else gemm.MATMUL_BF16
    if pointers and len(cfg) == 5:
        # only the tile and warps/stages given, as a Triton user writes it: the schedule
        # pass chooses ws/persistent (gemm_consts would give them as 0)
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        k = rt.kernel(path, "matmul_bf16", **dict(zip(("BM", "BN", "BK", "warps", "stages"), cfg)))
        run = k.prepare("ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, b, M, N, K, a.stride(0), b.stride(0), c.stride(0))
    else:
        _, run = gemm.tile_gemm_bf16(rt, cfg, a, b, path=path)
    for _ in range(3):
        run()
    if len(sys.argv) > 3 and sys.argv[3] == "cublas":
        for _ in range(2):
            a @ b
    torch.cuda.synchronize()
    if pointers and len(cfg) == 5:
        print("last_config:", k.last_config())


if __name__ == "__main__":
    main()
