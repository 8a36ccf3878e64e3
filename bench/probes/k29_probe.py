"""k29 (the SwiGLU backward's dX GEMM with its epilogue; k26 of earlier steps, the same
kernel in bench/probes/k26.tile) at 128 x 256 with the epilogue in chunks of 32 columns
(passes/epichunk.c, the compiler's default for it now) against 128 x 128 and cuBLAS /
torch.compile. TILE_EPICHUNK=0 in the environment keeps the epilogue whole (the 2 KB
spill at 128 x 256), TILE_EPICHUNK=2 chunks it at 128 x 128 too. From the repository
root: TILE_LIB=build-gpu/runtime/libtileRT.so PYTHONPATH=python python3 bench/probes/k29_probe.py"""
import os, sys, torch, triton
sys.path.insert(0, "python")
import tile
T, N, K = int(os.environ.get("T", "1024")), 11008, 4096
m = tile.load("bench/probes/k26.tile")
a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
wd = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) / 64
g = torch.randn(T, N, device="cuda", dtype=torch.bfloat16)
u = torch.randn(T, N, device="cuda", dtype=torch.bfloat16)
o1 = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
o2 = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
flops = 2 * T * N * K
print("T %d, TILE_EPICHUNK=%s" % (T, os.environ.get("TILE_EPICHUNK", "(default 1)")), flush=True)
def rep(name, fn):
    try:
        fn(); torch.cuda.synchronize()
    except Exception as e:
        print("%-44s failed: %s" % (name, str(e).splitlines()[0][:150]), flush=True); return
    ms = triton.testing.do_bench(fn, warmup=50, rep=300)
    print("%-44s %.4f ms  %.1f TFLOP/s" % (name, ms, flops / ms / 1e9), flush=True)
ref = None
for c in [dict(stages=4), dict(BN=256, stages=4), dict(BN=256, stages=3)]:
    rep("k26_orig %s" % c, lambda: m.k26_orig(o1, o2, a, wd, u, g, T, 32000, **c))
    if ref is None: ref = (o1.clone(), o2.clone())
    else: print("   same as 128 x 128:", torch.equal(ref[0], o1), torch.equal(ref[1], o2), flush=True)
rep("k26_noepi {'BN': 256, 'stages': 4}", lambda: m.k26_noepi(o1, o2, a, wd, u, g, T, 32000, BN=256, stages=4))
rep("cuBLAS a@wd^T", lambda: torch.matmul(a, wd.t(), out=o1))
def fused():
    h = torch.matmul(a, wd.t()).float(); gf = g.float(); s = torch.sigmoid(gf)
    return (h * gf * s).bfloat16(), (h * u.float() * s * (1 + gf * (1 - s))).bfloat16()
rep("torch.compile", torch.compile(fused))
