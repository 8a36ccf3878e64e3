"""The wgmma path (sm_90a) against torch on the GPU: bf16 and f16 GEMMs over tile
configs that exercise each descriptor form (128-, 64- and 32-byte swizzles, A
K-major, B MN-major as loaded and K-major as B^T, one and two m64 bands per
warpgroup, one and two warpgroups), at aligned and ragged shapes (masked edges),
each result compared with a float64 product; and each kernel's PTX checked to use
wgmma (so a silent fall-back to mma.sync fails the test).

    LD_LIBRARY_PATH=build-gpu/runtime python3 tests/gpu/test_wgmma_gpu.py [LIB]
"""
import os
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import subprocess
import torch
import tilert

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..", "..")
lib = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TILE_LIB", "build-gpu/runtime/libtileRT.so")
rt = tilert.Runtime(lib)

NN = os.path.join(root, "examples", "matmul_bf16.tile")
NT = os.path.join(here, "matmul_nt.tile")
# BM, BN, BK, warps, stages
CONFIGS = [(128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (64, 128, 64, 4, 3),
           (128, 128, 64, 4, 3), (128, 128, 32, 4, 3), (128, 64, 16, 4, 4), (256, 128, 64, 8, 3),
           (64, 256, 64, 4, 2)]
SHAPES = [(1024, 1024, 1024), (1000, 1030, 999), (64, 200, 72)]
failed = 0


def check(name, c, ref, what):
    global failed
    err = ((c.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    ok = err < 1e-2 and torch.isfinite(c).all().item()
    failed += not ok
    print("%s %s rel err %.2e%s" % ("OK  " if ok else "FAIL", what, err, "" if ok else "  <-- " + name))


tilec = os.environ.get("TILEC", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(lib))), "tilec"))


def uses_wgmma(path, BM, BN, BK, w, s):
    ptx = subprocess.run([tilec, path, "--emit=ptx", "-D", "BM=%d" % BM, "-D", "BN=%d" % BN, "-D", "BK=%d" % BK,
                          "-D", "warps=%d" % w, "-D", "stages=%d" % s], capture_output=True, text=True, check=True).stdout
    return "wgmma.mma_async" in ptx


for (BM, BN, BK, w, s) in CONFIGS:
    for path in (NN, NT):
        if not uses_wgmma(path, BM, BN, BK, w, s):
            failed += 1
            print("FAIL %s %s does not use wgmma" % (os.path.basename(path), (BM, BN, BK, w, s)))
    for (M, N, K) in SHAPES:
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        k = rt.kernel(NN, "matmul_bf16", BM=BM, BN=BN, BK=BK, warps=w, stages=s)
        k.prepare("ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, b, M, N, K, a.stride(0), b.stride(0), c.stride(0))()
        torch.cuda.synchronize()
        check("matmul_bf16", c, a.double() @ b.double(), "nn %s %s" % ((BM, BN, BK, w, s), (M, N, K)))
        bt = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        c.fill_(float("nan"))
        k = rt.kernel(NT, "matmul_nt", BM=BM, BN=BN, BK=BK, warps=w, stages=s)
        k.prepare("ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, bt, M, N, K, a.stride(0), bt.stride(0), c.stride(0))()
        torch.cuda.synchronize()
        check("matmul_nt", c, a.double() @ bt.double().t(), "nt %s %s" % ((BM, BN, BK, w, s), (M, N, K)))
print("wgmma: %d failed" % failed)
sys.exit(1 if failed else 0)
