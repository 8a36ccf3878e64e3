"""k26's main loop: configs and the transposed B against cuBLAS (T 1024, N 11008, K 4096)."""
import sys, torch, triton
sys.path.insert(0, "python")
import tile
T, N, K = 1024, 11008, 4096
m = tile.load("bench/probes/k26.tile")
a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
wd = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) / 64
wdt = wd.t().contiguous()
g = torch.randn(T, N, device="cuda", dtype=torch.bfloat16)
u = torch.randn(T, N, device="cuda", dtype=torch.bfloat16)
o1 = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
o2 = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
flops = 2 * T * N * K
ref = a @ wd.t()
def rep(name, fn, check=None):
    try:
        fn(); torch.cuda.synchronize()
    except Exception as e:
        print("%-40s failed: %s" % (name, str(e).splitlines()[0][:150]), flush=True); return
    ms = triton.testing.do_bench(fn, warmup=50, rep=300)
    ok = "" if check is None else " max err %.3e" % (check() - ref).abs().max().item()
    print("%-40s %.4f ms  %.1f TFLOP/s%s" % (name, ms, flops / ms / 1e9, ok), flush=True)
cfgs = [{}, dict(BN=256), dict(BN=256, stages=4), dict(stages=4), dict(BM=128, BN=256, BK=64, stages=3, warps=8), dict(BN=64), dict(BM=256, BN=128)]
for c in cfgs:
    rep("k26_noepi %s" % c, lambda: m.k26_noepi(o1, o2, a, wd, u, g, T, 32000, **c), lambda: o1.float())
    rep("k26_nt_noepi %s" % c, lambda: m.k26_nt_noepi(o1, o2, a, wdt, u, g, T, 32000, **c), lambda: o1.float())
for c in [{}, dict(BN=64), dict(stages=4), dict(BN=256)]:
    rep("k26_orig %s" % c, lambda: m.k26_orig(o1, o2, a, wd, u, g, T, 32000, **c))
rep("cuBLAS a@wd^T", lambda: torch.matmul(a, wd.t(), out=o1))
rep("cuBLAS a@wdt", lambda: torch.matmul(a, wdt, out=o1))
