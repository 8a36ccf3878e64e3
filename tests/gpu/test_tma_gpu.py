"""The TMA path (sm_90a) against torch on the GPU: GEMMs whose operands are block loads
(examples/matmul_bf16.tile; tests/gpu/matmul_tma_nt.tile for B given as [N, K]) over
configs that exercise each swizzle of the ring (128, 64 and 32 bytes: BK = 64, 32, 16
for A; B as loaded, and B^T), one box or several per stage, at shapes whose edges TMA
fills with zeros (M, N, K not multiples of the block, strides multiples of 16) and at
shapes that take the cp.async variant (a stride of 999), each compared with a float64
product. Then the runtime's fall-back: a negative row stride (A read bottom-up)
passes the class checks (divisible by 16, aligned) but no tensor map takes it, so the
launch must run the cp.async variant and still be right. Each config's PTX is checked
to copy by TMA (cp.async.bulk.tensor), and matmul_bf16's to store C by TMA
(store_block, passes/tmastore.c), so a silent fall-back fails the test; its shapes with
M or N not a multiple of the block check the stores' clipped edges.

    LD_LIBRARY_PATH=build-gpu/runtime python3 tests/gpu/test_tma_gpu.py [LIB]
"""
import os
import torch
import gemm_check as g
import tilert  # noqa: E402  (on the path gemm_check sets)
from gemm_check import check, here, root, rt

NN = os.path.join(root, "examples", "matmul_bf16.tile")
NT = os.path.join(here, "matmul_tma_nt.tile")
# BM, BN, BK, warps, stages[, ws[, persistent[, cluster]]]: ws 1 gives the copies a
# producer warpgroup, persistent 1 has each program walk tiles, cluster 2 runs each
# program on two CTAs (its rows split, B multicast: passes/cluster.c)
CONFIGS = [(128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (128, 128, 64, 8, 3), (128, 128, 32, 4, 4),
           (64, 128, 16, 4, 4), (256, 128, 64, 8, 3), (64, 64, 64, 4, 2), (128, 64, 32, 4, 3),
           (128, 256, 64, 8, 4, 1), (128, 256, 64, 8, 3, 1), (128, 128, 64, 4, 4, 1), (64, 64, 64, 4, 2, 1),
           (128, 128, 32, 4, 3, 1),
           # ws and persistent: one program per SM walks the tiles (passes/persistent.c)
           (128, 256, 64, 8, 4, 1, 1), (128, 128, 64, 4, 4, 1, 1), (64, 64, 64, 4, 2, 1, 1),
           # clusters: B's boxes shared out (BN 256, 128), or its rows (BN 64; nt's K-major B)
           (256, 256, 64, 8, 4, 1, 1, 2), (256, 128, 64, 8, 4, 1, 1, 2), (256, 256, 64, 8, 4, 0, 0, 2),
           (256, 128, 64, 8, 3, 1, 0, 2), (128, 64, 64, 4, 3, 0, 0, 2), (128, 128, 64, 4, 4, 1, 1, 2),
           # ping-pong: two consumer warpgroups walk alternate tiles (alone and on clusters)
           (128, 128, 64, 4, 4, 1, 1, 1, 1), (64, 128, 64, 4, 3, 1, 1, 1, 1), (256, 128, 64, 4, 4, 1, 1, 2, 1)]


# TMA_NEW_ONLY=1 (scripts/gpu-suite.sh new): only the cluster and ping-pong configs
if os.environ.get("TMA_NEW_ONLY") == "1":
    CONFIGS = [c for c in CONFIGS if len(c) > 7]

SHAPES = [(1024, 1024, 1024), (1000, 1040, 1008), (64, 208, 80), (1000, 1030, 999)]
# more tiles than the H200's 132 SMs, so that persistent programs walk several
WALK = [(2064, 4096, 528), (4096, 4096, 1024)]


def copies_by_tma(path, *cfg):
    ptx = g.ptx_of(path, cfg, "--spec=div16")
    ok = "cp.async.bulk.tensor" in ptx and "wgmma.mma_async" in ptx
    # matmul_bf16 writes C with store_block: stored by TMA from a staging buffer
    ok = ok and (path != NN or "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in ptx)
    ok = ok and (len(cfg) < 6 or not cfg[5] or "setmaxnreg.dec" in ptx)
    ok = ok and (len(cfg) < 8 or cfg[7] < 2 or (".reqnctapercluster" in ptx and ".multicast::cluster" in ptx))
    ok = ok and (len(cfg) < 9 or not cfg[8] or "bar.arrive 3, 256;" in ptx)   # the warpgroups' first turn
    return ok and (len(cfg) < 7 or not cfg[6] or "nctaid.x" in ptx or "nclusterid.x" in ptx)


def run_nn(cfg, a, b, M, N, K, stride_am=None):
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    k = rt.kernel(NN, "matmul_bf16", **tilert.gemm_consts(cfg))
    k.prepare("ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, b, M, N, K,
              a.stride(0) if stride_am is None else stride_am, b.stride(0), c.stride(0))()
    torch.cuda.synchronize()
    return c


for cfg in CONFIGS:
    for path in (NN, NT):
        if not copies_by_tma(path, *cfg):
            g.fail("%s %s does not copy by TMA" % (os.path.basename(path), cfg))
    for (M, N, K) in SHAPES + (WALK if len(cfg) > 6 else []):
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        check("matmul_bf16", run_nn(cfg, a, b, M, N, K), a.double() @ b.double(), "nn %s %s" % (cfg, (M, N, K)))
        bt = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        k = rt.kernel(NT, "matmul_tma_nt", **tilert.gemm_consts(cfg))
        k.prepare("ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, bt, M, N, K, a.stride(0), bt.stride(0), c.stride(0))()
        torch.cuda.synchronize()
        check("matmul_tma_nt", c, a.double() @ bt.double().t(), "nt %s %s" % (cfg, (M, N, K)))

# The fall-back at launch: A's rows read from the last up (a negative stride that is a
# multiple of 16: the class is the TMA variant's, the tensor map refuses it).
M, N, K = 512, 384, 256
a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
last_row = a[M - 1:]                      # a tensor whose data pointer is A's last row
c = run_nn((128, 128, 64, 8, 3), last_row, b, M, N, K, stride_am=-K)
check("matmul_bf16 (negative stride)", c, a.double().flip(0) @ b.double(), "fall-back, stride -%d" % K)
print("tma: %d failed" % g.failed)
raise SystemExit(1 if g.failed else 0)
