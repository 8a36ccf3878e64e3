"""The LM head's dw step (one chunk of 1024 rows): pointer stores under ifs (old) against TMA stores (new)."""
import sys, torch, triton
sys.path.insert(0, "python")
import tile
T, D, V = 1024, 4096, 32000
m = tile.load("bench/probes/dw.tile")
x = torch.randn(T, D, device="cuda", dtype=torch.bfloat16)
g = torch.randn(T, V, device="cuda", dtype=torch.bfloat16) / 32
out = torch.empty(D, V, device="cuda", dtype=torch.bfloat16)
pa = torch.empty(D, V, device="cuda", dtype=torch.float32)
flops = 2 * T * D * V
ref = (x.t().float() @ g.float())
for k in ("dw_old", "dw_new"):
    kern = getattr(m, k)
    f = lambda: kern(out, x, g, 0, T, T, V, pa)
    f(); torch.cuda.synchronize()
    err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
    ms = triton.testing.do_bench(f, warmup=50, rep=300)
    print("%-8s %.4f ms %.1f TFLOP/s  rel err %.2e" % (k, ms, flops / ms / 1e9, err), flush=True)
ms = triton.testing.do_bench(lambda: torch.matmul(x.t(), g, out=out), warmup=50, rep=300)
print("cuBLAS   %.4f ms %.1f TFLOP/s" % (ms, flops / ms / 1e9))
