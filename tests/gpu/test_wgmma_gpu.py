"""The wgmma path (sm_90a) against torch on the GPU: bf16 and f16 GEMMs over tile
configs that exercise each descriptor form (128-, 64- and 32-byte swizzles, A
K-major, B MN-major as loaded and K-major as B^T, one and two m64 bands per
warpgroup, one and two warpgroups), at aligned and ragged shapes (masked edges),
each result compared with a float64 product; and each kernel's PTX checked to use
wgmma (so a silent fall-back to mma.sync fails the test).

    LD_LIBRARY_PATH=build-gpu/runtime python3 tests/gpu/test_wgmma_gpu.py [LIB]
"""
import os
import torch
import gemm_check as g
from gemm_check import check, here, root, rt

NN = os.path.join(root, "examples", "matmul_bf16.tile")
NT = os.path.join(here, "matmul_nt.tile")
# BM, BN, BK, warps, stages
CONFIGS = [(128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (64, 128, 64, 4, 3),
           (128, 128, 64, 4, 3), (128, 128, 32, 4, 3), (128, 64, 16, 4, 4), (256, 128, 64, 8, 3),
           (64, 256, 64, 4, 2)]
SHAPES = [(1024, 1024, 1024), (1000, 1030, 999), (64, 200, 72)]


def uses_wgmma(path, BM, BN, BK, w, s):
    return "wgmma.mma_async" in g.ptx_of(path, (BM, BN, BK, w, s))


for (BM, BN, BK, w, s) in CONFIGS:
    for path in (NN, NT):
        if not uses_wgmma(path, BM, BN, BK, w, s):
            g.fail("%s %s does not use wgmma" % (os.path.basename(path), (BM, BN, BK, w, s)))
    for (M, N, K) in SHAPES:
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        k = rt.kernel(NN, "matmul_bf16", BM=BM, BN=BN, BK=BK, warps=w, stages=s, ws=0, persistent=0)
        k.prepare("ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, b, M, N, K, a.stride(0), b.stride(0), c.stride(0))()
        torch.cuda.synchronize()
        check("matmul_bf16", c, a.double() @ b.double(), "nn %s %s" % ((BM, BN, BK, w, s), (M, N, K)))
        bt = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        c.fill_(float("nan"))
        k = rt.kernel(NT, "matmul_nt", BM=BM, BN=BN, BK=BK, warps=w, stages=s)
        k.prepare("ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, bt, M, N, K, a.stride(0), bt.stride(0), c.stride(0))()
        torch.cuda.synchronize()
        check("matmul_nt", c, a.double() @ bt.double().t(), "nt %s %s" % ((BM, BN, BK, w, s), (M, N, K)))
print("wgmma: %d failed" % g.failed)
raise SystemExit(1 if g.failed else 0)
