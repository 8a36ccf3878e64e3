"""f8 dots on wgmma (sm_90a) against torch on the GPU: examples/matmul_fp8.tile (f8e4m3
A [M, K] and W [N, K], rowwise or per-tensor f32 scales in the epilogue, bf16 out)
over configs that exercise each swizzle of the ring (BK = 128, 64, 32: 128-, 64- and
32-byte rows), one box or several per stage, 4 and 8 warps, at shapes whose edges TMA
fills with zeros and at a row stride TMA cannot take (cp.async), each compared with a
float64 product of the dequantized operands and with torch._scaled_mm. Each config's
PTX is checked to use the k32 f8 wgmma and to copy by TMA, so a silent fall-back to
mma.sync fails the test. Then tests/gpu/matmul_fp8_nn.tile, B [K, N] (N-major, which
wgmma cannot read for f8): through a transpose in shared memory on fp8 wgmma, or with
TILE_FP8_TRANSPOSE=0 the fall-back on mma.sync through f16.

    LD_LIBRARY_PATH=build-gpu/runtime python3 tests/gpu/test_fp8_gpu.py [LIB]
    TILE_FP8_TRANSPOSE=0 LD_LIBRARY_PATH=build-gpu/runtime python3 tests/gpu/test_fp8_gpu.py [LIB]
"""
import os
import torch
import gemm_check as g
import tilert  # noqa: E402  (on the path gemm_check sets)
from gemm_check import check, here, root, rt

FP8 = os.path.join(root, "examples", "matmul_fp8.tile")
NN = os.path.join(here, "matmul_fp8_nn.tile")
# BM, BN, BK, warps, stages[, ws[, persistent]]: ws 1 gives the copies a producer
# warpgroup, persistent 1 has each program walk tiles
CONFIGS = [(128, 256, 128, 8, 4), (128, 256, 128, 8, 3), (128, 128, 128, 8, 4), (128, 256, 64, 8, 5),
           (64, 128, 128, 4, 4), (128, 128, 64, 4, 4), (64, 64, 32, 4, 3), (256, 128, 128, 8, 3),
           (128, 256, 128, 8, 4, 1), (64, 128, 128, 4, 3, 1), (128, 256, 128, 8, 4, 1, 1)]
SHAPES = [(1024, 1024, 1024), (1000, 1040, 1008), (64, 208, 96), (1000, 1030, 1000)]
WALK = [(4096, 4096, 1024)]   # more tiles than SMs: persistent programs walk several


def quant(x):
    s = x.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / 448.0
    return (x / s).to(torch.float8_e4m3fn), s.float()


for cfg in CONFIGS:
    ptx = g.ptx_of(FP8, cfg, "--spec=div16")
    if "cp.async.bulk.tensor" not in ptx or "k32.f32.e4m3.e4m3" not in ptx:
        g.fail("matmul_fp8 %s does not copy by TMA into an f8 wgmma" % (cfg,))
    if len(cfg) > 5 and "setmaxnreg.dec" not in ptx:
        g.fail("matmul_fp8 %s has no producer warpgroup" % (cfg,))
    if len(cfg) > 6 and "nctaid.x" not in ptx:
        g.fail("matmul_fp8 %s is not persistent" % (cfg,))
    BM, BN, BK, w, s = cfg[:5]
    ws = {k: v for k, v in tilert.gemm_consts(cfg).items() if k in ("ws", "persistent")}
    for (M, N, K) in SHAPES + (WALK if len(cfg) > 6 else []):
        a, sa = quant(torch.randn(M, K, device="cuda"))
        wt, sw = quant(torch.randn(N, K, device="cuda"))
        ad, wd = a.double(), wt.double()
        for rowwise in (1, 0):
            sa_, sw_ = (sa, sw) if rowwise else (sa[:1].clone(), sw[:1].clone())
            ref = (ad @ wd.t()) * (sa_.double() if rowwise else sa_.double()[0]) * \
                  (sw_.double().t() if rowwise else sw_.double()[0])
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            k = rt.kernel(FP8, "matmul_fp8", ROWWISE=rowwise, BM=BM, BN=BN, BK=BK, warps=w, stages=s, **ws)
            k.prepare("ptr ptr ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, wt, sa_, sw_, M, N, K,
                      a.stride(0), wt.stride(0), c.stride(0))()
            torch.cuda.synchronize()
            what = "%s %s %s" % ("rowwise" if rowwise else "tensor", cfg, (M, N, K))
            check("matmul_fp8", c, ref, what)
        if K % 16 == 0 and cfg == CONFIGS[0]:   # _scaled_mm takes these: the same answer as torch's
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            k = rt.kernel(FP8, "matmul_fp8", ROWWISE=1, BM=BM, BN=BN, BK=BK, warps=w, stages=s)
            k.prepare("ptr ptr ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, wt, sa, sw, M, N, K,
                      a.stride(0), wt.stride(0), c.stride(0))()
            theirs = torch._scaled_mm(a, wt.t(), scale_a=sa, scale_b=sw.t().contiguous(), out_dtype=torch.bfloat16)
            torch.cuda.synchronize()
            check("matmul_fp8 vs _scaled_mm", c, theirs.double(), "vs _scaled_mm %s %s" % (cfg, (M, N, K)))

# B [K, N]: on fp8 wgmma through a transpose in shared memory (passes/shared.c), or,
# with TILE_FP8_TRANSPOSE=0 in the environment (tilec and the runtime read it), on
# mma.sync through f16 (tests/gpu/test_fp8_nmajor_gpu.py checks more configs of the
# transpose)
transpose = os.environ.get("TILE_FP8_TRANSPOSE", "1") != "0"
ptx = g.ptx_of(NN, (128, 128, 64, 4, 3), "--spec=div16")
if transpose and ("k32.f32.e4m3.e4m3" not in ptx or "mma.sync" in ptx):
    g.fail("matmul_fp8_nn is not on fp8 wgmma")
if not transpose and ("wgmma" in ptx or "mma.sync" not in ptx):
    g.fail("matmul_fp8_nn is not on mma.sync")
for (M, N, K) in SHAPES[1:]:
    a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(K, N, device="cuda").to(torch.float8_e4m3fn)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float32)
    k = rt.kernel(NN, "matmul_fp8_nn", BM=128, BN=128, BK=64, warps=4, stages=3)
    k.prepare("ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, b, M, N, K, a.stride(0), b.stride(0), c.stride(0))()
    torch.cuda.synchronize()
    check("matmul_fp8_nn", c, a.double() @ b.double(), "nn (%s) %s" % ("wgmma" if transpose else "mma.sync", (M, N, K)))
print("fp8: %d failed" % g.failed)
raise SystemExit(1 if g.failed else 0)
