"""The TMA path (sm_90a) against torch on the GPU: GEMMs whose operands are block loads
(examples/matmul_bf16.tile; tests/gpu/matmul_tma_nt.tile for B given as [N, K]) over
configs that exercise each swizzle of the ring (128, 64 and 32 bytes: BK = 64, 32, 16
for A; B as loaded, and B^T), one box or several per stage, at shapes whose edges TMA
fills with zeros (M, N, K not multiples of the block, strides multiples of 16) and at
shapes that take the cp.async variant (a stride of 999), each compared with a float64
product. Then the runtime's fall-back: a negative row stride (A read bottom-up)
passes the class checks (divisible by 16, aligned) but no tensor map takes it, so the
launch must run the cp.async variant and still be right. Each config's PTX is checked
to copy by TMA (cp.async.bulk.tensor), so a silent fall-back fails the test.

    LD_LIBRARY_PATH=build-gpu/runtime python3 tests/gpu/test_tma_gpu.py [LIB]
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
NT = os.path.join(here, "matmul_tma_nt.tile")
# BM, BN, BK, warps, stages
CONFIGS = [(128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (128, 128, 64, 8, 3), (128, 128, 32, 4, 4),
           (64, 128, 16, 4, 4), (256, 128, 64, 8, 3), (64, 64, 64, 4, 2), (128, 64, 32, 4, 3)]
SHAPES = [(1024, 1024, 1024), (1000, 1040, 1008), (64, 208, 80), (1000, 1030, 999)]
failed = 0
tilec = os.environ.get("TILEC", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(lib))), "tilec"))


def check(name, c, ref, what):
    global failed
    err = ((c.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    ok = err < 1e-2 and torch.isfinite(c).all().item()
    failed += not ok
    print("%s %s rel err %.2e%s" % ("OK  " if ok else "FAIL", what, err, "" if ok else "  <-- " + name))


def copies_by_tma(path, BM, BN, BK, w, s):
    ptx = subprocess.run([tilec, path, "--emit=ptx", "--spec=div16", "-D", "BM=%d" % BM, "-D", "BN=%d" % BN,
                          "-D", "BK=%d" % BK, "-D", "warps=%d" % w, "-D", "stages=%d" % s],
                         capture_output=True, text=True, check=True).stdout
    return "cp.async.bulk.tensor" in ptx and "wgmma.mma_async" in ptx


def run_nn(cfg, a, b, M, N, K, stride_am=None):
    BM, BN, BK, w, s = cfg
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    k = rt.kernel(NN, "matmul_bf16", BM=BM, BN=BN, BK=BK, warps=w, stages=s)
    k.prepare("ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, b, M, N, K,
              a.stride(0) if stride_am is None else stride_am, b.stride(0), c.stride(0))()
    torch.cuda.synchronize()
    return c


for cfg in CONFIGS:
    for path in (NN, NT):
        if not copies_by_tma(path, *cfg):
            failed += 1
            print("FAIL %s %s does not copy by TMA" % (os.path.basename(path), cfg))
    for (M, N, K) in SHAPES:
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        check("matmul_bf16", run_nn(cfg, a, b, M, N, K), a.double() @ b.double(), "nn %s %s" % (cfg, (M, N, K)))
        bt = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        BM, BN, BK, w, s = cfg
        k = rt.kernel(NT, "matmul_tma_nt", BM=BM, BN=BN, BK=BK, warps=w, stages=s)
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
print("tma: %d failed" % failed)
sys.exit(1 if failed else 0)
