"""f8 dots whose B is N-major ([K, N], N contiguous) or whose A is M-major ([K, M]) on
fp8 wgmma through a transpose in shared memory (passes/shared.c: the ring keeps the
tile as copied, the warps write it K-major into an NVMMA buffer, fence.proxy.async and
a barrier, then wgmma), against a float64 product on the GPU, and against
torch._scaled_mm where it takes the shapes:
  - tests/gpu/matmul_fp8_nn.tile (load_block, TMA ring) over configs of each K-major
    swizzle of the transpose (BK = 128, 64, 32: 128-, 64-, 32-byte rows), 4 and 8
    warps, 2 to 4 stages, at shapes whose edges TMA fills with zeros and at a row
    stride TMA cannot take (cp.async);
  - tests/lit/passes/wgmma_fp8_nmajor.tile's ptr_nn (the pointer form, masked, bf16 out)
    and tn (A [K, M] read as trans, f8e5m2).
Each config's PTX must hold the k32 fp8 wgmma and the proxy fence and no mma.sync, so
a silent fall-back fails. Exit status 77 without torch or a GPU.

    TILEC=build-gpu/tilec LD_LIBRARY_PATH=build-gpu/runtime \\
        python3 tests/gpu/test_fp8_nmajor_gpu.py build-gpu/runtime/libtileRT.so
"""
import os
import sys
try:
    import torch
except ImportError:
    print("no torch: skipped")
    raise SystemExit(77)
if not torch.cuda.is_available():
    print("no GPU: skipped")
    raise SystemExit(77)
import gemm_check as g  # noqa: E402
from gemm_check import check, here, root, rt  # noqa: E402

NN = os.path.join(here, "matmul_fp8_nn.tile")
LIT = os.path.join(root, "tests", "lit", "passes", "wgmma_fp8_nmajor.tile")
# BM, BN, BK, warps, stages
CONFIGS = [(128, 128, 64, 4, 3), (128, 128, 128, 4, 3), (128, 128, 128, 8, 4), (64, 128, 128, 4, 4),
           (128, 256, 64, 8, 3), (128, 64, 32, 4, 2), (64, 64, 32, 4, 3)]
SHAPES = [(1024, 1024, 1024), (1000, 1040, 1008), (64, 208, 96), (1000, 1032, 1000)]


def fp8(x, dtype=torch.float8_e4m3fn):
    return x.to(dtype)


def ptx_ok(name, ptx, want="k32.f32.e4m3.e4m3"):
    if want not in ptx or "fence.proxy.async.shared::cta" not in ptx or "mma.sync" in ptx:
        g.fail("%s is not on fp8 wgmma through the transpose" % name)


for cfg in CONFIGS:
    ptx_ok("matmul_fp8_nn %s" % (cfg,), g.ptx_of(NN, cfg, "--spec=div16"))
    BM, BN, BK, w, s = cfg
    for (M, N, K) in SHAPES:
        a = fp8(torch.randn(M, K, device="cuda"))
        b = fp8(torch.randn(K, N, device="cuda"))
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float32)
        k = rt.kernel(NN, "matmul_fp8_nn", BM=BM, BN=BN, BK=BK, warps=w, stages=s)
        k.prepare("ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, b, M, N, K, a.stride(0), b.stride(0), c.stride(0))()
        torch.cuda.synchronize()
        check("matmul_fp8_nn", c, a.double() @ b.double(), "nn %s %s" % (cfg, (M, N, K)))
        if cfg == CONFIGS[0] and M % 16 == 0 and N % 16 == 0 and K % 16 == 0:
            one = torch.ones((), device="cuda")
            theirs = torch._scaled_mm(a, b.t().contiguous().t(), scale_a=one, scale_b=one, out_dtype=torch.float32)
            check("matmul_fp8_nn vs _scaled_mm", c, theirs.double(), "vs _scaled_mm %s" % ((M, N, K),))

# the pointer form: masked edges, bf16 out
ptx_ok("ptr_nn", g.ptx_of(LIT, (128, 128, 128, 4, 3), "--spec=div16", "--kernel", "ptr_nn"))
for (M, N, K) in SHAPES:
    a = fp8(torch.randn(M, K, device="cuda"))
    b = fp8(torch.randn(K, N, device="cuda"))
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    k = rt.kernel(LIT, "ptr_nn")
    k.prepare("ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, b, M, N, K, a.stride(0), b.stride(0), c.stride(0))()
    torch.cuda.synchronize()
    check("ptr_nn", c, a.double() @ b.double(), "ptr_nn %s" % ((M, N, K),))

# A [K, M] (M-major, read as trans) and W [N, K]: one 64 x 128 tile, f8e5m2
ptx_ok("tn", g.ptx_of(LIT, (64, 128, 64, 4, 3), "--spec=div16", "--kernel", "tn"), "k32.f32.e5m2.e5m2")
for K in (64, 128, 1024):
    at = fp8(torch.randn(K, 64, device="cuda"), torch.float8_e5m2)
    wt = fp8(torch.randn(128, K, device="cuda"), torch.float8_e5m2)
    c = torch.full((64, 128), float("nan"), device="cuda", dtype=torch.float32)
    k = rt.kernel(LIT, "tn")
    k.prepare("ptr ptr ptr i32", c, at, wt, K)()
    torch.cuda.synchronize()
    check("tn", c, at.double().t() @ wt.double().t(), "tn K=%d" % K)
print("fp8 n-major: %d failed" % g.failed)
sys.exit(1 if g.failed else 0)
