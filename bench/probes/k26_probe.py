"""Where k26's time goes (the SwiGLU backward's dX GEMM with its epilogue), variants side by side."""
import os, sys, torch, triton
sys.path.insert(0, "python")
import tile
T, N, K = int(os.environ.get("T", "1024")), 11008, 4096
m = tile.load("bench/probes/k26.tile")
dev = "cuda"
a = torch.randn(T, K, device=dev, dtype=torch.bfloat16)
wd = torch.randn(N, K, device=dev, dtype=torch.bfloat16) / 64
g = torch.randn(T, N, device=dev, dtype=torch.bfloat16)
u = torch.randn(T, N, device=dev, dtype=torch.bfloat16)
o1 = torch.empty(T, N, device=dev, dtype=torch.bfloat16)
o2 = torch.empty(T, N, device=dev, dtype=torch.bfloat16)
flops = 2 * T * N * K
def rep(name, fn):
    fn(); torch.cuda.synchronize()
    ms = triton.testing.do_bench(fn, warmup=50, rep=300)
    print("%-14s %.4f ms  %.1f TFLOP/s" % (name, ms, flops / ms / 1e9), flush=True)
ref = None
for k in ("k26_orig", "k26_hoisted", "k26_late", "k26_noepi"):
    kern = getattr(m, k)
    f = lambda: kern(o1, o2, a, wd, u, g, T, 32000)
    rep(k, f)
    if k == "k26_orig": ref = (o1.clone(), o2.clone())
    elif k != "k26_noepi": print("   same as orig:", torch.equal(ref[0], o1), torch.equal(ref[1], o2))
rep("torch a@wd^T", lambda: torch.matmul(a, wd.t(), out=o1))
def fused():
    h = torch.matmul(a, wd.t()).float(); gf = g.float(); s = torch.sigmoid(gf)
    return (h * gf * s).bfloat16(), (h * u.float() * s * (1 + gf * (1 - s))).bfloat16()
cf = torch.compile(fused)
rep("torch.compile", cf)
